"""What-if comparisons: a draft of a queue's policy, replayed against the current one.

A comparison holds two policy documents in the engine's scenario format (the
current policy as cloned, and the draft the admin edits), the workload both are
replayed on, the run's progress and its results. Nothing here is live policy: a
draft changes the queue only when applied, through governance.policy.services,
and the history entries it makes are linked back (`applied_changes`).
Every review step is an append-only WhatIfReview row (the stability signals count them).
"""

from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models import F, Q

from core.bounds import MAX_TEXT
from fleet.models import JobQueue
from governance.exceptions.models import ExceptionRequest
from governance.knowledge.models import KnowledgeArticle
from governance.policy.models import PolicyChange


class WhatIfComparison(models.Model):
    class Status(models.TextChoices):
        DRAFT = "DRAFT", "Not run yet"
        QUEUED = "QUEUED", "Waiting for a worker"
        RUNNING = "RUNNING", "Running"
        DONE = "DONE", "Done"
        FAILED = "FAILED", "Failed"
        CANCELLED = "CANCELLED", "Cancelled"

    class Review(models.TextChoices):
        NONE = "NONE", "Not proposed"
        PROPOSED = "PROPOSED", "Proposed for review"
        APPROVED = "APPROVED", "Approved"
        REJECTED = "REJECTED", "Sent back"
        APPLIED = "APPLIED", "Applied"

    class Workload(models.TextChoices):
        RECORDED = "RECORDED", "Jobs recorded in a period"
        PHILLY = "PHILLY", "A window of the Philly trace"
        UPLOAD = "UPLOAD", "An uploaded trace (CSV)"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="whatif_comparisons")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    title = models.CharField(max_length=200)
    note = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    saved = models.BooleanField(default=False, help_text="Kept with a note as evidence.")
    # {"queue": {...}, "shares": [{... share_document ...}]}; `share_refs` gives, per
    # position in "shares", the live share's id and the version that was cloned.
    current_policy = models.JSONField()
    draft_policy = models.JSONField()
    share_refs = models.JSONField(default=list)

    workload_kind = models.CharField(max_length=16, choices=Workload, default=Workload.RECORDED)
    workload_params = models.JSONField(default=dict, blank=True)
    workload_description = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    # Scenario-format jobs; `share` names a share of current_policy.
    workload_jobs = models.JSONField(default=list, blank=True)
    # Interruption contracts to replay under (spec v2), per run and share:
    # {"current": {share name: {field: value}}, "draft": {...}}; {} replays the jobs as
    # recorded. A workload class maps onto its shares' contracts.
    contracts = models.JSONField(default=dict, blank=True)
    # The same per workload class: {"current": {class name: {field: value}}, ...}. A job
    # of a class and of a share with overrides gets the class's fields, then the share's
    # over them (compare.with_contracts).
    class_contracts = models.JSONField(default=dict, blank=True)
    # The workload class of each replayed job that has one, {job id: class name}, taken
    # when the workload was chosen: a recorded job's copied class, a trace job's share's
    # default class (workloads.py).
    workload_classes = models.JSONField(default=dict, blank=True)
    # Which share each team's jobs go to (workloads.build_mapping): {"source": "trace" or
    # "recorded", "teams": [{"team", "jobs", "default", "matched", "chosen", "share"}]},
    # an upload's rows too ("rows"), so that it can be mapped again. A team whose share
    # is null is left out of the replay.
    share_mapping = models.JSONField(default=dict, blank=True)

    status = models.CharField(max_length=16, choices=Status, default=Status.DRAFT, db_index=True)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done.")
    progress_label = models.CharField(max_length=200, blank=True)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    results = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    review_state = models.CharField(max_length=16, choices=Review, default=Review.NONE)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    applied_at = models.DateTimeField(null=True, blank=True)
    applied_changes = models.ManyToManyField(
        PolicyChange, blank=True, related_name="whatif_comparisons"
    )

    articles = models.ManyToManyField(
        KnowledgeArticle, blank=True, related_name="whatif_comparisons"
    )
    exception_requests = models.ManyToManyField(
        ExceptionRequest, blank=True, related_name="whatif_comparisons"
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(progress__lte=100), name="whatif_progress_le_100"),
            models.CheckConstraint(
                condition=Q(reviewer__isnull=True)
                | Q(author__isnull=True)
                | ~Q(reviewer=F("author")),
                name="whatif_reviewer_not_author",
            ),
        ]

    def __str__(self):
        return f"What-if #{self.pk}: {self.title}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


class WhatIfReview(models.Model):
    """One step of a draft's review. Append-only."""

    class Action(models.TextChoices):
        PROPOSED = "PROPOSED", "Proposed for review"
        APPROVED = "APPROVED", "Approved"
        REJECTED = "REJECTED", "Sent back"
        APPLIED = "APPLIED", "Applied"

    comparison = models.ForeignKey(
        WhatIfComparison, on_delete=models.CASCADE, related_name="reviews"
    )
    action = models.CharField(max_length=16, choices=Action)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self):
        return f"{self.comparison}: {self.get_action_display()}"
