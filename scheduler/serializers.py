"""Input and output serializers of the jobs and job definitions API.

Input serializers only parse (types; shares, instance types, urgency definitions and
job definitions are looked up in bulk, a fixed number of queries for any number of
jobs); every rule about a job or a definition is checked by scheduler.services,
whose messages the pages show too. The bounds the services check are documented in
the schema (`Bounded`), not checked twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.serializers import ErrorSerializer, OutputSerializer, RefuseUnknownFields
from core.bounds import MAX_TEXT
from fleet.models import (
    InstanceType,
    Job,
    JobDefinition,
    JobDefinitionRevision,
    JobEvent,
    JobQueue,
    QuotaShare,
    UrgencyDefinition,
    WorkloadClass,
)
from scheduler import selectors
from scheduler.services import job_definitions as definitions
from scheduler.services.jobs import (
    MAX_CLIENT_TOKEN,
    MAX_PRIORITY,
    MAX_RETRIES,
    JobData,
    request_fingerprint,
)

COMMAND_REFUSED = "jobs run a registered job definition"
# Ids are 64-bit primary keys: a larger number is a field error, not a failed query.
MAX_ID = 2**63 - 1
ID_MESSAGE = f"must be an id: a whole number from 1 to {MAX_ID}"
# Keys a job submission may not carry: what runs comes from the definition only.
REFUSED_KEYS = ("command", "argv")
NOT_A_JOB_FIELD = "not a field of a job submission"


class Bounded(serializers.IntegerField):
    """An integer whose bounds the schema documents; the service checks them, so the
    client gets the service's message (the one the pages show)."""

    def __init__(self, *, minimum: int | None = None, maximum: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.min_value, self.max_value = minimum, maximum


def _id(**kwargs) -> serializers.IntegerField:
    messages = {"min_value": ID_MESSAGE, "max_value": ID_MESSAGE}
    return serializers.IntegerField(
        min_value=1, max_value=MAX_ID, error_messages=messages, **kwargs
    )


def _bounded(name: str, **kwargs) -> Bounded:
    low, high = definitions.BOUNDS[name]
    return Bounded(minimum=low, maximum=high, **kwargs)


# Jobs.


class JobInputSerializer(RefuseUnknownFields, serializers.Serializer):
    """One job submission. Any key not declared here is refused (core.api.serializers):
    `command` and `argv` with their own message, since what runs comes from the
    definition; anything else (`environment`, `run_as`, ...) as not a field."""

    unknown_field_message = NOT_A_JOB_FIELD
    refused_fields = dict.fromkeys(REFUSED_KEYS, COMMAND_REFUSED)

    definition = serializers.CharField(
        max_length=128,
        help_text="Name of the registered job definition to run, e.g. train-example.",
    )
    revision = Bounded(
        minimum=1,
        required=False,
        allow_null=True,
        default=None,
        help_text="Revision of the definition; empty: its latest.",
    )
    parameters = serializers.DictField(
        child=serializers.JSONField(),
        default=dict,
        help_text="Values of the definition's parameters, by name: an integer within its "
        "bounds, one of its choices, or text matching its pattern (at most 256 characters, "
        "one line). Parameters with a default may be left out.",
    )
    share = _id(help_text="Id of the quota share to submit into.")
    name = serializers.CharField(max_length=200, allow_blank=True)
    instance_type = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=64,
        help_text="Instance type name, e.g. ml.g5.xlarge; empty: the definition's.",
    )
    instances = _bounded(
        "instances",
        required=False,
        allow_null=True,
        default=None,
        help_text="Empty: the definition's.",
    )
    expected_duration = _bounded(
        "expected_duration",
        required=False,
        allow_null=True,
        default=None,
        help_text="Compute seconds if never stopped; empty: the definition's.",
    )
    priority = Bounded(
        minimum=0,
        maximum=MAX_PRIORITY,
        required=False,
        allow_null=True,
        default=None,
        help_text="Higher first; empty: the urgency's, or 0.",
    )
    urgency = _id(
        required=False, allow_null=True, default=None, help_text="Id of an urgency definition."
    )
    checkpoint_interval = _bounded(
        "checkpoint_interval",
        required=False,
        allow_null=True,
        default=None,
        help_text="Seconds between checkpoints; empty: the definition's.",
    )
    restart_overhead = _bounded(
        "restart_overhead",
        required=False,
        allow_null=True,
        default=None,
        help_text="Loading seconds of a restarted run; empty: the definition's.",
    )
    preemption_retries = Bounded(
        minimum=0,
        maximum=MAX_RETRIES,
        required=False,
        allow_null=True,
        default=None,
        help_text="Retry bound; empty: the queue's default.",
    )
    client_token = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        max_length=MAX_CLIENT_TOKEN,
        error_messages={"max_length": f"at most {MAX_CLIENT_TOKEN} printable characters"},
        help_text="Makes the submission idempotent for you: a retry with the same token and "
        "the same body returns the original job (200) and creates nothing; the same token "
        "with another body is a 409 naming the original job. Kept with the job.",
    )


