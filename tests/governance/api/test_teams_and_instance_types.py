"""Teams (members and leads by username; membership is policy, so a write needs a
reason: tests/governance/test_membership_policy.py) and instance types: plain records
admins edit."""

import pytest

from tests.factories import InstanceTypeFactory, TeamFactory, UserFactory


def test_create_team_with_members_and_leads(admin_api, db):
    UserFactory(username="ana")
    UserFactory(username="ben")
    response = admin_api.post(
        "/api/v1/teams/",
        {
            "name": "vision",
            "description": "CV models",
            "members": ["ana", "ben"],
            "leads": ["ana"],
            "reason": "The vision team starts this quarter",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["members"], body["leads"]) == ("vision", ["ana", "ben"], ["ana"])


def test_update_team_members(admin_api, db):
    team = TeamFactory(name="vision")
    UserFactory(username="ana")
    response = admin_api.patch(
        f"/api/v1/teams/{team.pk}/", {"members": ["ana"], "reason": "Ana joins"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert list(team.members.values_list("username", flat=True)) == ["ana"]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"name": "vision", "members": ["ghost"]}, "members", "unknown user 'ghost'"),
        ({"name": "vision", "leads": ["ghost"]}, "leads", "unknown user 'ghost'"),
        ({"name": "taken"}, "name", "team with this name already exists."),
        ({"name": ""}, "name", "This field may not be blank."),
    ],
)
def test_team_input_errors(admin_api, unchanged, body, field, message):
    TeamFactory(name="taken")
    with unchanged():
        response = admin_api.post("/api/v1/teams/", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][field] == [message]


def test_team_with_shares_cannot_be_deleted(admin_api, aws_queue, unchanged):
    team = aws_queue.shares.get(name="qs1").team
    with unchanged():
        response = admin_api.delete(
            f"/api/v1/teams/{team.pk}/", {"reason": "The team disbands"}, format="json"
        )
    assert response.status_code == 409
    assert response.json()["errors"]["non_field_errors"][0].startswith("still in use by aws-sample")


def test_instance_type_crud(admin_api, db):
    response = admin_api.post(
        "/api/v1/instance-types/",
        {"name": "ml.p4d.24xlarge", "gpu_count": 8, "gpu_model": "A100"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    pk = response.json()["id"]
    response = admin_api.patch(f"/api/v1/instance-types/{pk}/", {"gpu_model": "NVIDIA A100"})
    assert response.json() == {
        "id": pk,
        "name": "ml.p4d.24xlarge",
        "gpu_count": 8,
        "gpu_model": "NVIDIA A100",
        "binding": {"slurm": {"slurm_resources": []}},
        "slurm_resources": [],
        # Set by its own policy write (POST .../price/), never by this editor.
        "price_per_hour": None,
        "currency": "USD",
    }
    assert admin_api.delete(f"/api/v1/instance-types/{pk}/").status_code == 204


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            {"name": "ml.g5.xlarge", "gpu_count": 1},
            "name",
            "instance type with this name already exists.",
        ),
        (
            {"name": "ml.x", "gpu_count": 0},
            "gpu_count",
            "Ensure this value is greater than or equal to 1.",
        ),
    ],
)
def test_instance_type_input_errors(admin_api, unchanged, body, field, message):
    InstanceTypeFactory()
    with unchanged():
        response = admin_api.post("/api/v1/instance-types/", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][field] == [message]


def test_instance_type_in_use_cannot_be_deleted(admin_api, aws_queue, unchanged):
    itype = InstanceTypeFactory()
    with unchanged():
        response = admin_api.delete(f"/api/v1/instance-types/{itype.pk}/")
    assert response.status_code == 409
