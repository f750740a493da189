"""Policy history through the API: every write is recorded, and a revert is a new change."""

import pytest

from governance.models import PolicyChange
from tests.factories import UrgencyDefinitionFactory

XL = "ml.g5.xlarge"


def _patch_share(client, share, version, **changes):
    body = {"reason": changes.pop("reason", "tuning"), "version": version, **changes}
    response = client.patch(f"/api/v1/shares/{share.pk}/", body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_update_writes_a_change_with_actor_reason_and_diff(admin_api, aws_queue):
    share = aws_queue.shares.get(name="qs2")
    _patch_share(admin_api, share, 1, capacity_limits={XL: 2}, reason="qs2 grows")

    listing = admin_api.get("/api/v1/policy-changes/", {"share": share.pk}).json()

    assert listing["count"] == 1
    change = listing["results"][0]
    assert (change["actor"], change["reason"], change["cause"]) == (
        "admin-user",
        "qs2 grows",
        "edit",
    )
    assert (change["target"], change["queue"], change["share"]) == ("share", aws_queue.pk, share.pk)
    assert change["before"]["capacity_limits"] == {XL: 1}
    assert change["after"]["capacity_limits"] == {XL: 2}
    assert change["changes"] == [{"field": "capacity_limits", "before": {XL: 1}, "after": {XL: 2}}]
    assert admin_api.get(f"/api/v1/policy-changes/{change['id']}/").json() == change


def test_revert_restores_only_the_fields_it_changed(admin_api, aws_queue):
    share = aws_queue.shares.get(name="qs2")
    _patch_share(admin_api, share, 1, capacity_limits={XL: 2}, reason="qs2 grows")
    first = PolicyChange.objects.get(share=share)
    _patch_share(admin_api, share, 2, in_share_preemption=True, reason="priorities inside qs2")

    response = admin_api.post(
        f"/api/v1/policy-changes/{first.pk}/revert/", {"reason": "grew too early"}, format="json"
    )

    assert response.status_code == 201, response.json()
    revert = response.json()
    assert (revert["cause"], revert["reverts"], revert["reason"]) == (
        "revert",
        first.pk,
        "grew too early",
    )
    assert revert["changes"] == [{"field": "capacity_limits", "before": {XL: 2}, "after": {XL: 1}}]
    current = admin_api.get(f"/api/v1/shares/{share.pk}/").json()
    assert (current["capacity_limits"], current["in_share_preemption"]) == ({XL: 1}, True)
    assert PolicyChange.objects.filter(share=share).count() == 3
    assert PolicyChange.objects.filter(pk=first.pk, reverts=None).exists()


def test_revert_needs_a_reason(admin_api, aws_queue, unchanged):
    share = aws_queue.shares.get(name="qs2")
    _patch_share(admin_api, share, 1, capacity_limits={XL: 2})
    change = PolicyChange.objects.get(share=share)
    with unchanged():
        response = admin_api.post(f"/api/v1/policy-changes/{change.pk}/revert/", {}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "reason: say why this change is made",
        "errors": {"reason": ["say why this change is made"]},
    }


def test_revert_a_capacity_change(admin_api, aws_queue):
    response = admin_api.patch(
        f"/api/v1/queues/{aws_queue.pk}/",
        {"capacity": {XL: 6}, "reason": "new racks", "version": 1},
        format="json",
    )
    assert response.status_code == 200
    change = PolicyChange.objects.get(target="queue")
    response = admin_api.post(
        f"/api/v1/policy-changes/{change.pk}/revert/", {"reason": "racks failed"}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert admin_api.get(f"/api/v1/queues/{aws_queue.pk}/").json()["capacity"] == {XL: 3}


def test_revert_an_urgency_change(admin_api, db):
    urgency = UrgencyDefinitionFactory(name="deadline", priority=500)
    response = admin_api.patch(
        f"/api/v1/urgency-definitions/{urgency.pk}/",
        {"priority": 800, "reason": "conference week", "version": 1},
        format="json",
    )
    assert response.status_code == 200, response.json()
    change = PolicyChange.objects.get(urgency=urgency)
    assert change.before["priority"] == 500
    response = admin_api.post(
        f"/api/v1/policy-changes/{change.pk}/revert/", {"reason": "week over"}, format="json"
    )
    assert response.status_code == 201, response.json()
    urgency.refresh_from_db()
    assert urgency.priority == 500


@pytest.fixture
def history(admin, exception_owner, aws_queue, admin_api):
    """Three changes: two edits of different shares by the admin, and one revert."""
    qs1, qs2 = aws_queue.shares.get(name="qs1"), aws_queue.shares.get(name="qs2")
    _patch_share(admin_api, qs1, 1, borrow_limit=100)
    _patch_share(admin_api, qs2, 1, capacity_limits={XL: 2})
    edit = PolicyChange.objects.get(share=qs2)
    admin_api.post(f"/api/v1/policy-changes/{edit.pk}/revert/", {"reason": "undo"}, format="json")
    return {"qs1": qs1, "qs2": qs2}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, 3),
        ({"share": "qs1"}, 1),
        ({"share": "qs2"}, 2),
        ({"queue": "aws"}, 3),
        ({"cause": "revert"}, 1),
        ({"cause": "edit"}, 2),
        ({"actor": "admin-user"}, 3),
        ({"actor": "owner-user"}, 0),
        ({"target": "queue"}, 0),
    ],
)
def test_filters(admin_api, aws_queue, history, params, expected):
    ids = {"qs1": history["qs1"].pk, "qs2": history["qs2"].pk, "aws": aws_queue.pk}
    # Shares' changes unless a test names a target: the fixtures' role grants are history.
    params = {"target": "share", **{key: ids.get(value, value) for key, value in params.items()}}
    response = admin_api.get("/api/v1/policy-changes/", params)
    assert response.status_code == 200
    assert response.json()["count"] == expected


def test_newest_first(admin_api, history):
    listed = admin_api.get("/api/v1/policy-changes/", {"target": "share"}).json()["results"]
    causes = [c["cause"] for c in listed]
    assert causes == ["revert", "edit", "edit"]


def test_history_is_read_only(admin_api, history):
    change = PolicyChange.objects.first()
    assert admin_api.delete(f"/api/v1/policy-changes/{change.pk}/").status_code == 405
    assert admin_api.patch(f"/api/v1/policy-changes/{change.pk}/", {}).status_code == 405
    assert admin_api.post("/api/v1/policy-changes/", {}).status_code == 405
