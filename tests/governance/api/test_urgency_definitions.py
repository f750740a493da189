"""Urgency definitions through the API, validated and recorded by urgency_save."""

import pytest

from fleet.models import UrgencyDefinition
from governance.models import PolicyChange
from tests.factories import TeamFactory, UrgencyDefinitionFactory

VALID = {
    "name": "outage",
    "meaning": "Production inference is down and a retrain fixes it.",
    "examples": "model rollback",
    "priority": 900,
    "max_window_hours": 6,
    "allowed_kinds": ["PRIORITY_RAISE"],
    "reason": "incident playbook",
}


def test_create_with_invokers_records_history(admin_api, admin, db):
    TeamFactory(name="search")
    response = admin_api.post(
        "/api/v1/urgency-definitions/", {**VALID, "invokers": ["search"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["invokers"], body["version"]) == ("outage", ["search"], 1)
    change = PolicyChange.objects.get(urgency_id=body["id"])
    assert (change.actor, change.reason, change.before) == (admin, "incident playbook", None)


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"name": ""}, "name", "give the urgency a name"),
        ({"name": "taken"}, "name", "an urgency definition named 'taken' already exists"),
        ({"meaning": " "}, "meaning", "say what this urgency means"),
        ({"priority": 10000}, "priority", "must be a whole number from 0 to 9999"),
        ({"priority": -1}, "priority", "must be a whole number from 0 to 9999"),
        (
            {"max_window_hours": 0},
            "max_window_hours",
            "must be a whole number of hours, at least 1",
        ),
        (
            {"allowed_kinds": ["PRIORITY_RAISE", "VIP"]},
            "allowed_kinds[1]",
            "unknown kind 'VIP'; choose from "
            "PREEMPTION_PROTECTION, PRIORITY_RAISE, TEMPORARY_CAPACITY",
        ),
        ({"invokers": ["ghosts"]}, "invokers", "unknown team 'ghosts'"),
        ({"reason": ""}, "reason", "say why this change is made"),
    ],
)
def test_create_rule(admin_api, unchanged, changes, field, message):
    UrgencyDefinitionFactory(name="taken")
    with unchanged():
        response = admin_api.post(
            "/api/v1/urgency-definitions/", {**VALID, **changes}, format="json"
        )
    assert response.status_code == 400
    assert response.json()["errors"][field] == [message]


def test_missing_fields_get_the_service_messages(admin_api, unchanged, db):
    with unchanged():
        response = admin_api.post("/api/v1/urgency-definitions/", {"reason": "r"}, format="json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"name", "meaning", "priority", "max_window_hours"}


def test_patch_keeps_the_other_fields(admin_api, db):
    urgency = UrgencyDefinitionFactory(name="deadline", priority=500)
    urgency.invokers.set([TeamFactory(name="search")])
    response = admin_api.patch(
        f"/api/v1/urgency-definitions/{urgency.pk}/",
        {"max_window_hours": 72, "reason": "longer conferences", "version": 1},
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["priority"], body["max_window_hours"], body["invokers"]) == (500, 72, ["search"])
    assert body["version"] == 2
    change = PolicyChange.objects.get(urgency=urgency)
    assert change.before["max_window_hours"] == 48 and change.after["max_window_hours"] == 72


def test_put_replaces_everything(admin_api, db):
    urgency = UrgencyDefinitionFactory(name="deadline")
    urgency.invokers.set([TeamFactory(name="search")])
    response = admin_api.put(
        f"/api/v1/urgency-definitions/{urgency.pk}/", {**VALID, "version": 1}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert (response.json()["name"], response.json()["invokers"]) == ("outage", [])


def test_stale_version_is_a_conflict(admin_api, db):
    urgency = UrgencyDefinitionFactory(name="deadline", priority=500)
    url = f"/api/v1/urgency-definitions/{urgency.pk}/"
    assert (
        admin_api.patch(
            url, {"priority": 600, "reason": "a", "version": 1}, format="json"
        ).status_code
        == 200
    )
    response = admin_api.patch(url, {"priority": 700, "reason": "b", "version": 1}, format="json")
    assert response.status_code == 409
    body = response.json()
    assert (body["current_version"], body["submitted_version"]) == (2, 1)
    assert (body["current"]["priority"], body["submitted"]["priority"]) == (600, 700)
    assert UrgencyDefinition.objects.get().priority == 600
