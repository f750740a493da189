"""Quota shares through the API: read, create, update, disable, and every policy rule.

The messages are the service's (the same the share editor shows); each
rejected write leaves the policy and its history untouched.
"""

import pytest

from fleet.models import QuotaShare
from governance.models import PolicyChange
from tests.factories import (
    CapacityLimitFactory,
    InstanceTypeFactory,
    QuotaShareFactory,
    TeamFactory,
)

XL = "ml.g5.xlarge"


def _share(queue, name):
    return queue.shares.get(name=name)


def _new_share(queue, **changes):
    body = {
        "queue": queue.pk,
        "name": "qs4",
        "team": "team-qs1",
        "strategy": "LEND",
        "capacity_limits": {XL: 1},
        "reason": "new team joins the queue",
    }
    body.update(changes)
    return {key: value for key, value in body.items() if value is not OMIT}


OMIT = object()


def test_list_filters_by_queue(admin_api, aws_queue):
    other = QuotaShareFactory(name="elsewhere")
    response = admin_api.get("/api/v1/shares/", {"queue": aws_queue.pk})
    assert response.status_code == 200
    assert [s["name"] for s in response.json()["results"]] == ["qs1", "qs2", "qs3"]
    everything = admin_api.get("/api/v1/shares/").json()["results"]
    assert other.name in {s["name"] for s in everything}
    bad = admin_api.get("/api/v1/shares/", {"queue": "aws"})
    assert bad.status_code == 400
    assert bad.json()["errors"] == {"queue": ["must be a whole number (an id)"]}


def test_detail_nests_capacity_limits(admin_api, aws_queue):
    share = _share(aws_queue, "qs1")
    body = admin_api.get(f"/api/v1/shares/{share.pk}/").json()
    assert body == {
        "id": share.pk,
        "queue": aws_queue.pk,
        "queue_name": "aws-sample",
        "name": "qs1",
        "team": "team-qs1",
        "strategy": "LEND_AND_BORROW",
        "borrow_limit": 200,
        "borrow_unlimited": False,
        "in_share_preemption": True,
        "priority_ceiling": 100,
        "default_workload_class": None,
        "state": "ENABLED",
        "position": 0,
        "capacity_limits": {XL: 1},
        "version": 1,
        "created_at": body["created_at"],
        "updated_at": body["updated_at"],
    }


def test_create_records_history(admin_api, admin, aws_queue):
    response = admin_api.post("/api/v1/shares/", _new_share(aws_queue), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["team"], body["capacity_limits"]) == ("qs4", "team-qs1", {XL: 1})
    change = PolicyChange.objects.get(share_id=body["id"])
    assert (change.actor, change.reason, change.before) == (admin, "new team joins the queue", None)
    assert change.after["capacity_limits"] == {XL: 1}