class JobBulkInputSerializer(RefuseUnknownFields, serializers.Serializer):
    unknown_field_message = "not a field of a bulk submission (its jobs go in `jobs`)"

    jobs = JobInputSerializer(many=True)


def _definition_revisions(names: set[str]) -> tuple[dict, dict, dict]:
    """Definitions by name, their revisions by (definition id, number), latest numbers:
    read in one query, since a definition is made with its first revision (in one
    transaction) and so has at least one."""
    by_name: dict[str, JobDefinition] = {}
    revisions: dict[tuple[int, int], JobDefinitionRevision] = {}
    latest: dict[int, int] = {}
    rows = JobDefinitionRevision.objects.filter(definition__name__in=names)
    for revision in rows.select_related("definition", "instance_type").order_by():
        # One definition object for all its revisions.
        revision.definition = by_name.setdefault(revision.definition.name, revision.definition)
        revisions[revision.definition_id, revision.revision] = revision
        latest[revision.definition_id] = max(
            latest.get(revision.definition_id, 0), revision.revision
        )
    return by_name, revisions, latest


def job_data_from_input(items: Sequence[dict], *, prefix: bool) -> list[JobData]:
    """JobData for parsed items; unknown ids and names are validation errors."""
    shares = QuotaShare.objects.select_related("queue", "team").in_bulk(
        {item["share"] for item in items}
    )
    types = InstanceType.objects.in_bulk(
        {item["instance_type"] for item in items if item["instance_type"] is not None},
        field_name="name",
    )
    urgencies = UrgencyDefinition.objects.in_bulk(
        {item["urgency"] for item in items if item["urgency"] is not None}
    )
    named, revisions, latest = _definition_revisions({item["definition"] for item in items})
    errors: dict[str, list[str]] = {}
    out = []
    for index, item in enumerate(items):
        key = (lambda name, i=index: f"jobs[{i}].{name}") if prefix else (lambda name: name)
        share = shares.get(item["share"])
        itype = types.get(item["instance_type"]) if item["instance_type"] is not None else None
        urgency = urgencies.get(item["urgency"]) if item["urgency"] is not None else None
        definition = named.get(item["definition"])
        revision = None
        if share is None:
            errors[key("share")] = [f"no share with id {item['share']}"]
        if item["instance_type"] is not None and itype is None:
            errors[key("instance_type")] = [f"no instance type named {item['instance_type']}"]
        if item["urgency"] is not None and urgency is None:
            errors[key("urgency")] = [f"no urgency definition with id {item['urgency']}"]
        if definition is None:
            errors[key("definition")] = [f"no job definition named {item['definition']}"]
        else:
            number = item["revision"] or latest.get(definition.pk)
            revision = revisions.get((definition.pk, number))
            if revision is None:
                errors[key("revision")] = [
                    f"{definition.name} has no revision {number} "
                    f"(its latest is {latest.get(definition.pk)})"
                ]
        if errors:
            continue
        out.append(
            JobData(
                share=share,
                name=item["name"],
                revision=revision,
                parameters=item["parameters"],
                instance_type=itype,
                instances=item["instances"],
                expected_duration=item["expected_duration"],
                priority=item["priority"],
                urgency=urgency,
                checkpoint_interval=item["checkpoint_interval"],
                restart_overhead=item["restart_overhead"],
                preemption_retries=item["preemption_retries"],
                client_token=item["client_token"],
                fingerprint=request_fingerprint(item) if item["client_token"] else "",
            )
        )
    if errors:
        raise serializers.ValidationError(errors)
    return out


