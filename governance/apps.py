from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Quota governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from governance.exceptions import scopes

        scopes.register()
        self._record_role_changes()
        self._record_binding_changes()
        self._register_proposal_kinds()
        # Register the feature packages' tasks in every process (web, worker, tests), so
        # services enqueue them by name (core.celery.task) without importing them, and
        # eager runs (CELERY_TASK_ALWAYS_EAGER) find them.
        from governance.dashboards import tasks as dashboard_tasks  # noqa: F401
        from governance.directory import tasks as directory_tasks  # noqa: F401
        from governance.exceptions import tasks as exception_tasks  # noqa: F401
        from governance.whatif import tasks as whatif_tasks  # noqa: F401

    @staticmethod
    def _register_proposal_kinds() -> None:
        """Each module with policy writes registers its proposal kinds, with their apply
        and revert (governance.policy.reviewable), when imported: all of them, so that
        every proposal can be approved and every change reverted in any process."""
        from governance.directory import services as directory  # noqa: F401
        from governance.policy import (  # noqa: F401
            executor_binding,
            membership,
            prices,
            services,
            workload_classes,
        )

    @staticmethod
    def _record_binding_changes() -> None:
        """Executor bindings written outside the policy editor (an executor's command)
        reach the policy history as direct changes."""
        from core.signals import executor_binding_written
        from governance.policy import executor_binding

        executor_binding_written.connect(
            executor_binding.record_direct_binding_change, dispatch_uid="executor_binding.direct"
        )

    @staticmethod
    def _record_role_changes() -> None:
        """Role groups and exception-owner scopes changed outside the policy services
        reach the policy history too (governance.policy.membership)."""
        from django.contrib.auth import get_user_model
        from django.db.models.signals import m2m_changed, post_delete, post_save

        from governance.exceptions.models import ExceptionOwner
        from governance.policy import membership

        m2m_changed.connect(
            membership.on_groups_changed,
            sender=get_user_model().groups.through,
            dispatch_uid="membership.groups",
        )
        post_save.connect(
            membership.on_exception_owner_saved,
            sender=ExceptionOwner,
            dispatch_uid="membership.owner_saved",
        )
        post_delete.connect(
            membership.on_exception_owner_deleted,
            sender=ExceptionOwner,
            dispatch_uid="membership.owner_deleted",
        )