def test_patch_changes_only_what_is_sent(admin_api, aws_queue):
    share = _share(aws_queue, "qs1")
    response = admin_api.patch(
        f"/api/v1/shares/{share.pk}/",
        {"capacity_limits": {XL: 2}, "reason": "bigger team", "version": 1},
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["capacity_limits"] == {XL: 2}
    assert (body["strategy"], body["borrow_limit"], body["version"]) == ("LEND_AND_BORROW", 200, 2)


def test_put_replaces_the_share_and_disables_it(admin_api, aws_queue):
    share = _share(aws_queue, "qs2")
    response = admin_api.put(
        f"/api/v1/shares/{share.pk}/",
        {
            "name": "qs2",
            "team": "team-qs2",
            "strategy": "RESERVE",
            "capacity_limits": {XL: 1},
            "state": "DISABLED",
            "reason": "team paused",
            "version": 1,
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    share.refresh_from_db()
    assert (share.strategy, share.state, share.version) == ("RESERVE", "DISABLED", 2)


def test_borrow_limit_minus_one_and_zero_are_allowed(admin_api, aws_queue):
    share = _share(aws_queue, "qs1")
    for version, value in enumerate([-1, 0], start=1):
        response = admin_api.patch(
            f"/api/v1/shares/{share.pk}/",
            {"borrow_limit": value, "reason": "tune", "version": version},
            format="json",
        )
        assert response.status_code == 200, response.json()
        assert response.json()["borrow_limit"] == value


# Every rule, on update of qs2 (a LEND share with one limit of ml.g5.xlarge).
UPDATE_RULES = [
    pytest.param(
        {"capacity_limits": {}},
        "capacity_limits",
        "must list 1 to 5 instance types",
        id="no-limits",
    ),
    pytest.param(
        {"capacity_limits": {XL: 0}}, f"capacity_limits.{XL}", "must be at least 1", id="limit-0"
    ),
    pytest.param(
        {"capacity_limits": {"ml.p4d.24xlarge": 1}},
        "capacity_limits.ml.p4d.24xlarge",
        "instance type 'ml.p4d.24xlarge' is not in the queue",
        id="type-not-in-queue",
    ),
    pytest.param(
        {"capacity_limits": {"no.such.type": 1}},
        "capacity_limits.no.such.type",
        "instance type 'no.such.type' is not in the queue",
        id="unknown-type",
    ),
    pytest.param(
        {"strategy": "SHARE"}, "strategy", "must be RESERVE, LEND or LEND_AND_BORROW", id="strategy"
    ),
    pytest.param(
        {"borrow_limit": 50},
        "borrow_limit",
        "only allowed with LEND_AND_BORROW",
        id="borrow-not-lab",
    ),
    pytest.param(
        {"strategy": "LEND_AND_BORROW", "borrow_limit": -2},
        "borrow_limit",
        "must be -1 (unlimited) or a percent of at least 0",
        id="borrow-below-minus-one",
    ),
    pytest.param({"state": "PAUSED"}, "state", "must be ENABLED or DISABLED", id="state"),
    pytest.param({"name": "qs1"}, "name", "duplicate share name 'qs1'", id="duplicate-name"),
    pytest.param({"name": " "}, "name", "give the share a name", id="blank-name"),
    pytest.param({"team": None}, "team", "choose the team that owns this share", id="no-team"),
    pytest.param({"team": "nobody"}, "team", "unknown team 'nobody'", id="unknown-team"),
    pytest.param({"reason": ""}, "reason", "say why this change is made", id="no-reason"),
    pytest.param({"reason": OMIT}, "reason", "say why this change is made", id="reason-missing"),
    pytest.param({"version": OMIT}, "version", "This field is required.", id="version-missing"),
]


@pytest.mark.parametrize(("changes", "field", "message"), UPDATE_RULES)
def test_update_rule(admin_api, aws_queue, unchanged, changes, field, message):
    InstanceTypeFactory(name="ml.p4d.24xlarge", gpu_count=8)
    share = _share(aws_queue, "qs2")
    body = {"reason": "try", "version": 1, **changes}
    body = {key: value for key, value in body.items() if value is not OMIT}
    with unchanged():
        response = admin_api.patch(f"/api/v1/shares/{share.pk}/", body, format="json")
    assert response.status_code == 400
    assert message in response.json()["errors"][field]
    assert response.json()["detail"].startswith(f"{field}: ")


def test_update_rule_more_than_five_limits(admin_api, aws_queue, unchanged):
    types = [XL] + [InstanceTypeFactory(name=f"ml.g5.{n}xlarge").name for n in (2, 4, 8, 12, 16)]
    admin_api.patch(
        f"/api/v1/queues/{aws_queue.pk}/",
        {"capacity": dict.fromkeys(types[:5], 3), "reason": "grow", "version": 1},
        format="json",
    )
    share = _share(aws_queue, "qs2")
    with unchanged():
        response = admin_api.patch(
            f"/api/v1/shares/{share.pk}/",
            {"capacity_limits": dict.fromkeys(types, 1), "reason": "try", "version": 1},
            format="json",
        )
    assert response.status_code == 400
    assert "must list 1 to 5 instance types" in response.json()["errors"]["capacity_limits"]


# The same rules on create, plus the ones only a new share can break.
CREATE_RULES = [
    pytest.param(
        {"capacity_limits": OMIT},
        "capacity_limits",
        "must list 1 to 5 instance types",
        id="no-limits",
    ),
    pytest.param(
        {"capacity_limits": {XL: 0}}, f"capacity_limits.{XL}", "must be at least 1", id="limit-0"
    ),
    pytest.param(
        {"capacity_limits": {"ml.p4d.24xlarge": 1}},
        "capacity_limits.ml.p4d.24xlarge",
        "instance type 'ml.p4d.24xlarge' is not in the queue",
        id="type-not-in-queue",
    ),
    pytest.param(
        {"strategy": "lend"}, "strategy", "must be RESERVE, LEND or LEND_AND_BORROW", id="strategy"
    ),
    pytest.param(
        {"borrow_limit": 0},
        "borrow_limit",
        "only allowed with LEND_AND_BORROW",
        id="borrow-not-lab",
    ),
    pytest.param(
        {"strategy": "LEND_AND_BORROW", "borrow_limit": -5},
        "borrow_limit",
        "must be -1 (unlimited) or a percent of at least 0",
        id="borrow-below-minus-one",
    ),
    pytest.param({"name": "qs3"}, "name", "duplicate share name 'qs3'", id="duplicate-name"),
    pytest.param({"name": OMIT}, "name", "give the share a name", id="no-name"),
    pytest.param({"team": OMIT}, "team", "choose the team that owns this share", id="no-team"),
    pytest.param({"team": "nobody"}, "team", "unknown team 'nobody'", id="unknown-team"),
    pytest.param({"reason": "  "}, "reason", "say why this change is made", id="blank-reason"),
    pytest.param(
        {"borrow_limit": "lots"}, "borrow_limit", "A valid integer is required.", id="not-a-number"
    ),
]


@pytest.mark.parametrize(("changes", "field", "message"), CREATE_RULES)
def test_create_rule(admin_api, aws_queue, unchanged, changes, field, message):
    InstanceTypeFactory(name="ml.p4d.24xlarge", gpu_count=8)
    with unchanged():
        response = admin_api.post(
            "/api/v1/shares/", _new_share(aws_queue, **changes), format="json"
        )
    assert response.status_code == 400
    assert message in response.json()["errors"][field]


def test_at_most_20_shares_per_queue(admin_api, aws_queue, unchanged):
    xl = InstanceTypeFactory()
    for n in range(4, 21):
        share = QuotaShareFactory(queue=aws_queue, name=f"qs{n}", team=TeamFactory(), position=n)
        CapacityLimitFactory(share=share, instance_type=xl)
    assert aws_queue.shares.count() == 20
    with unchanged():
        response = admin_api.post(
            "/api/v1/shares/", _new_share(aws_queue, name="qs21"), format="json"
        )
    assert response.status_code == 400
    assert response.json()["errors"] == {"non_field_errors": ["at most 20 shares per queue"]}


def test_two_updates_from_the_same_version_conflict(admin_api, aws_queue):
    share = _share(aws_queue, "qs2")
    first = admin_api.patch(
        f"/api/v1/shares/{share.pk}/",
        {"capacity_limits": {XL: 2}, "reason": "first editor", "version": 1},
        format="json",
    )
    assert first.status_code == 200
    changes = PolicyChange.objects.count()

    second = admin_api.patch(
        f"/api/v1/shares/{share.pk}/",
        {"strategy": "RESERVE", "reason": "second editor", "version": 1},
        format="json",
    )

    assert second.status_code == 409
    body = second.json()
    assert list(body["errors"]) == ["version"]
    assert (body["current_version"], body["submitted_version"]) == (2, 1)
    assert body["current"]["capacity_limits"] == {XL: 2}
    assert body["current"]["strategy"] == "LEND"
    assert body["submitted"]["strategy"] == "RESERVE"
    share.refresh_from_db()
    assert (share.strategy, share.version) == ("LEND", 2)
    assert PolicyChange.objects.count() == changes


def test_unknown_share_is_404_in_the_error_shape(admin_api, db):
    response = admin_api.get("/api/v1/shares/999/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found.", "errors": {}}


def test_list_filters_by_state(admin_api, aws_queue):
    share = _share(aws_queue, "qs3")
    share.state = QuotaShare.State.DISABLED
    share.save()
    names = [
        s["name"] for s in admin_api.get("/api/v1/shares/", {"state": "DISABLED"}).json()["results"]
    ]
    assert names == ["qs3"]