class JobOutputSerializer(OutputSerializer):
    """A job as the API shows it; the list reads rows of `values(*columns())`, not
    models (core.api.serializers)."""

    queue = serializers.CharField(source="queue.name")
    share = serializers.IntegerField(source="share_id")
    share_name = serializers.CharField(source="share.name")
    team = serializers.CharField(source="share.team.name")
    instance_type = serializers.CharField(source="instance_type.name")
    definition = serializers.CharField(
        source="definition_revision.definition.name",
        allow_null=True,
        default=None,
        help_text="The job definition it runs (empty for jobs recorded from a trace).",
    )
    revision = serializers.IntegerField(
        source="definition_revision.revision", allow_null=True, default=None
    )
    parameters = serializers.DictField(
        child=serializers.JSONField(), help_text="The parameter values it runs with."
    )
    state = serializers.SerializerMethodField(
        help_text="Its state; STARTING: started by the product (its capacity is counted) "
        "but not yet run by its executor (pending in its cluster: `placement.reason` says why)."
    )
    placement = serializers.SerializerMethodField(
        help_text="Where its executor runs it (its cluster's `job_id`, `state`, `reason` "
        "while not yet run, `nodes`, `devices`: GPU indexes per node); null for none."
    )
    # What the method fields read of a row of `values(*columns())`.
    _extra_columns = ("state", "placement", "queue__executor", "worker")

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "queue",
            "share",
            "share_name",
            "team",
            "definition",
            "revision",
            "parameters",
            "priority",
            "urgency",
            "instance_type",
            "instances",
            "expected_duration",
            "checkpoint_interval",
            "restart_overhead",
            "preemption_retries",
            "client_token",
            "state",
            "reason",
            "placement",
            # STOPPING (given notice): when its grace ends; it holds its capacity till then.
            "grace_until",
            "submitted_at",
            "first_started_at",
            "started_at",
            "finished_at",
            "borrowed",
            "attempt",
            "progress",
            "checkpointed",
            "preemptions",
            "requeues",
            "lost_work",
            "restart_overhead_spent",
            "waiting_time",
            "ran_borrowed",
            "exit_code",
        ]
        read_only_fields = fields

    @classmethod
    def columns(cls) -> list[str]:
        return [*super().columns(), *cls._extra_columns]

    @staticmethod
    def _read(job, column: str):
        if isinstance(job, Mapping):
            return job[column]
        return job.queue.executor if column == "queue__executor" else getattr(job, column)

    @extend_schema_field(serializers.ChoiceField(choices=[*Job.State.values, selectors.STARTING]))
    def get_state(self, job) -> str:
        return selectors.shown_state(
            state=self._read(job, "state"),
            placement=self._read(job, "placement"),
            executor=self._read(job, "queue__executor"),
            worker=self._read(job, "worker"),
        )

    @extend_schema_field({"type": "object", "nullable": True})
    def get_placement(self, job) -> dict | None:
        return selectors.job_placement(self._read(job, "placement"))


class JobEventOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["id", "at", "type", "cause", "by", "borrowed", "attempt", "actor", "detail"]
        read_only_fields = fields


class BulkResultSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    ids = serializers.ListField(
        child=serializers.IntegerField(), help_text="The jobs' ids, in the order of the items."
    )
    created = serializers.ListField(
        child=serializers.BooleanField(),
        help_text="Per item: false when its client token returned the job of an earlier request.",
    )


class PriorityInputSerializer(RefuseUnknownFields, serializers.Serializer):
    unknown_field_message = "not a field of a priority change"

    priority = serializers.IntegerField()


class TokenConflictSerializer(ErrorSerializer):
    job = serializers.IntegerField(help_text="Id of the job the client token made first.")
    original_jobs = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Per conflicting field (client_token, or jobs[i].client_token): its job's id.",
    )


# Job definitions.


class ParameterSerializer(RefuseUnknownFields, serializers.Serializer):
    # A misspelt key ("regex" for "pattern") would otherwise leave the value unchecked.
    unknown_field_message = "not a field of a parameter"

    name = serializers.CharField(
        max_length=64, help_text="Letters, digits and _; used as {name} in the command."
    )
    type = serializers.ChoiceField(choices=definitions.PARAMETER_TYPES)
    description = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=definitions.MAX_DESCRIPTION
    )
    default = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="A valid value; absent or null: the parameter is required.",
    )
    min = Bounded(
        minimum=-definitions.INTEGER_LIMIT,
        maximum=definitions.INTEGER_LIMIT,
        required=False,
        allow_null=True,
        help_text="integer: the smallest value (required).",
    )
    max = Bounded(
        minimum=-definitions.INTEGER_LIMIT,
        maximum=definitions.INTEGER_LIMIT,
        required=False,
        allow_null=True,
        help_text="integer: the largest value (required).",
    )
    choices = serializers.ListField(
        child=serializers.CharField(trim_whitespace=False, max_length=definitions.MAX_VALUE_LENGTH),
        required=False,
        allow_null=True,
        max_length=definitions.MAX_CHOICES,
        help_text="choice: the allowed values.",
    )
    pattern = serializers.CharField(
        required=False,
        allow_null=True,
        trim_whitespace=False,
        max_length=definitions.MAX_PATTERN_LENGTH,
        help_text="pattern: an RE2 pattern every value must match in full.",
    )

    def to_representation(self, instance):
        # Stored specs hold only the keys of their type.
        return {key: instance[key] for key in self.fields if key in instance}


_REQUIRED = object()


