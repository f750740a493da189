"""What the scheduler keeps besides the fleet's jobs: runner workers, each queue's pass
state, and the decisions people take on failed jobs (the jobs and their events are
fleet.models)."""

from django.conf import settings
from django.db import models

from fleet.models import Job


class Runner(models.Model):
    """A runner worker process: which instance types it serves and when it was last seen.

    Runners register and beat on their own (not per job), so the product knows which
    instance types have a live runner (`/healthz/`, a waiting job's reason). One row per
    incarnation (name and pid): a runner restarted under the same Celery node name is a
    new row, and its dead predecessor's row keeps what the sweep needs to requeue the
    predecessor's runs (scheduler.services.runs). Times are the database's clock.
    """

    name = models.CharField(max_length=200)
    hostname = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    instance_types = models.JSONField(default=list)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # What the runner found at start it cannot do for its jobs (run the interpreter or a
    # registered program as the job account, isolate their network), one sentence each
    # (`scheduler.executors.process.sandbox_check`).
    problems = models.JSONField(default=list, blank=True)
    # The runner's clock minus the database's, measured at its last beat (seconds).
    clock_offset_seconds = models.FloatField(null=True, blank=True)
    # PostgreSQL only: when the runner last took its liveness lock (a session advisory
    # lock the kernel releases when the process dies), and since when the sweep has
    # found that lock free (None: held, or not looked at since it was taken).
    liveness_locked_at = models.DateTimeField(null=True, blank=True)
    liveness_free_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "pid"]
        constraints = [
            models.UniqueConstraint(fields=["name", "pid"], name="runner_incarnation_unique")
        ]

    def __str__(self):
        return self.name


class QueuePassState(models.Model):
    """What the live pass of a queue remembers between passes: the policy (queue
    capacity and shares) under which its waiting jobs were last all judged, and whether
    a pass is asked for. While it is
    unchanged a pass reads only what it can decide on; otherwise it reads every waiting
    job once (scheduler.services.passes)."""

    queue = models.OneToOneField(
        "fleet.JobQueue", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    policy_key = models.CharField(max_length=64)
    judged_at = models.DateTimeField()
    # A pass was asked for at this time and has not begun (None: none waiting); requests
    # coalesce on it (scheduler.services.passes.request_pass).
    pass_requested_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"pass state of queue {self.queue_id}"


class JobDecision(models.Model):
    """What a team lead decided about a job that needs a decision (it ended FAILED)."""

    class Kind(models.TextChoices):
        RESUBMITTED = "RESUBMITTED", "Resubmitted"
        EXCEPTION_FILED = "EXCEPTION_FILED", "Exception request filed"
        CLOSED = "CLOSED", "Closed"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="decision")
    kind = models.CharField(max_length=16, choices=Kind)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField()
    new_job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-decided_at", "-id"]

    def __str__(self):
        return f"{self.get_kind_display()}: {self.job}"


class EstimateRecord(models.Model):
    """The first start estimate a waiting job was given, and when it really started: the
    queue's record of its estimates, which calibrates the next ones and is shown as the
    queue's measured coverage (`scheduler.services.estimates.record`).

    Waits are in the queue's clock (seconds) from `made_at`: the forecast's own (p50
    and p90 runs of the engine; null: it would never start) and the range it stated
    (`low_wait`-`high_wait` at quantiles `quantiles`, e.g. "p10–p90", with the point
    estimate `point_wait`); `actual_wait` once it started, `closed` when it ended
    without starting (cancelled): such a record says nothing; `overdue_at`, when a job
    still waiting starts to count for the calibration."""

    queue = models.ForeignKey(
        "fleet.JobQueue", on_delete=models.CASCADE, related_name="estimate_records"
    )
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="estimate_record")
    share = models.CharField(max_length=100)
    made_at = models.DateTimeField()
    forecast_wait = models.BigIntegerField(null=True, blank=True)
    forecast_high_wait = models.BigIntegerField(null=True, blank=True)
    quantiles = models.CharField(max_length=20)
    low_wait = models.BigIntegerField(null=True, blank=True)
    point_wait = models.BigIntegerField(null=True, blank=True)
    high_wait = models.BigIntegerField(null=True, blank=True)
    basis = models.CharField(max_length=10)  # share, queue or default
    samples = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    actual_wait = models.BigIntegerField(null=True, blank=True)
    closed = models.BooleanField(default=False)
    # When a job still waiting starts to count (as waited so far): once it has waited
    # past both runs of its forecast (null: never, its forecast had none).
    overdue_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["made_at", "id"]
        indexes = [
            models.Index(fields=["queue", "closed", "made_at"], name="estimate_record_open"),
            models.Index(fields=["queue", "overdue_at"], name="estimate_record_overdue"),
            models.Index(fields=["queue", "started_at"], name="estimate_record_started"),
        ]

    def __str__(self):
        return f"estimate of job {self.job_id} at {self.made_at:%Y-%m-%d %H:%M}"
