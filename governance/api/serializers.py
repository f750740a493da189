"""Input and output serializers of the API, per resource.

Input serializers only parse (types, lookups by name); every policy rule is
checked by governance.services.policy, which the views call. So they carry
no min/max or choice constraints of their own: the service's message is the
one the pages show too.
"""

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.models import (
    InstanceType,
    JobQueue,
    PolicyChange,
    QuotaShare,
    Team,
    UrgencyDefinition,
)
from governance.services.policy import changed_fields

User = get_user_model()

INSTANCE_MAP = serializers.DictField(
    child=serializers.IntegerField(),
    help_text='Instance type name -> number of instances, e.g. {"ml.g5.xlarge": 3}.',
)


class InstanceMapField(serializers.DictField):
    """{"ml.g5.xlarge": 3}: instance type name -> instances. Values are only parsed here."""

    child = serializers.IntegerField()


def _reason_field():
    return serializers.CharField(
        allow_blank=True,
        default="",
        help_text="Why this change is made; recorded in the policy history. Required.",
    )


def _version_field():
    return serializers.IntegerField(
        help_text="The version the client last read; a newer one on the server is a 409 conflict."
    )


def _team_field(**kwargs):
    return serializers.SlugRelatedField(
        slug_field="name",
        queryset=Team.objects.all(),
        error_messages={"does_not_exist": "unknown team '{value}'"},
        **kwargs,
    )


# Errors (documentation of the one error shape).


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="The first problem, as 'field: message'.")
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Field name -> messages.",
    )


class ConflictSerializer(ErrorSerializer):
    current = serializers.JSONField(help_text="The object as someone else saved it.")
    current_version = serializers.IntegerField()
    submitted = serializers.JSONField(help_text="What this request tried to save (not applied).")
    submitted_version = serializers.IntegerField(allow_null=True)


# Instance types.


class InstanceTypeSerializer(serializers.ModelSerializer):
    class Meta:
        model = InstanceType
        fields = ["id", "name", "gpu_count", "gpu_model"]
        # The model's CheckConstraint instancetype_gpus_ge_1, stated here so the
        # error names the field instead of failing at the database.
        extra_kwargs = {"gpu_count": {"min_value": 1}}


# Teams.


class TeamOutputSerializer(serializers.ModelSerializer):
    members = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    leads = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)

    class Meta:
        model = Team
        fields = ["id", "name", "description", "members", "leads"]


class TeamInputSerializer(serializers.ModelSerializer):
    members = serializers.SlugRelatedField(
        slug_field="username",
        many=True,
        required=False,
        queryset=User.objects.all(),
        error_messages={"does_not_exist": "unknown user '{value}'"},
    )
    leads = serializers.SlugRelatedField(
        slug_field="username",
        many=True,
        required=False,
        queryset=User.objects.all(),
        error_messages={"does_not_exist": "unknown user '{value}'"},
    )

    class Meta:
        model = Team
        fields = ["name", "description", "members", "leads"]


# Queues.


class QueueOutputSerializer(serializers.ModelSerializer):
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
            "version",
        ]

    @extend_schema_field(INSTANCE_MAP)
    def get_capacity(self, queue) -> dict[str, int]:
        return {cap.instance_type.name: cap.instances for cap in queue.capacities.all()}


class QueueCreateSerializer(serializers.ModelSerializer):
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


class QueueCapacitySerializer(serializers.Serializer):
    capacity = InstanceMapField(help_text="The whole new capacity map (replaces the old one).")
    reason = _reason_field()
    version = _version_field()


# Quota shares.


class ShareOutputSerializer(serializers.ModelSerializer):
    queue_name = serializers.CharField(source="queue.name", read_only=True)
    team = serializers.CharField(source="team.name", read_only=True)
    capacity_limits = serializers.SerializerMethodField()

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
            "in_share_preemption",
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


class _ShareFieldsSerializer(serializers.Serializer):
    """The editable fields of a share. Missing ones are filled in by the view:
    defaults on create and PUT, the current value on PATCH."""

    name = serializers.CharField(max_length=100, allow_blank=True, required=False)
    team = _team_field(required=False, allow_null=True, help_text="Team name.")
    strategy = serializers.CharField(
        max_length=16, required=False, help_text="RESERVE, LEND or LEND_AND_BORROW."
    )
    borrow_limit = serializers.IntegerField(
        allow_null=True,
        required=False,
        help_text="Percent of the share's own limit it may borrow; -1 = unlimited. "
        "Only with LEND_AND_BORROW.",
    )
    in_share_preemption = serializers.BooleanField(required=False)
    state = serializers.CharField(max_length=8, required=False, help_text="ENABLED or DISABLED.")
    capacity_limits = InstanceMapField(
        required=False, help_text="Instance type of the queue -> max instances (1 to 5 types)."
    )
    reason = _reason_field()


class ShareCreateSerializer(_ShareFieldsSerializer):
    queue = serializers.PrimaryKeyRelatedField(queryset=JobQueue.objects.all())


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


class _UrgencyFieldsSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, allow_blank=True, required=False)
    meaning = serializers.CharField(allow_blank=True, required=False)
    examples = serializers.CharField(allow_blank=True, required=False)
    priority = serializers.IntegerField(required=False, help_text="0 to 9999.")
    max_window_hours = serializers.IntegerField(required=False, help_text="At least 1.")
    allowed_kinds = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text=f"Any of {', '.join(UrgencyDefinition.Kind.values)}.",
    )
    invokers = _team_field(
        many=True, required=False, help_text="Names of the teams that may invoke it; [] = all."
    )
    reason = _reason_field()


class UrgencyCreateSerializer(_UrgencyFieldsSerializer):
    pass


class UrgencyUpdateSerializer(_UrgencyFieldsSerializer):
    version = _version_field()


# Policy history.


class FieldChangeSerializer(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class PolicyChangeOutputSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", read_only=True, allow_null=True)
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