def _content_fields(*, partial: bool) -> dict[str, serializers.Field]:
    """The fields of a revision's content. To register, absent fields take the defaults
    below; to revise (`partial`), absent fields keep the latest revision's value."""

    def given(default=_REQUIRED) -> dict:
        if partial:
            return {"required": False}
        return {} if default is _REQUIRED else {"default": default}

    text = {"allow_blank": True, "trim_whitespace": False}
    return {
        "queues": serializers.ListField(
            child=serializers.CharField(max_length=100),
            help_text="Names of the queues whose jobs may run this definition.",
            **given(),
        ),
        "command": serializers.ListField(
            child=serializers.CharField(max_length=definitions.MAX_ARGUMENT_LENGTH, **text),
            max_length=definitions.MAX_ARGUMENTS,
            help_text="The argument vector, program first; an element may hold {name} "
            "placeholders of declared parameters (never the program). No shell is "
            "involved. Empty only when no allowed queue runs real processes.",
            **given(list),
        ),
        "parameters": ParameterSerializer(
            many=True, max_length=definitions.MAX_PARAMETERS, **given(list)
        ),
        "environment": serializers.DictField(
            child=serializers.CharField(max_length=definitions.MAX_ENVIRONMENT_VALUE, **text),
            help_text="The job's environment variables, literal values: the runner adds "
            "only PATH, HOME, LANG and the JOB_ variables, which a definition may not set.",
            **given(dict),
        ),
        "instance_type": serializers.CharField(
            allow_null=True,
            max_length=64,
            help_text="Default instance type name; empty: each submission chooses.",
            **given(None),
        ),
        "instances": _bounded("instances", **given(1)),
        "expected_duration": _bounded(
            "expected_duration",
            allow_null=True,
            help_text="Default compute seconds.",
            **given(None),
        ),
        "checkpoint_interval": _bounded(
            "checkpoint_interval",
            allow_null=True,
            help_text="Default seconds between checkpoints; empty: never.",
            **given(None),
        ),
        "restart_overhead": _bounded("restart_overhead", **given(0)),
        "stop_grace_seconds": _bounded(
            "stop_grace_seconds",
            help_text="Seconds between SIGTERM and SIGKILL when a run is stopped.",
            **given(10),
        ),
        "wall_clock_limit": _bounded(
            "wall_clock_limit",
            allow_null=True,
            help_text="Seconds a run may last; empty: no limit.",
            **given(None),
        ),
        "max_address_space_mb": _bounded(
            "max_address_space_mb", allow_null=True, help_text="Empty: no limit.", **given(None)
        ),
        "max_cpu_seconds": _bounded(
            "max_cpu_seconds", allow_null=True, help_text="Empty: no limit.", **given(None)
        ),
        "network": serializers.BooleanField(
            help_text="Whether the job may use the network; false (the default): it runs "
            "in an empty network namespace and reaches nothing, the database included.",
            **given(False),
        ),
        "workload_class": serializers.CharField(
            allow_null=True,
            max_length=100,
            help_text="The name of the workload class whose interruption contract its jobs "
            "copy at submission; null (the default): the share's default class.",
            **given(None),
        ),
        "description": serializers.CharField(allow_blank=True, max_length=MAX_TEXT, **given("")),
        "reason": serializers.CharField(
            allow_blank=True,
            default="",
            max_length=MAX_TEXT,
            help_text="Why; recorded in the definition's history. Required.",
        ),
    }


JobDefinitionCreateSerializer = type(
    "JobDefinitionCreateSerializer",
    (RefuseUnknownFields, serializers.Serializer),
    {
        "unknown_field_message": "not a field of a job definition",
        "name": serializers.CharField(
            max_length=128, help_text="Lower-case letters, digits, '.', '_' and '-'; unique."
        ),
        **_content_fields(partial=False),
    },
)
JobDefinitionReviseSerializer = type(
    "JobDefinitionReviseSerializer",
    (RefuseUnknownFields, serializers.Serializer),
    {
        "unknown_field_message": "not a field of a revision (the name cannot change)",
        "base_revision": serializers.IntegerField(
            help_text="The revision the client last read; a newer one on the server is a 409."
        ),
        **_content_fields(partial=True),
    },
)


class RetireSerializer(RefuseUnknownFields, serializers.Serializer):
    unknown_field_message = "not a field of a retirement"

    reason = serializers.CharField(
        allow_blank=True, default="", max_length=MAX_TEXT, help_text="Why it is retired. Required."
    )


