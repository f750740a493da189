"""The policy domain: who owns which capacity, and the record of every change.

Rules that span several rows (a share's limits must name the queue's types, at
most 20 shares per queue, ...) are checked once, in governance.policy.services,
through the engine's validate_policy. Rules that one row can state are also
database constraints.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    leads = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="led_teams", blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class InstanceType(models.Model):
    name = models.CharField(max_length=64, unique=True, help_text="e.g. ml.g5.xlarge")
    gpu_count = models.PositiveSmallIntegerField(default=1)
    gpu_model = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(gpu_count__gte=1), name="instancetype_gpus_ge_1")
        ]

    def __str__(self):
        return self.name


class JobQueue(models.Model):
    class Executor(models.TextChoices):
        SIMULATED = "simulated", "Simulated (accelerated clock)"
        PROCESS = "process", "Process (real subprocess)"

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    default_preemption_retries = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Applied to jobs without their own retry bound; empty = unbounded.",
    )
    runnable_time_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds a misconfigured job may stay RUNNABLE before it fails; empty = never.",
    )
    executor = models.CharField(max_length=16, choices=Executor, default=Executor.SIMULATED)
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class QueueCapacity(models.Model):
    queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="capacities")
    instance_type = models.ForeignKey(InstanceType, on_delete=models.PROTECT, related_name="+")
    instances = models.PositiveIntegerField()

    class Meta:
        ordering = ["instance_type__name"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "instance_type"], name="queuecapacity_unique"),
            models.CheckConstraint(condition=Q(instances__gte=1), name="queuecapacity_ge_1"),
        ]

    def __str__(self):
        return f"{self.queue}: {self.instances} × {self.instance_type}"


DEFAULT_PRIORITY_CEILING = 100
MAX_PRIORITY = 9999


class QuotaShare(models.Model):
    class Strategy(models.TextChoices):
        RESERVE = "RESERVE", "RESERVE"
        LEND = "LEND", "LEND"
        LEND_AND_BORROW = "LEND_AND_BORROW", "LEND_AND_BORROW"

    class State(models.TextChoices):
        ENABLED = "ENABLED", "Enabled"
        DISABLED = "DISABLED", "Disabled"

    queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="shares")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="shares")
    name = models.CharField(max_length=100)
    strategy = models.CharField(max_length=16, choices=Strategy, default=Strategy.LEND)
    borrow_limit = models.IntegerField(
        null=True,
        blank=True,
        help_text="Percent of the share's own limit it may borrow on top; -1 = unlimited. "
        "Only with LEND_AND_BORROW.",
    )
    in_share_preemption = models.BooleanField(default=False)
    state = models.CharField(max_length=8, choices=State, default=State.ENABLED)
    priority_ceiling = models.PositiveIntegerField(
        default=DEFAULT_PRIORITY_CEILING,
        help_text="The highest job priority a team lead may give without an active "
        "priority-raise exception or an urgency that names the team (0–9999).",
    )
    # Position in the queue: entitlement is granted in this order (the spec's listed order).
    position = models.PositiveIntegerField(default=0)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["queue_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "name"], name="quotashare_unique_name"),
            models.CheckConstraint(
                condition=Q(priority_ceiling__lte=MAX_PRIORITY),
                name="quotashare_priority_ceiling_le_9999",
            ),
            models.CheckConstraint(
                condition=(Q(strategy="LEND_AND_BORROW") & Q(borrow_limit__gte=-1))
                | (~Q(strategy="LEND_AND_BORROW") & Q(borrow_limit__isnull=True)),
                name="quotashare_borrow_limit_only_lend_and_borrow",
            ),
        ]

    def __str__(self):
        return f"{self.queue} / {self.name}"

    @property
    def enabled(self) -> bool:
        return self.state == self.State.ENABLED


class CapacityLimit(models.Model):
    share = models.ForeignKey(QuotaShare, on_delete=models.CASCADE, related_name="limits")
    instance_type = models.ForeignKey(InstanceType, on_delete=models.PROTECT, related_name="+")
    max_instances = models.PositiveIntegerField()

    class Meta:
        ordering = ["instance_type__name"]
        constraints = [
            models.UniqueConstraint(fields=["share", "instance_type"], name="capacitylimit_unique"),
            models.CheckConstraint(condition=Q(max_instances__gte=1), name="capacitylimit_ge_1"),
        ]

    def __str__(self):
        return f"{self.share}: {self.max_instances} × {self.instance_type}"


class UrgencyDefinition(models.Model):
    class Kind(models.TextChoices):
        PRIORITY_RAISE = "PRIORITY_RAISE", "Priority raise"
        TEMPORARY_CAPACITY = "TEMPORARY_CAPACITY", "Temporary capacity"
        PREEMPTION_PROTECTION = "PREEMPTION_PROTECTION", "Preemption protection"

    name = models.CharField(max_length=100, unique=True)
    meaning = models.TextField(help_text="What this urgency means, in plain words.")
    examples = models.TextField(blank=True, help_text="Situations that qualify.")
    priority = models.PositiveIntegerField(help_text="The job priority it grants (0–9999).")
    max_window_hours = models.PositiveIntegerField(
        help_text="The longest exception window it allows, in hours."
    )
    allowed_kinds = models.JSONField(
        default=list, blank=True, help_text="Exception kinds it may be used for."
    )
    invokers = models.ManyToManyField(
        Team,
        blank=True,
        related_name="urgencies",
        help_text="Teams that may invoke it; none selected = every team.",
    )
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-priority", "name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(priority__lte=9999), name="urgency_priority_le_9999"
            ),
            models.CheckConstraint(
                condition=Q(max_window_hours__gte=1), name="urgency_window_ge_1"
            ),
        ]

    def __str__(self):
        return self.name


class PolicyChange(models.Model):
    """One recorded change of governance state. Append-only: a revert is a new change."""

    class Cause(models.TextChoices):
        EDIT = "edit", "Edit"
        EXCEPTION = "exception", "Exception"
        REVERT = "revert", "Revert"
        IMPORT = "import", "Import"

    class Target(models.TextChoices):
        SHARE = "share", "Quota share"
        QUEUE = "queue", "Queue capacity"
        URGENCY = "urgency", "Urgency definition"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField()
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
        indexes = [models.Index(fields=["target", "-created_at"])]

    def __str__(self):
        return f"{self.get_target_display()} {self.object_repr} ({self.get_cause_display()})"
