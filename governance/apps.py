from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Quota governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from governance.exceptions import scopes

        scopes.register()
        # Register the feature packages' tasks in every process (web, worker, tests), so
        # services enqueue them by name (config.celery.task) without importing them, and
        # eager runs (CELERY_TASK_ALWAYS_EAGER) find them.
        from governance.dashboards import tasks as dashboard_tasks  # noqa: F401
        from governance.exceptions import tasks as exception_tasks  # noqa: F401
        from governance.whatif import tasks as whatif_tasks  # noqa: F401
