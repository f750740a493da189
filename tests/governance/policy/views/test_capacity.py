"""The queue capacity editor: rows, rules on their row, conflicts, preview."""

import pytest
from django.urls import reverse

from fleet.models import JobQueue
from governance.models import PolicyChange
from governance.policy.services import queue_set_capacity
from tests.factories import InstanceTypeFactory

pytestmark = pytest.mark.django_db


def _payload(queue, capacity, *, reason="New hardware arrived", version=None):
    data = {"reason": reason, "version": str(version or queue.version)}
    for index, (name, instances) in enumerate(capacity.items()):
        data[f"capacity-{index}-instance_type"] = name
        data[f"capacity-{index}-max_instances"] = str(instances)
    return data


def test_the_editor_shows_the_current_capacity(admin_client, aws_queue):
    response = admin_client.get(reverse("queue-capacity", args=[aws_queue.pk]))

    html = response.content.decode()
    assert "<title>Capacity of aws-sample" in html
    row = response.context["form"].limit_rows[0]
    assert row["instance_type"].value() == "ml.g5.xlarge"
    assert row["max_instances"].value() == 3
    assert 'name="version" value="1"' in html
    assert 'hx-post="' + reverse("queue-capacity-impact", args=[aws_queue.pk]) in html


def test_saving_capacity(admin_client, aws_queue):
    response = admin_client.post(
        reverse("queue-capacity", args=[aws_queue.pk]), _payload(aws_queue, {"ml.g5.xlarge": 5})
    )

    assert response.status_code == 302
    assert aws_queue.capacities.get().instances == 5
    change = PolicyChange.objects.get(target=PolicyChange.Target.QUEUE)
    assert change.after == {"capacity": {"ml.g5.xlarge": 5}}


@pytest.mark.parametrize(
    "capacity, field",
    [
        pytest.param({"ml.g5.xlarge": 0}, "max_instances", id="at-least-one-instance"),
        pytest.param({"ml.g5.xlarge": "many"}, "max_instances", id="a-number"),
        pytest.param({"ml.bogus": 1}, "instance_type", id="a-known-type"),
    ],
)
def test_rule_is_shown_on_its_row(admin_client, aws_queue, capacity, field):
    response = admin_client.post(
        reverse("queue-capacity", args=[aws_queue.pk]), _payload(aws_queue, capacity)
    )

    assert response.status_code == 200
    assert response.context["form"].limit_rows[0].errors[field]
    assert aws_queue.capacities.get().instances == 3
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.QUEUE).exists()


def test_a_queue_needs_some_capacity(admin_client, aws_queue):
    response = admin_client.post(
        reverse("queue-capacity", args=[aws_queue.pk]), _payload(aws_queue, {})
    )

    assert response.status_code == 200
    assert response.context["form"].limit_errors
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.QUEUE).exists()


def test_dropping_a_type_the_shares_still_use_is_refused(admin_client, aws_queue):
    InstanceTypeFactory(name="ml.g5.2xlarge")

    response = admin_client.post(
        reverse("queue-capacity", args=[aws_queue.pk]),
        _payload(aws_queue, {"ml.g5.2xlarge": 2}),
    )

    form = response.context["form"]
    assert response.status_code == 200
    assert form.errors or form.has_limit_errors
    assert aws_queue.capacities.get().instance_type.name == "ml.g5.xlarge"


def test_reason_is_required(admin_client, aws_queue):
    response = admin_client.post(
        reverse("queue-capacity", args=[aws_queue.pk]),
        _payload(aws_queue, {"ml.g5.xlarge": 4}, reason=""),
    )

    assert response.context["form"].errors["reason"]
    assert aws_queue.capacities.get().instances == 3


def test_conflict_keeps_the_input(admin_client, admin, aws_queue):
    queue_set_capacity(
        actor=admin,
        queue=aws_queue,
        capacity={"ml.g5.xlarge": 4},
        reason="theirs",
        expected_version=1,
    )

    response = admin_client.post(
        reverse("queue-capacity", args=[aws_queue.pk]),
        _payload(aws_queue, {"ml.g5.xlarge": 6}, version=1),
    )

    assert response.status_code == 200
    rows = response.context["conflict"]["rows"]
    assert (rows[0].theirs, rows[0].yours) == ("ml.g5.xlarge × 4", "ml.g5.xlarge × 6")
    form = response.context["form"]
    assert form.limit_rows[0]["max_instances"].value() == "6"
    assert form["version"].value() == "2"
    assert JobQueue.objects.get(pk=aws_queue.pk).capacities.get().instances == 4


def test_preview_fragment(admin_client, aws_queue):
    response = admin_client.post(
        reverse("queue-capacity-impact", args=[aws_queue.pk]),
        _payload(aws_queue, {"ml.g5.xlarge": 1}),
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    assert "<html" not in response.content.decode()
    assert aws_queue.capacities.get().instances == 3


def test_the_capacity_preview_says_what_would_be_refused(admin_client, aws_queue):
    InstanceTypeFactory(name="ml.p4d.24xlarge")
    url = reverse("queue-capacity-impact", args=[aws_queue.pk])

    response = admin_client.post(url, _payload(aws_queue, {"ml.p4d.24xlarge": 2}))

    html = response.content.decode()
    assert response.status_code == 200
    assert "instance type &#x27;ml.g5.xlarge&#x27; is not in the queue" in html
    assert aws_queue.capacities.get().instance_type.name == "ml.g5.xlarge"
