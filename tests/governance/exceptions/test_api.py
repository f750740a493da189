"""The exception API: same rules and messages as the pages, one error shape."""

from datetime import timedelta

import pytest

from governance.models import ExceptionRequest

pytestmark = pytest.mark.django_db
URL = "/api/v1/exception-requests/"


def body(scene, **overrides):
    data = {
        "kind": "TEMPORARY_CAPACITY",
        "team": "team-qs1",
        "urgency": scene.urgency.pk,
        "justification": "Launch",
        "window_start": (scene.now + timedelta(hours=1)).isoformat(),
        "window_end": (scene.now + timedelta(hours=5)).isoformat(),
        "share": scene.qs1.pk,
        "instance_type": "ml.g5.xlarge",
        "extra_instances": 1,
    }
    data.update(overrides)
    return data


def test_the_lifecycle_through_the_api(scene, api_as):
    lead, owner = api_as(scene.lead), api_as(scene.owner)
    created = lead.post(URL, body(scene), format="json")
    assert created.status_code == 201
    pk = created.json()["id"]
    assert created.json()["state"] == "DRAFT"

    assert lead.post(f"{URL}{pk}/submit/").json()["state"] == "SUBMITTED"
    listed = owner.get(URL, {"state": "SUBMITTED"}).json()
    assert [row["id"] for row in listed["results"]] == [pk]

    approved = owner.post(f"{URL}{pk}/approve/", {"note": "ok"}, format="json")
    assert approved.status_code == 200
    data = approved.json()
    assert data["state"] == "APPROVED" and data["decided_by"] == "owner-user"
    assert [event["type"] for event in data["events"]] == ["FILED", "SUBMITTED", "APPROVED"]

    revoked = owner.post(f"{URL}{pk}/revoke/", {"reason": "not needed"}, format="json")
    assert revoked.json()["state"] == "REVOKED"


def test_a_refused_transition_is_a_400_with_the_state_named(scene, api_as):
    pk = api_as(scene.lead).post(URL, body(scene), format="json").json()["id"]
    response = api_as(scene.owner).post(f"{URL}{pk}/approve/", {}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "state": ["this request is draft, so it cannot be approved; only a submitted request can"]
    }


def test_self_decision_is_a_403_with_the_reason(scene, api_as, admin):
    api = api_as(admin)
    pk = api.post(URL, body(scene, submit=True), format="json").json()["id"]
    response = api.post(f"{URL}{pk}/approve/", {}, format="json")
    assert response.status_code == 403
    assert response.json() == {
        "detail": "you filed this request: another exception owner must decide it",
        "errors": {},
    }


def test_a_lead_cannot_file_for_another_team(scene, api_as):
    response = api_as(scene.lead).post(
        URL, body(scene, team="team-qs2", share=scene.qs2.pk), format="json"
    )
    assert response.status_code == 400
    assert "you do not lead team-qs2" in response.json()["errors"]["team"][0]
    assert not ExceptionRequest.objects.exists()


def test_parsing_errors_use_the_same_shape(scene, api_as):
    response = api_as(scene.lead).post(URL, body(scene, team="nobody"), format="json")
    assert response.json() == {
        "detail": "team: unknown team 'nobody'",
        "errors": {"team": ["unknown team 'nobody'"]},
    }


def test_leadership_and_outsiders_cannot_file(scene, api_as, leadership, outsider):
    for user in (leadership, outsider):
        assert api_as(user).post(URL, body(scene), format="json").status_code == 403


def test_jobs_requests_name_jobs_by_id(scene, api_as):
    response = api_as(scene.lead).post(
        URL,
        body(
            scene,
            kind="PRIORITY_RAISE",
            share=None,
            instance_type=None,
            extra_instances=None,
            jobs=[scene.running.pk],
        ),
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["jobs"] == [{"id": scene.running.pk, "name": "vision-train"}]
