"""Input and output serializers of the API, per resource.

Input serializers parse and bound: types, lookups by name, choices, and the ranges
storage allows (core.bounds) or the policy documents (a borrow limit up to
BORROW_LIMIT_MAX, a priority up to 9999), so the OpenAPI schema states them and an
out-of-range value is a field error. Every rule beyond that is checked by
governance.policy.services, which the views call; where a bound repeats a rule, the
serializer uses the service's message.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.fields import (
    BoundedPrimaryKeyRelatedField,
    InstanceMapField,
    NameRelatedField,
    count_field,
    text_field,
)
from core.api.serializers import OutputSerializer
from core.bounds import MAX_COUNT, MAX_SMALL
from engine.strategies import STRATEGIES, spoken_list
from fleet.bridge import BORROW_UNLIMITED, stored_borrow_limit
from fleet.models import (
    BORROWING_STRATEGIES,
    InstanceType,
    JobQueue,
    QuotaShare,
    Team,
    UrgencyDefinition,
    WorkloadClass,
)
from fleet.selectors import capacity_seen_document
from governance.models import PolicyChange
from governance.policy.executor_binding import (
    binding_executors,
    instance_type_binding_document,
    queue_binding_document,
)
from governance.policy.services import BORROW_LIMIT_MAX, changed_fields

User = get_user_model()

INSTANCE_MAP = serializers.DictField(
    child=serializers.IntegerField(),
    help_text='Instance type name -> number of instances, e.g. {"ml.g5.xlarge": 3}.',
)


def _reason_field():
    return text_field(
        allow_blank=True,
        default="",
        help_text="Why this change is made; recorded in the policy history. Required.",
    )


def _version_field():
    return count_field(
        help_text="The version the client last read; a newer one on the server is a 409 conflict."
    )


def _team_field(**kwargs):
    return NameRelatedField(
        max_length=100,
        slug_field="name",
        queryset=Team.objects.all(),
        error_messages={"does_not_exist": "unknown team '{value}'"},
        **kwargs,
    )


def _user_field(**kwargs):
    return NameRelatedField(
        max_length=150,
        slug_field="username",
        queryset=User.objects.all(),
        error_messages={"does_not_exist": "unknown user '{value}'"},
        **kwargs,
    )


# Errors: the one shape (core.api.errors), documented on every operation by
# core.api.schema; views may still name it in their own `responses`.


# Instance types.


class InstanceTypeSerializer(serializers.ModelSerializer):
    # Set only by POST .../price/ (a policy write with a reason and history).
    price_per_hour = serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        read_only=True,
        allow_null=True,
        help_text="Price of one instance per hour in `currency`; null: no price (no cost "
        "is shown for the type). Set by POST /api/v1/instance-types/{id}/price/.",
    )
    currency = serializers.SerializerMethodField(help_text="settings.COST_CURRENCY.")
    binding = serializers.SerializerMethodField(
        help_text="What one instance asks each executor with settings for, by executor "
        "(the fields of its binding schema; each field is also shown at the top level). "
        "A policy write: change them with PATCH {<its fields>, reason}.",
    )

    class Meta:
        model = InstanceType
        fields = [
            "id",
            "name",
            "gpu_count",
            "gpu_model",
            "binding",
            "price_per_hour",
            "currency",
        ]
        # The model's CheckConstraint instancetype_gpus_ge_1 and its column's range,
        # stated here so the error names the field instead of failing at the database.
        extra_kwargs = {"gpu_count": {"min_value": 1, "max_value": MAX_SMALL}}

    def get_currency(self, _obj) -> str:
        return settings.COST_CURRENCY

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "object"}})
    def get_binding(self, itype) -> dict:
        return {
            executor: instance_type_binding_document(itype, executor)
            for executor in binding_executors()
        }

    def to_representation(self, instance):
        data = super().to_representation(instance)
        for document in data.get("binding", {}).values():
            data.update(document)
        return data


class InstanceTypePriceSerializer(serializers.Serializer):
    """An instance type's price is policy (governance.policy.prices): a `reason`, the
    history, and a proposal (202) when changes need review."""

    price_per_hour = serializers.CharField(
        allow_null=True,
        allow_blank=True,
        max_length=32,
        help_text="Per instance per hour, more than 0, at most 4 decimals; null or empty "
        "clears the price.",
    )
    reason = _reason_field()


# Teams.


class TeamOutputSerializer(serializers.ModelSerializer):
    members = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    leads = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)

    class Meta:
        model = Team
        fields = ["id", "name", "description", "members", "leads"]


class TeamInputSerializer(serializers.ModelSerializer):
    """A team's membership is policy: a change needs a `reason` and is recorded in the
    history (governance.policy.membership); with review on it answers 202 with the
    proposal."""

    description = text_field(allow_blank=True, required=False)
    members = _user_field(many=True, required=False)
    leads = _user_field(many=True, required=False)
    reason = _reason_field()

    class Meta:
        model = Team
        fields = ["name", "description", "members", "leads", "reason"]


class TeamDeleteSerializer(serializers.Serializer):
    reason = _reason_field()


# Queues.


class BindingReasonSerializer(serializers.Serializer):
    """The reason of an executor binding's change, a policy write: the history, review.
    The fields themselves are the executor's binding schema's, checked by its service
    (governance.policy.executor_binding), the one check the page and its command use."""

    reason = _reason_field()


class QueueOutputSerializer(OutputSerializer):
    capacity = serializers.SerializerMethodField()

    class Meta:
        model = JobQueue
        fields = [
            "id",
            "name",
            "description",
            "executor",
            "default_preemption_retries",
            "runnable_time_limit",
            "capacity",
            "capacity_seen",
            "binding",
            "version",
        ]

    capacity_seen = serializers.SerializerMethodField(
        help_text="What its executor can really use now, as last seen (per type total, "
        "usable and held_outside; nodes out; the partition's state; the cluster's jobs "
        "the product did not start that hold capacity: outside, outside_more); null when "
        "the executor reports nothing."
    )

    binding = serializers.SerializerMethodField(
        help_text="The queue's settings for its executor (the fields of its binding "
        "schema; {} when it has none); each field is also shown at the top level."
    )

    @extend_schema_field(INSTANCE_MAP)
    def get_capacity(self, queue) -> dict[str, int]:
        return {cap.instance_type.name: cap.instances for cap in queue.capacities.all()}

    @extend_schema_field({"type": "object", "nullable": True})
    def get_capacity_seen(self, queue) -> dict | None:
        return capacity_seen_document(queue)

    @extend_schema_field({"type": "object"})
    def get_binding(self, queue) -> dict:
        return queue_binding_document(queue)

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data.update(data.get("binding") or {})
        return data


class QueueCreateSerializer(serializers.ModelSerializer):
    description = text_field(allow_blank=True, required=False)
    capacity = InstanceMapField(help_text="Instance type name -> instances (1 to 5 types, ≥ 1).")
    reason = _reason_field()

    class Meta:
        model = JobQueue
        fields = [
            "name",
            "description",
            "executor",
            "default_preemption_retries",
            "runnable_time_limit",
            "capacity",
            "reason",
        ]
        # Stated for every database backend (SQLite reports no integer ranges).
        extra_kwargs = {
            "default_preemption_retries": {"min_value": 0, "max_value": MAX_COUNT},
            "runnable_time_limit": {"min_value": 1, "max_value": MAX_COUNT},
        }


class QueueCapacitySerializer(serializers.Serializer):
    """A change of the queue's capacity or of its executor binding (one of the two per
    request): each a policy write with its reason, history entry and review. The
    binding's fields are its executor's (context `binding_fields`), given at the top
    level or in `binding`; fields left out keep their value."""

    capacity = InstanceMapField(
        required=False, help_text="The whole new capacity map (replaces the old one)."
    )
    binding = serializers.DictField(
        required=False,
        help_text="The queue's executor settings to change (the fields of its executor's "
        "binding schema), checked with the executor (its live check) before saving.",
    )
    reason = _reason_field()
    version = _version_field()

    def to_internal_value(self, data):
        fields = self.context.get("binding_fields", ())
        given = {name: data[name] for name in fields if name in data}
        if given and hasattr(data, "items"):
            data = {key: value for key, value in data.items() if key not in given}
            data["binding"] = {**dict(data.get("binding") or {}), **given}
        return super().to_internal_value(data)

    def validate(self, attrs):
        binding = attrs.get("binding")
        fields = self.context.get("binding_fields", ())
        unknown = sorted(set(binding or {}) - set(fields))
        if unknown:
            raise serializers.ValidationError(
                {unknown[0]: ["the queue's executor has no such setting"]}
            )
        if "capacity" in attrs and binding:
            raise serializers.ValidationError(
                {next(iter(binding)): ["change the capacity and the binding in separate requests"]}
            )
        if "capacity" not in attrs and not binding:
            raise serializers.ValidationError(
                {"capacity": ["give the new capacity, or the executor binding's fields"]}
            )
        return attrs


# Quota shares.


class ShareOutputSerializer(OutputSerializer):
    queue_name = serializers.CharField(source="queue.name", read_only=True)
    team = serializers.CharField(source="team.name", read_only=True)
    capacity_limits = serializers.SerializerMethodField()
    borrow_limit = serializers.SerializerMethodField(
        help_text="Percent of the share's own limit it may borrow; -1 = unlimited (see "
        "borrow_unlimited); null when its strategy does not borrow."
    )
    borrow_unlimited = serializers.SerializerMethodField(
        help_text="True when the share may borrow without a limit (borrow_limit -1)."
    )
    default_workload_class = serializers.CharField(
        source="default_workload_class.name",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="The workload class whose contract its jobs copy when their definition "
        "names none; null: no contract.",
    )

    class Meta:
        model = QuotaShare
        fields = [
            "id",
            "queue",
            "queue_name",
            "name",
            "team",
            "strategy",
            "borrow_limit",
            "borrow_unlimited",
            "in_share_preemption",
            "priority_ceiling",
            "default_workload_class",
            "state",
            "position",
            "capacity_limits",
            "version",
            "created_at",
            "updated_at",
        ]

    @extend_schema_field(INSTANCE_MAP)
    def get_capacity_limits(self, share) -> dict[str, int]:
        return {limit.instance_type.name: limit.max_instances for limit in share.limits.all()}

    # A borrowing share's NULL column reads as unlimited (fleet.bridge): shown as -1 with
    # the flag, never as a number that looks like a limit.
    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_borrow_limit(self, share) -> int | None:
        return stored_borrow_limit(share.strategy, share.borrow_limit)

    def get_borrow_unlimited(self, share) -> bool:
        return stored_borrow_limit(share.strategy, share.borrow_limit) == BORROW_UNLIMITED


class _ShareFieldsSerializer(serializers.Serializer):
    """The editable fields of a share. Missing ones are filled in by the view:
    defaults on create and PUT, the current value on PATCH."""

    name = serializers.CharField(max_length=100, allow_blank=True, required=False)
    team = _team_field(required=False, allow_null=True, help_text="Team name.")
    strategy = serializers.ChoiceField(
        choices=QuotaShare.Strategy.choices,
        required=False,
        error_messages={"invalid_choice": f"must be {spoken_list(STRATEGIES)}"},
    )
    borrow_limit = serializers.IntegerField(
        allow_null=True,
        required=False,
        min_value=-1,
        max_value=BORROW_LIMIT_MAX,
        error_messages={
            "max_value": f"must be at most {BORROW_LIMIT_MAX} (percent of the share's own "
            "limit), or -1 for unlimited",
            "min_value": "must be -1 (unlimited) or a percent of at least 0",
        },
        help_text=f"Percent of the share's own limit it may borrow, 0 to {BORROW_LIMIT_MAX}; "
        f"-1 = unlimited. Only with {spoken_list(BORROWING_STRATEGIES)}.",
    )
    in_share_preemption = serializers.BooleanField(required=False)
    priority_ceiling = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=9999,
        help_text="The highest job priority the team's leads may set without an exception "
        "or an urgency that names the team (admins). Left out or null: kept as it is "
        "(new shares: 100).",
    )
    state = serializers.ChoiceField(
        choices=QuotaShare.State.choices,
        required=False,
        error_messages={"invalid_choice": "must be ENABLED or DISABLED"},
    )
    capacity_limits = InstanceMapField(
        required=False, help_text="Instance type of the queue -> max instances (1 to 5 types)."
    )
    default_workload_class = serializers.CharField(
        max_length=100,
        required=False,
        allow_null=True,
        help_text="Name of the workload class whose contract the share's jobs copy when "
        "their definition names none; null: no contract. Left out: kept as it is.",
    )
    reason = _reason_field()


class ShareCreateSerializer(_ShareFieldsSerializer):
    queue = BoundedPrimaryKeyRelatedField(queryset=JobQueue.objects.all())


class ShareUpdateSerializer(_ShareFieldsSerializer):
    version = _version_field()


# Urgency definitions.


class UrgencyOutputSerializer(serializers.ModelSerializer):
    allowed_kinds = serializers.ListField(child=serializers.CharField())
    invokers = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)

    class Meta:
        model = UrgencyDefinition
        fields = [
            "id",
            "name",
            "meaning",
            "examples",
            "priority",
            "max_window_hours",
            "allowed_kinds",
            "invokers",
            "version",
        ]


_PRIORITY_MESSAGE = "must be a whole number from 0 to 9999"
_WINDOW_MESSAGE = "must be a whole number of hours, at least 1"


class _UrgencyFieldsSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, allow_blank=True, required=False)
    meaning = text_field(allow_blank=True, required=False)
    examples = text_field(allow_blank=True, required=False)
    priority = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=9999,
        error_messages={"min_value": _PRIORITY_MESSAGE, "max_value": _PRIORITY_MESSAGE},
        help_text="The job priority it grants, 0 to 9999.",
    )
    max_window_hours = count_field(
        required=False,
        error_messages={"min_value": _WINDOW_MESSAGE},
        help_text="The longest exception window it allows, in hours (at least 1).",
    )
    allowed_kinds = serializers.ListField(
        child=serializers.ChoiceField(
            choices=UrgencyDefinition.Kind.choices,
            error_messages={
                "invalid_choice": "unknown kind '{input}'; choose from "
                + ", ".join(sorted(UrgencyDefinition.Kind.values))
            },
        ),
        required=False,
        max_length=len(UrgencyDefinition.Kind.values),
        help_text="The exception kinds it may be used for.",
    )
    invokers = _team_field(
        many=True, required=False, help_text="Names of the teams that may invoke it; [] = all."
    )
    reason = _reason_field()


class UrgencyCreateSerializer(_UrgencyFieldsSerializer):
    pass


class UrgencyUpdateSerializer(_UrgencyFieldsSerializer):
    version = _version_field()


# Workload classes.


class WorkloadClassOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = WorkloadClass
        fields = [
            "id",
            "name",
            "description",
            "min_runtime_reclaim",
            "min_runtime_preempt",
            "grace",
            "checkpoint_on_notice",
            "version",
        ]


class _WorkloadClassFieldsSerializer(serializers.Serializer):
    """The class's fields as typed; their ranges are the service's one check
    (governance.policy.workload_classes.workload_class_validate)."""

    name = serializers.CharField(max_length=100, allow_blank=True, required=False)
    description = text_field(allow_blank=True, required=False)
    min_runtime_reclaim = serializers.IntegerField(
        required=False,
        help_text="Seconds from the start of each run during which its jobs are not a "
        "victim of reclaim (0 = none).",
    )
    min_runtime_preempt = serializers.IntegerField(
        required=False,
        help_text="Seconds from the start of each run during which its jobs are not a "
        "victim of in-share preemption (0 = none).",
    )
    grace = serializers.IntegerField(
        required=False,
        help_text="Seconds of notice a victim gets before its capacity is taken (0 = none).",
    )
    checkpoint_on_notice = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Seconds its jobs need after notice to save and exit (at least 1); null: "
        "they do not checkpoint on notice. Only with a grace.",
    )
    reason = _reason_field()


class WorkloadClassCreateSerializer(_WorkloadClassFieldsSerializer):
    pass


class WorkloadClassUpdateSerializer(_WorkloadClassFieldsSerializer):
    version = _version_field()


class WorkloadClassDeleteSerializer(serializers.Serializer):
    reason = _reason_field()


# Policy history.


class FieldChangeSerializer(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class PolicyChangeOutputSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", read_only=True, allow_null=True)
    subject = serializers.CharField(
        source="subject.username",
        read_only=True,
        allow_null=True,
        help_text="For a role change: the user whose roles changed.",
    )
    changes = serializers.SerializerMethodField()

    class Meta:
        model = PolicyChange
        fields = [
            "id",
            "created_at",
            "actor",
            "reason",
            "cause",
            "target",
            "object_repr",
            "queue",
            "share",
            "urgency",
            "team",
            "subject",
            "before",
            "after",
            "changes",
            "reverts",
        ]

    @extend_schema_field(FieldChangeSerializer(many=True))
    def get_changes(self, change) -> list[dict]:
        return [
            {"field": name, "before": old, "after": new}
            for name, old, new in changed_fields(change.before, change.after)
        ]


class RevertSerializer(serializers.Serializer):
    reason = _reason_field()
