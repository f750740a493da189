"""Queues through the API: the capacity map, its rules, and creating a queue."""

import pytest

from fleet.models import JobQueue
from governance.models import PolicyChange
from tests.factories import InstanceTypeFactory

XL = "ml.g5.xlarge"


def _set_capacity(client, queue, capacity, *, version=1, reason="hardware moved"):
    body = {"capacity": capacity, "reason": reason, "version": version}
    return client.patch(f"/api/v1/queues/{queue.pk}/", body, format="json")


def test_detail_has_capacity_map_and_version(admin_api, aws_queue):
    body = admin_api.get(f"/api/v1/queues/{aws_queue.pk}/").json()
    assert (body["name"], body["capacity"], body["version"]) == ("aws-sample", {XL: 3}, 1)


def test_change_capacity_records_history(admin_api, admin, aws_queue):
    response = _set_capacity(admin_api, aws_queue, {XL: 5})
    assert response.status_code == 200, response.json()
    assert (response.json()["capacity"], response.json()["version"]) == ({XL: 5}, 2)
    change = PolicyChange.objects.get(queue=aws_queue)
    assert (change.actor, change.reason, change.target) == (admin, "hardware moved", "queue")
    assert (change.before, change.after) == ({"capacity": {XL: 3}}, {"capacity": {XL: 5}})


CAPACITY_RULES = [
    pytest.param({}, "capacity", "must list 1 to 5 instance types", id="no-types"),
    pytest.param({XL: 0}, f"capacity.{XL}", "must be at least 1", id="zero-instances"),
    pytest.param(
        {XL: 3, "no.such": 1},
        "capacity.no.such",
        "unknown instance type 'no.such'",
        id="unknown-type",
    ),
]


@pytest.mark.parametrize(("capacity", "field", "message"), CAPACITY_RULES)
def test_capacity_rule(admin_api, aws_queue, unchanged, capacity, field, message):
    with unchanged():
        response = _set_capacity(admin_api, aws_queue, capacity)
    assert response.status_code == 400
    assert message in response.json()["errors"][field]


def test_capacity_rule_more_than_five_types(admin_api, aws_queue, unchanged):
    names = [XL] + [InstanceTypeFactory(name=f"ml.g5.{n}xlarge").name for n in (2, 4, 8, 12, 16)]
    with unchanged():
        response = _set_capacity(admin_api, aws_queue, dict.fromkeys(names, 1))
    assert response.status_code == 400
    assert "must list 1 to 5 instance types" in response.json()["errors"]["capacity"]


def test_capacity_must_still_cover_the_shares_limits(admin_api, aws_queue, unchanged):
    other = InstanceTypeFactory(name="ml.p4d.24xlarge", gpu_count=8).name
    with unchanged():
        response = _set_capacity(admin_api, aws_queue, {other: 1})
    assert response.status_code == 400
    assert "shares[0].capacity_limits.ml.g5.xlarge" in response.json()["errors"]


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"reason": ""}, "reason", "say why this change is made"),
        ({"version": None}, "version", "This field may not be null."),
        ({"capacity": {XL: "three"}}, f"capacity.{XL}", "A valid integer is required."),
    ],
)
def test_capacity_input_errors(admin_api, aws_queue, unchanged, changes, field, message):
    body = {"capacity": {XL: 2}, "reason": "r", "version": 1, **changes}
    with unchanged():
        response = admin_api.patch(f"/api/v1/queues/{aws_queue.pk}/", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][field] == [message]


def test_stale_version_is_a_conflict(admin_api, aws_queue):
    assert _set_capacity(admin_api, aws_queue, {XL: 4}).status_code == 200
    changes = PolicyChange.objects.count()
    response = _set_capacity(admin_api, aws_queue, {XL: 2}, version=1)
    assert response.status_code == 409
    body = response.json()
    assert (body["current_version"], body["submitted_version"]) == (2, 1)
    assert (body["current"], body["submitted"]) == ({"capacity": {XL: 4}}, {"capacity": {XL: 2}})
    assert PolicyChange.objects.count() == changes
    assert admin_api.get(f"/api/v1/queues/{aws_queue.pk}/").json()["capacity"] == {XL: 4}


def test_create_queue_with_capacity(admin_api, admin, db):
    InstanceTypeFactory()
    response = admin_api.post(
        "/api/v1/queues/",
        {"name": "research", "capacity": {XL: 2}, "reason": "new cluster"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["capacity"] == {XL: 2}
    change = PolicyChange.objects.get(queue__name="research")
    assert (change.actor, change.reason, change.after) == (
        admin,
        "new cluster",
        {"capacity": {XL: 2}},
    )


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            {"name": "research", "capacity": {}, "reason": "r"},
            "capacity",
            "must list 1 to 5 instance types",
        ),
        ({"name": "research", "capacity": {XL: 2}}, "reason", "say why this change is made"),
        (
            {"name": "aws-sample", "capacity": {XL: 2}, "reason": "r"},
            "name",
            "job queue with this name already exists.",
        ),
    ],
)
def test_create_queue_rejected(admin_api, aws_queue, unchanged, body, field, message):
    with unchanged():
        response = admin_api.post("/api/v1/queues/", body, format="json")
    assert response.status_code == 400
    assert message in response.json()["errors"][field]
    assert not JobQueue.objects.filter(name="research").exists()
