"""Jobs and their append-only events.

States and event types follow the scenario format (shared with the engine):
a job is RUNNABLE until dispatched, RUNNING while it holds capacity, and ends
SUCCEEDED or FAILED.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Job(models.Model):
    class State(models.TextChoices):
        RUNNABLE = "RUNNABLE", "Runnable"
        RUNNING = "RUNNING", "Running"
        SUCCEEDED = "SUCCEEDED", "Succeeded"
        FAILED = "FAILED", "Failed"

    queue = models.ForeignKey("governance.JobQueue", on_delete=models.PROTECT, related_name="jobs")
    share = models.ForeignKey(
        "governance.QuotaShare", on_delete=models.PROTECT, related_name="jobs"
    )
    name = models.CharField(max_length=200)
    priority = models.PositiveIntegerField(default=0)
    instance_type = models.ForeignKey(
        "governance.InstanceType", on_delete=models.PROTECT, related_name="+"
    )
    instances = models.PositiveIntegerField(default=1)
    expected_duration = models.PositiveIntegerField(
        help_text="Compute seconds when never interrupted."
    )
    checkpoint_interval = models.PositiveIntegerField(null=True, blank=True)
    restart_overhead = models.PositiveIntegerField(default=0)
    preemption_retries = models.PositiveIntegerField(null=True, blank=True)
    protected_until = models.DateTimeField(null=True, blank=True)

    state = models.CharField(max_length=10, choices=State, default=State.RUNNABLE, db_index=True)
    reason = models.CharField(max_length=64, blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    submitted_at = models.DateTimeField(db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Orders jobs started at the same instant: the victim-order tie-break.
    start_seq = models.BigIntegerField(default=0)
    borrowed = models.BooleanField(default=False)
    finished_at = models.DateTimeField(null=True, blank=True)

    progress = models.PositiveIntegerField(default=0, help_text="Compute seconds done.")
    checkpointed = models.PositiveIntegerField(default=0)
    preemptions = models.PositiveIntegerField(default=0)
    lost_work = models.PositiveIntegerField(default=0)
    restart_overhead_spent = models.PositiveIntegerField(default=0)
    waiting_time = models.PositiveIntegerField(default=0)
    ran_borrowed = models.BooleanField(default=False)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [models.Index(fields=["queue", "state"])]
        constraints = [
            models.CheckConstraint(condition=Q(instances__gte=1), name="job_instances_ge_1"),
            models.CheckConstraint(condition=Q(priority__lte=9999), name="job_priority_le_9999"),
        ]

    def __str__(self):
        return self.name


class JobEvent(models.Model):
    class Type(models.TextChoices):
        SUBMITTED = "SUBMITTED"
        STARTED = "STARTED"
        PREEMPTED = "PREEMPTED"
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(db_index=True)
    type = models.CharField(max_length=10, choices=Type)
    cause = models.CharField(max_length=32, blank=True)
    by = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    borrowed = models.BooleanField(default=False)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.type} {self.job_id}"
