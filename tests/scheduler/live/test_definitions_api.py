"""The job definitions API (/api/v1/job-definitions/): who reads and who writes, the one
error shape, revisions with a stale-revision conflict, retirement, and the schema."""

import pytest
from rest_framework.test import APIClient

from fleet.models import Job, JobDefinition
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/job-definitions/"


@pytest.fixture
def api_for():
    def login(user):
        client = APIClient()
        client.force_login(user)
        return client

    return login


def definition_body(**fields):
    return {
        "name": "train",
        "queues": ["aws-sample"],
        "command": ["python", "-m", "train", "--steps", "{steps}", "--data", "{dataset}"],
        "parameters": [
            {"name": "steps", "type": "integer", "min": 1, "max": 1000, "default": 10},
            {"name": "dataset", "type": "pattern", "pattern": "[a-z0-9_]+"},
        ],
        "environment": {"HF_TOKEN": "hf_example_value"},
        "instance_type": "ml.g5.xlarge",
        "expected_duration": 600,
        "checkpoint_interval": 60,
        "wall_clock_limit": 3600,
        "reason": "the team's training entry point",
        **fields,
    }


@pytest.fixture
def registered(api_for, admin, queue):
    response = api_for(admin).post(URL, definition_body(), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_an_admin_registers_a_definition(registered, admin):
    assert registered["name"] == "train" and registered["state"] == "active"
    assert registered["queues"] == ["aws-sample"] and registered["created_by"] == admin.username
    latest = registered["latest"]
    assert latest["revision"] == 1 and latest["reason"] == "the team's training entry point"
    assert latest["command"][4] == "{steps}" and latest["environment"] == {
        "HF_TOKEN": "hf_example_value"
    }
    assert latest["parameters"][0] == {
        "name": "steps",
        "type": "integer",
        "default": 10,
        "min": 1,
        "max": 1000,
    }


def test_leads_who_may_submit_read_definitions_without_environment_values(
    api_for, lead, registered
):
    client = api_for(lead)
    listed = client.get(URL).json()
    one = client.get(f"{URL}{registered['id']}/").json()

    assert [row["name"] for row in listed["results"]] == ["train"]
    assert one["latest"]["environment"] == {"HF_TOKEN": None}
    assert client.post(URL, definition_body(name="mine"), format="json").status_code == 403
    assert (
        client.post(f"{URL}{registered['id']}/retire/", {"reason": "x"}, format="json").status_code
        == 403
    )


@pytest.mark.parametrize("role", ["exception_owner", "leadership", "outsider"])
def test_other_roles_may_not_read_definitions(request, api_for, registered, role):
    response = api_for(request.getfixturevalue(role)).get(URL)
    assert response.status_code == 403
    assert response.json()["errors"] == {}


def test_a_team_lead_who_leads_no_team_may_not_read_them(api_for, registered):
    assert api_for(UserFactory(roles=["team_leads"])).get(URL).status_code == 403


def test_anonymous_requests_get_401(queue):
    assert APIClient().get(URL).status_code == 401


def test_errors_name_the_field_in_the_one_shape(api_for, admin, queue):
    response = api_for(admin).post(
        URL,
        definition_body(
            name="Bad Name",
            queues=["aws-sample", "nowhere"],
            command=["{steps}", "--data", "{dataset}", "{seed}"],
            environment={"PATH": "/tmp", "LD_PRELOAD_OK": "x"},
            reason="",
        ),
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["errors"] == {"queues": ["no queue named nowhere"]}
    response = api_for(admin).post(
        URL,
        definition_body(
            name="Bad Name",
            command=["{steps}", "--data", "{dataset}", "{seed}"],
            environment={"PATH": "/tmp"},
            reason="",
        ),
        format="json",
    )
    errors = response.json()["errors"]
    assert set(errors) == {"name", "command[0]", "command[3]", "environment.PATH", "reason"}
    assert errors["command[3]"] == ["{seed} is not a declared parameter"]
    assert not JobDefinition.objects.exists()


def test_a_revision_keeps_what_it_does_not_change_and_refuses_a_stale_base(
    api_for, admin, registered
):
    client = api_for(admin)
    revisions = f"{URL}{registered['id']}/revisions/"

    revised = client.post(
        revisions,
        {"base_revision": 1, "wall_clock_limit": 7200, "reason": "longer epochs"},
        format="json",
    )
    stale = client.post(
        revisions, {"base_revision": 1, "instances": 2, "reason": "more"}, format="json"
    )
    unchanged = client.post(revisions, {"base_revision": 2, "reason": "same"}, format="json")
    history = client.get(revisions).json()

    assert revised.status_code == 201
    latest = revised.json()["latest"]
    assert latest["revision"] == 2 and latest["wall_clock_limit"] == 7200
    assert latest["command"] == registered["latest"]["command"]
    assert stale.status_code == 409
    assert stale.json()["current_revision"] == 2 and stale.json()["detail"].startswith(
        "base_revision: revision 2 was saved since you read revision 1"
    )
    assert unchanged.status_code == 400
    assert [row["revision"] for row in history] == [2, 1]
    assert [row["reason"] for row in history] == [
        "longer epochs",
        "the team's training entry point",
    ]


def test_retiring_refuses_new_jobs_but_keeps_submitted_ones(
    api_for, admin, lead, shares, registered
):
    client = api_for(lead)
    job = {
        "definition": "train",
        "share": shares["qs1"].pk,
        "name": "before",
        "parameters": {"dataset": "coco"},
    }
    before = client.post("/api/v1/jobs/", job, format="json")
    retired = api_for(admin).post(
        f"{URL}{registered['id']}/retire/", {"reason": "moved to train-v2"}, format="json"
    )
    after = client.post("/api/v1/jobs/", {**job, "name": "after"}, format="json")

    assert before.status_code == 201
    assert retired.status_code == 200 and retired.json()["state"] == "retired"
    assert retired.json()["retire_reason"] == "moved to train-v2"
    assert after.status_code == 400 and after.json()["detail"].startswith("definition: train")
    assert Job.objects.get().state == Job.State.RUNNABLE
    assert api_for(admin).get(URL, {"state": "retired"}).json()["count"] == 1
    assert api_for(admin).get(URL, {"state": "active"}).json()["count"] == 0


def test_the_schema_documents_bounds_and_enums(api_for, admin):
    schema = api_for(admin).get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths = schema["paths"]
    assert {
        "/api/v1/job-definitions/",
        "/api/v1/job-definitions/{id}/revisions/",
        "/api/v1/job-definitions/{id}/retire/",
    } <= set(paths)
    components = schema["components"]["schemas"]
    create = components["JobDefinitionCreateRequest"]["properties"]
    assert (create["stop_grace_seconds"]["minimum"], create["stop_grace_seconds"]["maximum"]) == (
        0,
        3600,
    )
    assert create["command"]["maxItems"] == 64
    parameter = components["ParameterRequest"]["properties"]
    enum = components[parameter["type"]["$ref"].rsplit("/", 1)[1]]["enum"]
    assert enum == ["integer", "choice", "pattern"]
    assert "409" in paths["/api/v1/job-definitions/{id}/revisions/"]["post"]["responses"]
    # The list's filters come from their FilterSet (scheduler.filters), bounds included.
    filters = {
        p["name"]: p["schema"] for p in paths["/api/v1/job-definitions/"]["get"]["parameters"]
    }
    assert filters["state"]["enum"] == ["active", "retired"]
    assert (filters["queue"]["minimum"], filters["queue"]["maximum"]) == (1, 2**63 - 1)
    jobs = {p["name"]: p["schema"] for p in paths["/api/v1/jobs/"]["get"]["parameters"]}
    assert {"queue", "share", "team", "state"} <= set(jobs)
    assert jobs["team"]["maximum"] == 2**63 - 1


def test_unknown_definition_and_parameter_fields_are_refused_by_name(api_for, admin, queue):
    dataset = {"name": "dataset", "type": "pattern", "pattern": "[a-z]+", "regex": ".*"}
    body = definition_body(run_as="root", parameters=[dataset])

    response = api_for(admin).post(URL, body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "run_as": ["not a field of a job definition"],
        "parameters[0].regex": ["not a field of a parameter"],
    }
    assert not JobDefinition.objects.exists()


def test_a_revision_refuses_a_new_name(api_for, admin, registered):
    response = api_for(admin).post(
        f"{URL}{registered['id']}/revisions/",
        {"base_revision": 1, "name": "renamed", "reason": "rename"},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "name": ["not a field of a revision (the name cannot change)"]
    }
