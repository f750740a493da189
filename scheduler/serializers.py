"""Input and output serializers of the jobs API.

Input serializers only parse (types; shares, instance types and urgency definitions
are looked up in bulk, three queries for any number of jobs); every rule about a job
is checked by scheduler.services.jobs, whose messages the pages show too.
"""

from __future__ import annotations

from collections.abc import Sequence

from rest_framework import serializers

from governance.models import InstanceType, QuotaShare, UrgencyDefinition
from scheduler.models import Job, JobEvent
from scheduler.services.jobs import JobData


class JobInputSerializer(serializers.Serializer):
    share = serializers.IntegerField(help_text="Id of the quota share to submit into.")
    name = serializers.CharField(max_length=200, allow_blank=True)
    instance_type = serializers.CharField(help_text="Instance type name, e.g. ml.g5.xlarge.")
    instances = serializers.IntegerField(default=1)
    expected_duration = serializers.IntegerField(help_text="Compute seconds if never stopped.")
    priority = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="0–9999; empty: the urgency's."
    )
    urgency = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="Id of an urgency definition."
    )
    checkpoint_interval = serializers.IntegerField(required=False, allow_null=True, default=None)
    restart_overhead = serializers.IntegerField(default=0)
    preemption_retries = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Retry bound; empty: the queue's default.",
    )
    command = serializers.CharField(required=False, allow_blank=True, default="")


class JobBulkInputSerializer(serializers.Serializer):
    jobs = JobInputSerializer(many=True)


def job_data_from_input(items: Sequence[dict], *, prefix: bool) -> list[JobData]:
    """JobData for parsed items; unknown ids and names are validation errors."""
    shares = QuotaShare.objects.select_related("queue", "team").in_bulk(
        {item["share"] for item in items}
    )
    types = InstanceType.objects.in_bulk(
        {item["instance_type"] for item in items}, field_name="name"
    )
    urgencies = UrgencyDefinition.objects.in_bulk(
        {item["urgency"] for item in items if item["urgency"] is not None}
    )
    errors: dict[str, list[str]] = {}
    out = []
    for index, item in enumerate(items):
        key = (lambda name, i=index: f"jobs[{i}].{name}") if prefix else (lambda name: name)
        share = shares.get(item["share"])
        itype = types.get(item["instance_type"])
        urgency = urgencies.get(item["urgency"]) if item["urgency"] is not None else None
        if share is None:
            errors[key("share")] = [f"no share with id {item['share']}"]
        if itype is None:
            errors[key("instance_type")] = [f"no instance type named {item['instance_type']}"]
        if item["urgency"] is not None and urgency is None:
            errors[key("urgency")] = [f"no urgency definition with id {item['urgency']}"]
        if errors:
            continue
        out.append(
            JobData(
                share=share,
                name=item["name"],
                instance_type=itype,
                instances=item["instances"],
                expected_duration=item["expected_duration"],
                priority=item["priority"],
                urgency=urgency,
                checkpoint_interval=item["checkpoint_interval"],
                restart_overhead=item["restart_overhead"],
                preemption_retries=item["preemption_retries"],
                command=item["command"],
            )
        )
    if errors:
        raise serializers.ValidationError(errors)
    return out


class JobOutputSerializer(serializers.ModelSerializer):
    queue = serializers.CharField(source="queue.name")
    share = serializers.IntegerField(source="share_id")
    share_name = serializers.CharField(source="share.name")
    team = serializers.CharField(source="share.team.name")
    instance_type = serializers.CharField(source="instance_type.name")

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "queue",
            "share",
            "share_name",
            "team",
            "priority",
            "urgency",
            "instance_type",
            "instances",
            "expected_duration",
            "checkpoint_interval",
            "restart_overhead",
            "preemption_retries",
            "command",
            "state",
            "reason",
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


class JobEventOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["id", "at", "type", "cause", "by", "borrowed", "attempt", "actor", "detail"]
        read_only_fields = fields


class BulkResultSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    ids = serializers.ListField(child=serializers.IntegerField())


class PriorityInputSerializer(serializers.Serializer):
    priority = serializers.IntegerField()
