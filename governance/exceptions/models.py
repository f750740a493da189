"""Exception requests: a team's temporary departure from policy, decided by an owner.

A request moves DRAFT -> SUBMITTED -> APPROVED | DENIED; an approved one becomes
ACTIVE at its window's start and EXPIRED at its end, or REVOKED early. Every
transition is a conditional UPDATE in governance.exceptions.transitions, so it
happens exactly once; each leaves an ExceptionEvent (the request's timeline).
"""

from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models import F, Q

from core.bounds import MAX_TEXT
from fleet.models import InstanceType, JobQueue, QuotaShare, Team, UrgencyDefinition


class ExceptionOwner(models.Model):
    """A person who decides the exception requests of one queue, or of one share."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="exception_scopes"
    )
    queue = models.ForeignKey(
        JobQueue, null=True, blank=True, on_delete=models.CASCADE, related_name="exception_owners"
    )
    share = models.ForeignKey(
        QuotaShare,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="exception_owners",
    )

    class Meta:
        ordering = ["user__username", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(queue__isnull=False) & Q(share__isnull=True))
                | (Q(queue__isnull=True) & Q(share__isnull=False)),
                name="exceptionowner_one_scope",
            ),
            models.UniqueConstraint(
                fields=["user", "queue"],
                condition=Q(queue__isnull=False),
                name="exceptionowner_unique_queue",
            ),
            models.UniqueConstraint(
                fields=["user", "share"],
                condition=Q(share__isnull=False),
                name="exceptionowner_unique_share",
            ),
        ]

    def __str__(self):
        return f"{self.user} decides for {self.queue or self.share}"


class ExceptionRequest(models.Model):
    Kind = UrgencyDefinition.Kind

    class State(models.TextChoices):
        DRAFT = "DRAFT", "Draft"
        SUBMITTED = "SUBMITTED", "Submitted"
        APPROVED = "APPROVED", "Approved"
        DENIED = "DENIED", "Denied"
        ACTIVE = "ACTIVE", "Active"
        EXPIRED = "EXPIRED", "Expired"
        REVOKED = "REVOKED", "Revoked"

    kind = models.CharField(max_length=24, choices=UrgencyDefinition.Kind)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="exception_requests")
    queue = models.ForeignKey(JobQueue, on_delete=models.PROTECT, related_name="exception_requests")
    # The share the request concerns: the one that gets capacity, or the share of all its jobs.
    share = models.ForeignKey(
        QuotaShare,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="exception_requests",
    )
    jobs = models.ManyToManyField("fleet.Job", blank=True, related_name="exception_requests")
    instance_type = models.ForeignKey(
        InstanceType, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    extra_instances = models.PositiveIntegerField(null=True, blank=True)
    urgency = models.ForeignKey(
        UrgencyDefinition, on_delete=models.PROTECT, related_name="exception_requests"
    )
    justification = models.TextField(max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)])
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()

    state = models.CharField(max_length=10, choices=State, default=State.DRAFT, db_index=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="exception_requests"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    # The decider's memberships as the decision checked them (separation of duties): the
    # request's team (member, lead), their roles and exception-owner scopes.
    decided_membership = models.JSONField(null=True, blank=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # What activation changed, so expiry takes back exactly that (see services.exceptions).
    applied = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "window_start"]),
            models.Index(fields=["state", "window_end"]),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(window_end__gt=F("window_start")), name="exception_window_positive"
            ),
            models.CheckConstraint(
                condition=~Q(kind="TEMPORARY_CAPACITY")
                | (
                    Q(share__isnull=False)
                    & Q(instance_type__isnull=False)
                    & Q(extra_instances__gte=1)
                ),
                name="exception_capacity_has_share_type_and_instances",
            ),
        ]

    def __str__(self):
        return f"Exception #{self.pk}: {self.get_kind_display()} for {self.team}"

    @property
    def window(self):
        return self.window_end - self.window_start


class ExceptionEvent(models.Model):
    """One step of a request's timeline. Append-only."""

    class Type(models.TextChoices):
        FILED = "FILED", "Filed"
        SUBMITTED = "SUBMITTED", "Submitted for decision"
        WITHDRAWN = "WITHDRAWN", "Withdrawn to a draft by the requester"
        APPROVED = "APPROVED", "Approved"
        DENIED = "DENIED", "Denied"
        ACTIVATED = "ACTIVATED", "Took effect"
        APPLY_FAILED = "APPLY_FAILED", "Could not take effect"
        EXPIRED = "EXPIRED", "Expired"
        REVOKED = "REVOKED", "Revoked"

    request = models.ForeignKey(ExceptionRequest, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    type = models.CharField(max_length=16, choices=Type)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )

    class Meta:
        ordering = ["at", "id"]

    def __str__(self):
        return f"#{self.request_id} {self.type} at {self.at:%Y-%m-%d %H:%M}"
