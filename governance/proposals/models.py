"""Policy proposals: with POLICY_CHANGES_NEED_REVIEW, an admin's policy write is kept
here until another admin approves it; only then does it apply, through the same
service, and the PolicyChange it made is linked back (`applied_change`).

A proposal holds the write as data: what it changes (`kind` and the object), the
proposed document in the history's format (`payload`), the version it was based on,
and the reason. Every review step is recorded on the row itself, which then never
changes again: approved, rejected and withdrawn proposals are the evidence.
"""

from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models import F, Q

from core.bounds import MAX_TEXT
from fleet.models import JobQueue, QuotaShare, Team, UrgencyDefinition, WorkloadClass
from governance.policy.models import PolicyChange


class PolicyProposal(models.Model):
    class Kind(models.TextChoices):
        SHARE_CREATE = "share_create", "New share"
        SHARE_UPDATE = "share_update", "Change of a share"
        QUEUE_CREATE = "queue_create", "New queue"
        QUEUE_CAPACITY = "queue_capacity", "Change of a queue's capacity"
        URGENCY_CREATE = "urgency_create", "New urgency definition"
        URGENCY_UPDATE = "urgency_update", "Change of an urgency definition"
        TEAM_CREATE = "team_create", "New team"
        TEAM_UPDATE = "team_update", "Change of a team's membership"
        TEAM_DELETE = "team_delete", "Deletion of a team"
        ROLES = "role_assignment", "Change of a user's roles"
        CLASS_CREATE = "class_create", "New workload class"
        CLASS_UPDATE = "class_update", "Change of a workload class"
        CLASS_DELETE = "class_delete", "Deletion of a workload class"
        PRICE = "price", "Change of an instance type's price"
        QUEUE_BINDING = "queue_binding", "Change of a queue's executor binding"
        TYPE_BINDING = "type_binding", "Change of an instance type's executor binding"
        MAPPING_CREATE = "mapping_create", "New directory group mapping"
        MAPPING_DELETE = "mapping_delete", "Removal of a directory group mapping"
        REVERT = "revert", "Revert of a change"

    class State(models.TextChoices):
        PENDING = "PENDING", "Waiting for another admin's review"
        APPLIED = "APPLIED", "Approved and applied"
        REJECTED = "REJECTED", "Rejected"
        WITHDRAWN = "WITHDRAWN", "Withdrawn"

    kind = models.CharField(max_length=16, choices=Kind)
    state = models.CharField(max_length=10, choices=State, default=State.PENDING, db_index=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)])
    object_repr = models.CharField(max_length=200)
    queue = models.ForeignKey(
        JobQueue, null=True, blank=True, on_delete=models.CASCADE, related_name="proposals"
    )
    share = models.ForeignKey(
        QuotaShare, null=True, blank=True, on_delete=models.CASCADE, related_name="proposals"
    )
    urgency = models.ForeignKey(
        UrgencyDefinition,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="proposals",
    )
    reverts = models.ForeignKey(
        PolicyChange, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # SET_NULL: approving a team's deletion deletes the team, and the proposal stays.
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="proposals"
    )
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # SET_NULL: approving a class's deletion deletes the class, and the proposal stays.
    workload_class = models.ForeignKey(
        WorkloadClass, null=True, blank=True, on_delete=models.SET_NULL, related_name="proposals"
    )
    # The object as it was when proposed, and what the proposal would make it.
    before = models.JSONField(null=True, blank=True)
    payload = models.JSONField(default=dict)
    base_version = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    applied_change = models.ForeignKey(
        PolicyChange, null=True, blank=True, on_delete=models.SET_NULL, related_name="proposals"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(reviewer__isnull=True)
                | Q(author__isnull=True)
                | ~Q(reviewer=F("author")),
                name="proposal_reviewer_not_author",
            ),
        ]

    def __str__(self):
        return f"Proposal #{self.pk}: {self.get_kind_display()} {self.object_repr}"

    @property
    def is_pending(self) -> bool:
        return self.state == self.State.PENDING
