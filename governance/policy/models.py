"""The record of every change of the policy (the policy's rows are fleet.models)."""

from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models

from core.bounds import MAX_TEXT
from fleet.models import JobQueue, QuotaShare, Team, UrgencyDefinition, WorkloadClass


class PolicyChange(models.Model):
    """One recorded change of governance state. Append-only: a revert is a new change."""

    class Cause(models.TextChoices):
        EDIT = "edit", "Edit"
        EXCEPTION = "exception", "Exception"
        REVERT = "revert", "Revert"
        IMPORT = "import", "Import"
        # Made outside the product's services (a shell, a script, a data migration): no
        # review and no reason was possible; recorded so that it is at least seen.
        DIRECT = "direct", "Direct change"
        # Made by a login or sync through the directory, as the admins' directory
        # mapping says (governance.directory): the reason names the user and the groups.
        DIRECTORY = "directory", "Directory"

    class Target(models.TextChoices):
        SHARE = "share", "Quota share"
        QUEUE = "queue", "Queue capacity"
        URGENCY = "urgency", "Urgency definition"
        TEAM = "team", "Team membership"
        ROLE = "role", "Role assignment"
        WORKLOAD_CLASS = "workload_class", "Workload class"
        PRICE = "price", "Instance type price"
        # A queue's or an instance type's settings for an executor (a change with its
        # queue is the queue's); their fields are the executor's binding schema's.
        EXECUTOR_BINDING = "executor_binding", "Executor binding"
        GROUP_MAPPING = "group_mapping", "Directory group mapping"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)])
    cause = models.CharField(max_length=16, choices=Cause, default=Cause.EDIT)
    target = models.CharField(max_length=16, choices=Target)
    queue = models.ForeignKey(
        JobQueue, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    share = models.ForeignKey(
        QuotaShare, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    urgency = models.ForeignKey(
        UrgencyDefinition, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    # Their indexes are the Meta ones below, built concurrently (migration 0013): the
    # history is a large table (tests/core/test_migrations_policy.py).
    team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="changes",
        db_index=False,
    )
    # Its index is the Meta one below, built concurrently (migration 0015).
    workload_class = models.ForeignKey(
        WorkloadClass,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="changes",
        db_index=False,
    )
    # The user whose roles a ROLE change changed.
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    object_repr = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reverts = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reverted_by"
    )
    exception_request = models.ForeignKey(
        "governance.ExceptionRequest",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="policy_changes",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["target", "-created_at"]),
            models.Index(fields=["team", "-created_at"], name="policychange_team_idx"),
            models.Index(fields=["subject", "-created_at"], name="policychange_subject_idx"),
            models.Index(fields=["workload_class", "-created_at"], name="policychange_class_idx"),
        ]

    def __str__(self):
        return f"{self.get_target_display()} {self.object_repr} ({self.get_cause_display()})"
