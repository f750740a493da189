"""The fleet's shared data: who owns which capacity, and the jobs that use it.

Teams, instance types, job queues and their capacity, quota shares and their limits,
urgency definitions, job definitions and their revisions, jobs and their append-only
events. The scheduler writes jobs and events (always under the queue's row lock,
fleet.locks, so the database is the truth of who holds what); governance writes the
policy rows through its services, which record every change. Rules that span several
rows (a share's limits must name the queue's types, at most 20 shares per queue, ...)
are checked once, through the engine's validate_policy; rules that one row can state
are also database constraints.

Job states and event types follow the scenario format (shared with the engine): a job
is RUNNABLE until dispatched, RUNNING while it holds capacity, and ends SUCCEEDED or
FAILED. Times are real instants. Work figures (`progress`, `checkpointed`,
`lost_work`, `restart_overhead_spent`, `waiting_time`) are compute seconds of the job
itself: on a simulated queue one real second is `SIMULATED_SECONDS_PER_SECOND` of them.

The models came from the governance and scheduler apps and keep their tables.
"""

from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models import Q

from core.bounds import MAX_TEXT
from core.search import UpperTrigramIndex
from engine.strategies import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    StrategyCapabilities,
    spoken_list,
    strategies_that,
    strategy_capabilities,
)
from fleet.executors import DEFAULT_EXECUTOR, executor_choices, executor_decision_causes


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    leads = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="led_teams", blank=True)

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "governance_team"
        ordering = ["name"]

    def __str__(self):
        return self.name


class InstanceType(models.Model):
    name = models.CharField(max_length=64, unique=True, help_text="e.g. ml.g5.xlarge")
    gpu_count = models.PositiveSmallIntegerField(default=1)
    gpu_model = models.CharField(max_length=64, blank=True)
    # What each executor asks for one instance of the type, by executor name (e.g. the
    # options that ask a cluster for one instance on one node); written only through the
    # executor's binding schema, which validates it (scheduler.executors.base).
    executor_settings = models.JSONField(default=dict, blank=True)
    # What one instance costs per hour, in settings.COST_CURRENCY: set by admins as a
    # policy write (governance.policy.prices), read by the dashboard's cost figures.
    # Empty: no price (no cost is shown for the type, never a cost of 0).
    price_per_hour = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True, default=None
    )

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "governance_instancetype"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(gpu_count__gte=1), name="instancetype_gpus_ge_1")
        ]

    def __str__(self):
        return self.name


class JobQueue(models.Model):
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
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
    # Which executor runs the queue's jobs: one of scheduler.executors' registry (the
    # choices are read from it at run time, fleet.executors).
    executor = models.CharField(max_length=16, choices=executor_choices, default=DEFAULT_EXECUTOR)
    # The queue's binding to where its executor runs jobs (e.g. a cluster, a partition,
    # an account), by executor name; written only through the executor's binding
    # schema, which validates it (scheduler.executors.base).
    executor_settings = models.JSONField(default=dict, blank=True)
    # What the executor's reconciliation last saw of the capacity it can really use: its
    # nodes' states and, per instance type, the instances its usable nodes hold
    # (`usable`), which the pass takes as the capacity when lower (`capacity_seen` of the
    # executor, fleet.bridge.usable_capacity). None: never seen.
    capacity_seen = models.JSONField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "governance_jobqueue"
        ordering = ["name"]

    def __str__(self):
        return self.name


class QueueCapacity(models.Model):
    queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="capacities")
    instance_type = models.ForeignKey(InstanceType, on_delete=models.PROTECT, related_name="+")
    instances = models.PositiveIntegerField()

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "governance_queuecapacity"
        ordering = ["instance_type__name"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "instance_type"], name="queuecapacity_unique"),
            models.CheckConstraint(condition=Q(instances__gte=1), name="queuecapacity_ge_1"),
        ]

    def __str__(self):
        return f"{self.queue}: {self.instances} × {self.instance_type}"