def definition_data_from_input(values: dict, *, base: definitions.DefinitionData | None = None):
    """DefinitionData for parsed input: names of queues and the instance type looked up
    (unknown names are validation errors); with `base`, absent fields keep its values."""
    errors: dict[str, list[str]] = {}
    changes = {
        key: value
        for key, value in values.items()
        if key in definitions.DefinitionData.__dataclass_fields__
    }
    if "queues" in changes:
        names = changes["queues"]
        found = JobQueue.objects.in_bulk(names, field_name="name")
        missing = [name for name in names if name not in found]
        if missing:
            errors["queues"] = [f"no queue named {', '.join(missing)}"]
        changes["queues"] = [found[name] for name in dict.fromkeys(names) if name in found]
    if changes.get("instance_type") is not None:
        name = changes["instance_type"]
        changes["instance_type"] = InstanceType.objects.filter(name=name).first()
        if changes["instance_type"] is None:
            errors["instance_type"] = [f"no instance type named {name}"]
    if changes.get("workload_class") is not None:
        name = changes["workload_class"]
        changes["workload_class"] = WorkloadClass.objects.filter(name=name).first()
        if changes["workload_class"] is None:
            errors["workload_class"] = [f"no workload class named {name}"]
    if "parameters" in changes:
        changes["parameters"] = [
            {key: value for key, value in spec.items() if value is not None}
            for spec in changes["parameters"]
        ]
    if errors:
        raise serializers.ValidationError(errors)
    if base is None:
        return definitions.DefinitionData(**changes)
    return replace(base, **changes)


