"""The output serializers' read plans (core.api.serializers) give exactly what
DRF's generic representation gives, field for field, for every output serializer in the
API, in a time zone other than UTC."""

import pytest
from rest_framework import serializers

from core.api.serializers import OutputSerializer
from fleet.models import JobQueue, QuotaShare
from governance.policy.serializers import QueueOutputSerializer, ShareOutputSerializer
from governance.policy.services import queue_set_capacity
from scheduler.serializers import JobOutputSerializer
from tests.factories import CapacityLimitFactory, InstanceTypeFactory, aws_sample_queue

pytestmark = pytest.mark.django_db


def generic(serializer_class, instance) -> dict:
    return dict(serializers.ModelSerializer.to_representation(serializer_class(), instance))


def test_every_output_serializer_is_checked_here_or_in_the_job_output_test():
    checked = {QueueOutputSerializer, ShareOutputSerializer, JobOutputSerializer}
    ours = {c for c in OutputSerializer.__subclasses__() if not c.__module__.startswith("tests")}
    assert ours == checked


def test_queues_and_shares_read_by_plan_equal_the_generic_representation(settings, admin):
    settings.TIME_ZONE = "Asia/Tokyo"
    queue = aws_sample_queue(capacity=5)
    other = InstanceTypeFactory(name="ml.p4d.24xlarge", gpu_count=8)
    capacity = {"ml.g5.xlarge": 5, "ml.p4d.24xlarge": 2}
    queue_set_capacity(
        actor=admin, queue=queue, capacity=capacity, reason="two types", expected_version=1
    )
    CapacityLimitFactory(share=QuotaShare.objects.get(name="qs2"), instance_type=other)
    queues = list(JobQueue.objects.order_by("pk"))
    shares = list(QuotaShare.objects.select_related("queue", "team").order_by("pk"))

    for queue in queues:
        assert dict(QueueOutputSerializer(queue).data) == generic(QueueOutputSerializer, queue)
    assert [dict(q) for q in QueueOutputSerializer(queues, many=True).data] == [
        generic(QueueOutputSerializer, q) for q in queues
    ]
    assert QueueOutputSerializer(queues[0]).data["capacity"] == capacity
    for share in shares:
        fast = dict(ShareOutputSerializer(share).data)
        assert fast == generic(ShareOutputSerializer, share)
        assert list(fast) == ShareOutputSerializer.Meta.fields
    limits = ShareOutputSerializer(shares[1]).data["capacity_limits"]
    assert limits == {"ml.g5.xlarge": 1, "ml.p4d.24xlarge": 1}
    assert ShareOutputSerializer(shares[0]).data["created_at"].endswith("+09:00")


def test_a_field_without_a_plan_is_refused_when_the_plan_is_made():
    class Nested(OutputSerializer):
        queue = QueueOutputSerializer()

        class Meta:
            model = QuotaShare
            fields = ["id", "queue"]

    with pytest.raises(TypeError, match="queue: a nested"):
        Nested.read_plan()