class WorkloadClass(models.Model):
    """A kind of work and the interruption contract (spec v2) its jobs carry: how long
    each run is protected from reclaim and from in-share preemption, the notice a
    victim gets, and how soon after notice it saves and exits. Global, as urgency
    definitions are: one vocabulary the admins edit for every queue. Each job copies
    its class's contract at submission (scheduler.services.jobs), so a later change of
    a class never changes a submitted job."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    min_runtime_reclaim = models.PositiveIntegerField(
        default=0,
        help_text="Seconds from the start of each run during which a job is not a victim "
        "of reclaim (0 = none).",
    )
    min_runtime_preempt = models.PositiveIntegerField(
        default=0,
        help_text="Seconds from the start of each run during which a job is not a victim "
        "of in-share preemption (0 = none).",
    )
    grace = models.PositiveIntegerField(
        default=0,
        help_text="Seconds of notice a victim gets before its capacity is taken (0 = it "
        "stops at once).",
    )
    checkpoint_on_notice = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds a job needs after notice to save a checkpoint and exit; empty = "
        "it does not checkpoint on notice. Needs a grace: with grace 0 no notice is given.",
    )
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(min_runtime_reclaim__gte=0) & Q(min_runtime_preempt__gte=0),
                name="workloadclass_min_runtimes_ge_0",
            ),
            models.CheckConstraint(condition=Q(grace__gte=0), name="workloadclass_grace_ge_0"),
            models.CheckConstraint(
                condition=Q(checkpoint_on_notice__isnull=True)
                | (Q(checkpoint_on_notice__gte=1) & Q(grace__gte=1)),
                name="workloadclass_checkpoint_on_notice_ge_1_with_grace",
            ),
        ]

    def __str__(self):
        return self.name


DEFAULT_PRIORITY_CEILING = 100
MAX_PRIORITY = 9999


# The strategies that take a borrow limit (what each does: engine.strategies).
BORROWING_STRATEGIES = strategies_that(takes_borrow_limit=True)


class QuotaShare(models.Model):
    # The engine's strategies, each labelled by its name.
    Strategy = models.TextChoices("Strategy", [(name, (name, name)) for name in STRATEGIES])

    class State(models.TextChoices):
        ENABLED = "ENABLED", "Enabled"
        DISABLED = "DISABLED", "Disabled"

    queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="shares")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="shares")
    name = models.CharField(max_length=100)
    strategy = models.CharField(max_length=16, choices=Strategy, default=DEFAULT_STRATEGY)
    borrow_limit = models.IntegerField(
        null=True,
        blank=True,
        help_text="Percent of the share's own limit it may borrow on top; -1 = unlimited. "
        f"Only with {spoken_list(BORROWING_STRATEGIES)}.",
    )
    in_share_preemption = models.BooleanField(default=False)
    state = models.CharField(max_length=8, choices=State, default=State.ENABLED)
    priority_ceiling = models.PositiveIntegerField(
        default=DEFAULT_PRIORITY_CEILING,
        help_text="The highest job priority a team lead may give without an active "
        "priority-raise exception or an urgency that names the team (0–9999).",
    )
    # The contract of the share's jobs whose definition names no class (and of jobs
    # submitted without a definition); None: no contract.
    default_workload_class = models.ForeignKey(
        WorkloadClass,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="default_of_shares",
    )
    # Position in the queue: entitlement is granted in this order (the spec's listed order).
    position = models.PositiveIntegerField(default=0)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "governance_quotashare"
        ordering = ["queue_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "name"], name="quotashare_unique_name"),
            models.CheckConstraint(
                condition=Q(priority_ceiling__lte=MAX_PRIORITY),
                name="quotashare_priority_ceiling_le_9999",
            ),
            models.CheckConstraint(
                condition=(Q(strategy__in=BORROWING_STRATEGIES) & Q(borrow_limit__gte=-1))
                | (~Q(strategy__in=BORROWING_STRATEGIES) & Q(borrow_limit__isnull=True)),
                name="quotashare_borrow_limit_only_lend_and_borrow",
            ),
        ]

    def __str__(self):
        return f"{self.queue} / {self.name}"

    @property
    def enabled(self) -> bool:
        return self.state == self.State.ENABLED

    @property
    def capabilities(self) -> StrategyCapabilities:
        """What its strategy does (engine.strategies): pages ask this, not the name."""
        return strategy_capabilities(self.strategy)


class CapacityLimit(models.Model):
    share = models.ForeignKey(QuotaShare, on_delete=models.CASCADE, related_name="limits")
    instance_type = models.ForeignKey(InstanceType, on_delete=models.PROTECT, related_name="+")
    max_instances = models.PositiveIntegerField()

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "governance_capacitylimit"
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
    meaning = models.TextField(
        max_length=MAX_TEXT,
        validators=[MaxLengthValidator(MAX_TEXT)],
        help_text="What this urgency means, in plain words.",
    )
    examples = models.TextField(
        max_length=MAX_TEXT,
        validators=[MaxLengthValidator(MAX_TEXT)],
        blank=True,
        help_text="Situations that qualify.",
    )
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
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "governance_urgencydefinition"
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


class JobDefinition(models.Model):
    """A registered kind of job (AWS Batch's job definition, a Kubernetes pod template).

    Jobs run a definition, never a free-form command: admins register and revise it,
    team leads choose one and give values for its typed parameters. The content lives
    in append-only revisions; retiring a definition refuses new submissions.
    """

    name = models.CharField(max_length=128, unique=True)
    description = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    queues = models.ManyToManyField(
        "fleet.JobQueue",
        related_name="job_definitions",
        help_text="The queues whose jobs may run this definition.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    retire_reason = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "scheduler_jobdefinition"
        ordering = ["name"]

    def __str__(self):
        return self.name


class JobDefinitionRevision(models.Model):
    """One version of a definition. Append-only: a change is a new revision.

    `command` is an argument vector (never a shell string); an element may hold
    `{name}` placeholders of declared `parameters`, each a dict with `name`, `type`
    (`integer`, `choice`, `pattern`), `description`, `default` (absent = required),
    and `min`/`max` (integer), `choices` (choice) or `pattern` (pattern, a full
    match). `environment` is the job's whole environment besides `PATH`, `HOME`,
    `LANG` and its own `JOB_*` variables: literal values, never the application's.
    """

    definition = models.ForeignKey(
        JobDefinition, on_delete=models.CASCADE, related_name="revisions"
    )
    revision = models.PositiveIntegerField()
    # The definition's queues when this revision was made: the history shows who could
    # run it; which queues may run it now is `definition.queues`.
    queue_names = models.JSONField(default=list, blank=True)
    command = models.JSONField(default=list)
    parameters = models.JSONField(default=list, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    # Defaults a submission may override.
    instance_type = models.ForeignKey(
        "fleet.InstanceType", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    instances = models.PositiveIntegerField(default=1)
    expected_duration = models.PositiveIntegerField(null=True, blank=True)
    checkpoint_interval = models.PositiveIntegerField(null=True, blank=True)
    restart_overhead = models.PositiveIntegerField(default=0)
    # How the runner treats the process.
    stop_grace_seconds = models.PositiveIntegerField(default=10)
    wall_clock_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds a run may last; empty = no limit."
    )
    max_address_space_mb = models.PositiveIntegerField(null=True, blank=True)
    max_cpu_seconds = models.PositiveIntegerField(null=True, blank=True)
    # False: the process runs in an empty network namespace of its own (no route to
    # anything, the database and Redis included); True: on the runner's network.
    network = models.BooleanField(default=False)
    # The interruption contract of the jobs it runs; None: the share's default class.
    workload_class = models.ForeignKey(
        WorkloadClass,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="definition_revisions",
    )
    reason = models.TextField(
        max_length=MAX_TEXT, validators=[MaxLengthValidator(MAX_TEXT)], blank=True
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "scheduler_jobdefinitionrevision"
        ordering = ["definition", "-revision"]
        constraints = [
            models.UniqueConstraint(
                fields=["definition", "revision"], name="jobdefrevision_unique_revision"
            ),
            models.CheckConstraint(
                condition=Q(revision__gte=1), name="jobdefrevision_revision_ge_1"
            ),
        ]

    def __str__(self):
        return f"{self.definition.name}:{self.revision}"


class _DecisionCauses:
    """A class attribute read at run time: `own` and the causes the registered executors
    say need a decision (fleet.executors), so `Job.NEEDS_DECISION_CAUSES` stays a tuple
    to its readers while an executor adds its own without an edit here."""

    def __init__(self, own: tuple[str, ...]):
        self.own = own

    def __get__(self, instance, owner) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.own, *executor_decision_causes())))


class Job(models.Model):
    class State(models.TextChoices):
        RUNNABLE = "RUNNABLE", "Runnable"
        RUNNING = "RUNNING", "Running"
        # Given notice (spec v2): it runs on, holding its capacity, until it stops.
        STOPPING = "STOPPING", "Stopping"
        SUCCEEDED = "SUCCEEDED", "Succeeded"
        FAILED = "FAILED", "Failed"

    LIVE_STATES = (State.RUNNABLE, State.RUNNING, State.STOPPING)
    # The states that hold capacity: a STOPPING job keeps its instances until it stops.
    HOLDING_STATES = (State.RUNNING, State.STOPPING)
    # Failures that need a person to decide what happens next (the "needs a decision"
    # list): the decision service accepts only these, the selectors list them. The
    # scheduler's own, and those the registered executors declare (read at run time).
    NEEDS_DECISION_CAUSES = _DecisionCauses(
        ("retries_exhausted", "time_limit", "exit_code", "wall_clock_limit")
    )

    queue = models.ForeignKey("fleet.JobQueue", on_delete=models.PROTECT, related_name="jobs")
    share = models.ForeignKey("fleet.QuotaShare", on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(max_length=200)
    priority = models.PositiveIntegerField(default=0)
    urgency = models.ForeignKey(
        "fleet.UrgencyDefinition",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        help_text="The urgency definition that granted the job's priority, if any.",
    )
    instance_type = models.ForeignKey(
        "fleet.InstanceType", on_delete=models.PROTECT, related_name="+"
    )
    instances = models.PositiveIntegerField(default=1)
    expected_duration = models.PositiveIntegerField(
        help_text="Compute seconds when never interrupted."
    )
    checkpoint_interval = models.PositiveIntegerField(null=True, blank=True)
    restart_overhead = models.PositiveIntegerField(default=0)
    preemption_retries = models.PositiveIntegerField(null=True, blank=True)
    protected_until = models.DateTimeField(null=True, blank=True)
    # The interruption contract (spec v2), copied at submission from the job's workload
    # class: seconds from the start of each run during which the job is not a victim
    # of reclaim / of in-share preemption, the notice a victim gets before it must
    # stop, and the seconds it needs after notice to save and exit (None: it does not
    # checkpoint on notice). All 0 and None: preempted at once, as before.
    min_runtime_reclaim = models.PositiveIntegerField(default=0)
    min_runtime_preempt = models.PositiveIntegerField(default=0)
    grace = models.PositiveIntegerField(default=0)
    checkpoint_on_notice = models.PositiveIntegerField(null=True, blank=True)
    # The name of the workload class the contract came from ("" when none), kept as it
    # was at submission so evidence by class survives a class being renamed.
    workload_class = models.CharField(max_length=100, blank=True)
    definition_revision = models.ForeignKey(
        JobDefinitionRevision,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="jobs",
        help_text="The registered definition (and revision) the job runs.",
    )
    parameters = models.JSONField(
        default=dict, blank=True, help_text="The submitter's validated parameter values."
    )
    # The argument vector the runner executes: the revision's command with the
    # parameters substituted element by element (never through a shell).
    argv = models.JSONField(default=list, blank=True)
    # Idempotent submission (AWS clientToken): unique per submitter; the fingerprint
    # of the request body tells a retry (same body) from a conflict (another body).
    client_token = models.CharField(max_length=64, blank=True)
    request_fingerprint = models.CharField(max_length=64, blank=True)

    state = models.CharField(max_length=10, choices=State, default=State.RUNNABLE, db_index=True)
    # RUNNABLE: the engine's reason code for the wait; FAILED: the cause.
    reason = models.CharField(max_length=64, blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    submitted_at = models.DateTimeField(db_index=True)
    resubmitted_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="resubmissions"
    )
    runnable_since = models.DateTimeField(null=True, blank=True)
    misconfigured_since = models.DateTimeField(null=True, blank=True)
    first_started_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Orders jobs started at the same instant: the victim-order tie-break.
    start_seq = models.BigIntegerField(default=0)
    borrowed = models.BooleanField(default=False)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Starts so far; a runner's run carries it, so a stale run knows to stop.
    attempt = models.PositiveIntegerField(default=0)
    # Compute seconds of restart overhead of the current run (0 for a first start).
    run_overhead = models.PositiveIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    # The current attempt's lease: only the runner holding this token may report for
    # the run, and only until `lease_expires_at` (renewed by its heartbeat). The
    # recovery sweep requeues a run only once its lease expired.
    lease_token = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    # Where an executor that places runs elsewhere put the current one: e.g. its cluster's
    # job id, state, nodes and start time as the cluster reported them (the executor's package).
    # Nullable without a default: adding it rewrites no row.
    placement = models.JSONField(null=True, blank=True)

    progress = models.PositiveIntegerField(default=0, help_text="Compute seconds done.")
    checkpointed = models.PositiveIntegerField(default=0)
    preemptions = models.PositiveIntegerField(default=0)
    # Runs lost to a dead worker and put back in the queue (not preemptions).
    requeues = models.PositiveIntegerField(default=0)
    lost_work = models.PositiveIntegerField(default=0)
    restart_overhead_spent = models.PositiveIntegerField(default=0)
    waiting_time = models.PositiveIntegerField(default=0)
    ran_borrowed = models.BooleanField(default=False)
    # Spec v2 figures (the engine's per-job `notice_time` and `protected_blocks`):
    # seconds spent STOPPING after notice, and victim choices its protection blocked.
    notice_time = models.PositiveIntegerField(default=0)
    protected_blocks = models.PositiveIntegerField(default=0)
    # The live scheduler counts a job's block once per run (its passes also run on a
    # periodic tick, which would count the same block at every tick): the attempt of
    # the run last counted.
    blocked_attempt = models.PositiveIntegerField(null=True, blank=True)
    # STOPPING (spec v2, V6): the notice runs until `grace_until`; `stop_at` is when
    # its capacity is free at the latest (a modelled clock: the engine's stop instant;
    # a real process: the end of its grace plus the kill margin, unless its runner
    # reports the exit first). `notice_for` is the starter waiting for it (V8),
    # `saves_on_notice` whether it saves its progress on notice, `fails_at_stop`
    # whether its retry bound is spent (it ends FAILED at the stop, V9), `stop_cause`
    # the PREEMPTED event's cause (repeated on STOPPED, with `notice_for` as its by),
    # and `notice_at` the decision (for `notice_time`).
    notice_at = models.DateTimeField(null=True, blank=True)
    grace_until = models.DateTimeField(null=True, blank=True)
    stop_at = models.DateTimeField(null=True, blank=True)
    # Indexed by the partial `job_notice_for_idx` (built concurrently: the job table is
    # large), not by the foreign key's own index.
    notice_for = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    saves_on_notice = models.BooleanField(default=False)
    fails_at_stop = models.BooleanField(default=False)
    stop_cause = models.CharField(max_length=32, blank=True)
    # A terminate during notice: the job ends FAILED terminated at its stop, its FAILED
    # event naming who terminated it (`stop_actor`).
    terminate_at_stop = models.BooleanField(default=False)
    stop_actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    # A waiting starter (V8.2): instances its victims have freed already, held for it
    # until its last victim stops.
    held_instances = models.PositiveIntegerField(default=0)
    # When the reclaim episode (V12) of the current RUNNABLE period began, if one did.
    reclaim_wait_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "scheduler_job"
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["queue", "state"]),
            # The STOPPING victims a waiting starter waits for (few rows ever set).
            models.Index(
                fields=["notice_for"],
                name="job_notice_for_idx",
                condition=Q(notice_for__isnull=False),
            ),
            models.Index(fields=["share", "state"], name="job_share_state_idx"),
            # Job search by name (scheduler.selectors.job_search_condition): a trigram
            # index of UPPER(name) on PostgreSQL, what icontains compares (core.search).
            UpperTrigramIndex(field="name", name="job_name_search_idx"),
            # A share's jobs, newest first (the jobs list a team lead reads most): with
            # it, one plan serves every share, and PostgreSQL keeps the prepared plan
            # instead of planning the list's joins again for each request.
            models.Index(fields=["share", "-submitted_at", "-id"], name="job_share_newest_idx"),
            # The live pass reads each share's well-configured waiting jobs a page at a
            # time in dispatch order (fleet.bridge.ShareFeed) ...
            models.Index(
                fields=["queue", "share", "-priority", "submitted_at", "id"],
                name="job_dispatch_order_idx",
                condition=Q(state="RUNNABLE", misconfigured_since__isnull=True),
            ),
            # ... and the few others it must see: new ones (no reason yet) and the
            # heads of the last pass (reason neither "behind the head" nor a
            # misconfiguration) ...
            models.Index(
                fields=["queue"],
                name="job_pass_attention_idx",
                condition=Q(state="RUNNABLE")
                & ~Q(
                    reason__in=[
                        "BLOCKED_BEHIND_HEAD",
                        "SERVICE_ENVIRONMENT_MAX_RESOURCE",
                        "QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
                        "BORROWABLE_CAPACITY_EXCEEDED",
                    ]
                ),
            ),
            # ... and misconfigured ones once their runnable_time_limit is due.
            models.Index(
                fields=["queue", "misconfigured_since"],
                name="job_misconfigured_idx",
                condition=Q(state="RUNNABLE", misconfigured_since__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(instances__gte=1), name="job_instances_ge_1"),
            models.CheckConstraint(condition=Q(priority__lte=9999), name="job_priority_le_9999"),
            models.CheckConstraint(
                condition=Q(expected_duration__gte=1), name="job_expected_duration_ge_1"
            ),
            models.CheckConstraint(
                condition=~Q(state__in=["RUNNING", "STOPPING"]) | Q(started_at__isnull=False),
                name="job_running_has_started_at",
            ),
            models.CheckConstraint(
                condition=~Q(state="STOPPING") | Q(stop_at__isnull=False),
                name="job_stopping_has_stop_at",
            ),
            models.UniqueConstraint(
                fields=["submitted_by", "client_token"],
                condition=~Q(client_token=""),
                name="job_unique_client_token_per_submitter",
            ),
        ]

    def __str__(self):
        return self.name

    @property
    def is_live(self) -> bool:
        return self.state in self.LIVE_STATES


class JobEvent(models.Model):
    """One thing that happened to a job. Append-only: rows are never changed."""

    class Type(models.TextChoices):
        SUBMITTED = "SUBMITTED"
        STARTED = "STARTED"
        PREEMPTED = "PREEMPTED"
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"
        PRIORITY_CHANGED = "PRIORITY_CHANGED", "Priority changed"
        REQUEUED = "REQUEUED", "Requeued"
        # A victim given notice (spec v2) has stopped: its capacity is free.
        STOPPED = "STOPPED", "Stopped"
        # Its executor really began running a started run (its cluster ran the job),
        # at `at`; the run's time counts from then (a note, not a lifecycle event).
        RUNNING = "RUNNING", "Running"

    # The lifecycle events of the scenario format; the others are notes on the timeline.
    LIFECYCLE = (
        Type.SUBMITTED,
        Type.STARTED,
        Type.PREEMPTED,
        Type.STOPPED,
        Type.SUCCEEDED,
        Type.FAILED,
    )

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(db_index=True)
    type = models.CharField(max_length=16, choices=Type)
    cause = models.CharField(max_length=32, blank=True)
    by = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    borrowed = models.BooleanField(default=False)
    attempt = models.PositiveIntegerField(default=0)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Figures of the moment: lost work of a preemption, an exit code, old and new priority.
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        # The table keeps the name of the app the model came from (fleet/migrations/0001).
        db_table = "scheduler_jobevent"
        ordering = ["at", "id"]
        indexes = [
            models.Index(fields=["job", "at"], name="jobevent_job_at_idx"),
            # /metrics counts the preemptions on every scrape (fleet.metrics): a few rows
            # of a table of millions, read without scanning it.
            models.Index(
                fields=["job", "by", "cause"],
                condition=models.Q(type="PREEMPTED"),
                name="jobevent_preempted_idx",
            ),
        ]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.type} {self.job_id}"