class RevisionOutputSerializer(serializers.ModelSerializer):
    queues = serializers.ListField(
        source="queue_names",
        child=serializers.CharField(),
        help_text="The queues allowed when this revision was made.",
    )
    parameters = ParameterSerializer(many=True)
    environment = serializers.DictField(
        child=serializers.CharField(allow_null=True),
        help_text="Variable name -> value; values only for platform admins (null otherwise).",
    )
    instance_type = serializers.CharField(
        source="instance_type.name", allow_null=True, default=None
    )
    workload_class = serializers.CharField(
        source="workload_class.name",
        allow_null=True,
        default=None,
        help_text="Its jobs' workload class; null: the share's default.",
    )
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)

    class Meta:
        model = JobDefinitionRevision
        fields = [
            "revision",
            "queues",
            *definitions.REVISION_FIELDS,
            "reason",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not self.context.get("show_environment"):
            data["environment"] = dict.fromkeys(data["environment"])
        return data


class JobDefinitionOutputSerializer(serializers.ModelSerializer):
    queues = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    retired_by = serializers.CharField(source="retired_by.username", allow_null=True, default=None)
    latest = RevisionOutputSerializer(help_text="The latest revision: what new jobs run.")

    class Meta:
        model = JobDefinition
        fields = [
            "id",
            "name",
            "description",
            "state",
            "queues",
            "created_by",
            "created_at",
            "retired_at",
            "retired_by",
            "retire_reason",
            "latest",
        ]
        read_only_fields = fields

    def get_queues(self, obj) -> list[str]:
        """Names of the queues whose jobs may run it now."""
        return sorted(queue.name for queue in obj.queues.all())

    def get_state(self, obj) -> str:
        """active, or retired (it refuses new jobs)."""
        return "retired" if obj.retired_at else "active"


class RevisionConflictSerializer(ErrorSerializer):
    current_revision = serializers.IntegerField()
    submitted_revision = serializers.IntegerField(allow_null=True)


# Why jobs wait and when they start (scheduler.services.estimates).


class ClockSerializer(serializers.Serializer):
    simulated = serializers.BooleanField(
        help_text="The queue runs on a simulated clock: waits are in its (compute) seconds."
    )
    seconds_per_second = serializers.FloatField(
        source="speed", help_text="The queue's seconds per real second (1 for real time)."
    )


class EstimateSerializer(serializers.Serializer):
    quantiles = serializers.CharField(
        help_text="The range's quantiles, e.g. 'p10–p90': the start falls before start_p10 "
        "one time in ten and after start_p90 one time in ten, as calibrated by the queue's "
        "record of past estimates (range_basis)."
    )
    start_p10 = serializers.DateTimeField(
        allow_null=True, help_text="The range's low end (real time); null: never."
    )
    start_p50 = serializers.DateTimeField(
        allow_null=True, help_text="Median estimated start (real time); null: never."
    )
    start_p90 = serializers.DateTimeField(
        allow_null=True, help_text="The range's high end (real time); null: never."
    )
    wait_p10 = serializers.IntegerField(allow_null=True)
    wait_p50 = serializers.IntegerField(
        allow_null=True,
        help_text="Seconds from the forecast's instant (estimated_at) to start_p50, in the "
        "queue's clock (wait_p10 and wait_p90 likewise).",
    )
    wait_p90 = serializers.IntegerField(allow_null=True)
    basis = serializers.ChoiceField(
        choices=["definition", "share", "queue", "declared"],
        help_text="Whose history corrected the declared durations (declared: none).",
    )
    range_basis = serializers.ChoiceField(
        choices=["share", "queue", "default"],
        help_text="Whose record of past estimates against actual starts calibrated the range "
        "(default: too few yet; factors measured on Philly replays).",
    )
    range_samples = serializers.IntegerField(
        help_text="How many past outcomes that record counts (0 for default)."
    )
    forecast_p50 = serializers.DateTimeField(
        allow_null=True,
        help_text="The forecast's own start before the calibration (the engine's forward run "
        "with durations at their history's median).",
    )
    forecast_p90 = serializers.DateTimeField(
        allow_null=True, help_text="The same with durations at their history's 90th percentile."
    )
    never = serializers.BooleanField(help_text="It can never start as things stand.")


class PendingEntrySerializer(serializers.Serializer):
    job = serializers.IntegerField(source="job_id")
    name = serializers.CharField()
    share = serializers.CharField()
    order = serializers.IntegerField(help_text="1-based place in the queue's dispatch order.")
    position = serializers.IntegerField(
        allow_null=True, help_text="1-based place in its share's queue (null: misconfigured)."
    )
    queue_length = serializers.IntegerField(help_text="Jobs in its share's queue.")
    borrow_position = serializers.IntegerField(
        allow_null=True,
        help_text="Place in the queue's borrowing order (a head that must borrow), else null.",
    )
    reason = serializers.CharField(help_text="The engine's reason code.")
    blocker = serializers.CharField(help_text="What holds it, in plain words.")
    estimate = EstimateSerializer()
    needs_decision = serializers.BooleanField(help_text="It can never start as configured.")


class PendingListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    queue = serializers.IntegerField()
    clock = ClockSerializer()
    estimated_at = serializers.DateTimeField(
        help_text="The instant of the forecast these estimates come from."
    )
    current = serializers.BooleanField(
        help_text="false: the queue changed since estimated_at (or the forecast is old); these "
        "are the last estimates, as of estimated_at, and new ones are being made."
    )
    results = PendingEntrySerializer(many=True)


class SubmissionEstimateSerializer(serializers.Serializer):
    queue = serializers.CharField(source="queue.name")
    share = serializers.CharField()
    instance_type = serializers.CharField()
    instances = serializers.IntegerField()
    priority = serializers.IntegerField()
    clock = ClockSerializer()
    estimate = EstimateSerializer()
    position = serializers.IntegerField(allow_null=True)
    queue_length = serializers.IntegerField()
    borrow_position = serializers.IntegerField(allow_null=True)
    blocker = serializers.CharField()
    within_limit = serializers.BooleanField(
        allow_null=True,
        help_text="true: it would start within its share's limit; false: borrowing; "
        "null: it would never start.",
    )
    reclaimable_by = serializers.ListField(
        child=serializers.CharField(),
        help_text="Shares that could reclaim the capacity it borrows (empty within limit).",
    )
    warnings = serializers.ListField(child=serializers.CharField())
    too_big = serializers.BooleanField(help_text="It needs more than the whole queue has.")
    estimated_at = serializers.DateTimeField(
        help_text="The instant of the forecast these estimates come from."
    )
    current = serializers.BooleanField(
        help_text="false: the queue changed since estimated_at (or the forecast is old); these "
        "are the last estimates, as of estimated_at, and new ones are being made."
    )
    stored = serializers.BooleanField(default=False, help_text="Always false: nothing is stored.")
