"""The policy-as-code API: export a queue, plan and apply a file."""

import json

import pytest
import yaml
from rest_framework.test import APIClient

from fleet.models import QuotaShare
from governance.models import PolicyChange
from governance.policy_code import policy_export

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("format", "media_type"),
    [
        ("aws-batch", "application/json"),
        ("cloudformation", "application/json"),
        ("kueue", "application/yaml"),
        ("native", "application/yaml"),
    ],
)
def test_export_answers_the_file_itself(team_lead, varied_queue, format, media_type):
    response = client_for(team_lead).get(
        f"/api/v1/queues/{varied_queue.pk}/export/", {"format": format}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == f"{media_type}; charset=utf-8"
    export = policy_export(format=format, queue=varied_queue)
    assert response.content.decode() == export.content
    assert response["Content-Disposition"] == f'attachment; filename="{export.filename}"'
    assert json.loads(response["X-Policy-Warnings"]) == list(export.warnings)


def test_export_refuses_an_unknown_format_and_strangers(outsider, team_lead, varied_queue):
    url = f"/api/v1/queues/{varied_queue.pk}/export/"
    response = client_for(team_lead).get(url, {"format": "terraform"})
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "format": ["must be one of aws-batch, cloudformation, kueue, native"]
    }
    assert client_for(outsider).get(url, {"format": "native"}).status_code == 403
    assert APIClient().get(url, {"format": "native"}).status_code == 401
    assert (
        client_for(team_lead).get("/api/v1/queues/999999/export/?format=native").status_code == 404
    )


def edited_native(queue) -> str:
    data = yaml.safe_load(policy_export(format="native", queue=queue).content)
    data["queues"][0]["shares"][1]["borrow_limit"] = 40
    return yaml.safe_dump(data, sort_keys=False)


def test_plan_then_apply_with_the_plans_versions(admin, varied_queue):
    api = client_for(admin)
    body = {"content": edited_native(varied_queue), "filename": "nlp.yaml"}
    planned = api.post("/api/v1/policy/plan/", body, format="json")
    assert planned.status_code == 200, planned.json()
    plan = planned.json()
    assert plan["change_count"] == 1
    (queue,) = plan["queues"]
    assert queue["changes"] == [
        {
            "target": "share",
            "action": "changed",
            "name": "nlp",
            "queue": "research fleet",
            "fields": [{"field": "borrow_limit", "before": 0, "after": 40}],
        }
    ]
    assert PolicyChange.objects.filter(share__name="nlp").count() == 1

    applied = api.post(
        "/api/v1/policy/apply/",
        {**body, "reason": "More borrowing", "versions": plan["versions"]},
        format="json",
    )
    assert applied.status_code == 200, applied.json()
    (change_id,) = applied.json()["changes"]
    change = PolicyChange.objects.get(pk=change_id)
    assert change.reason == "More borrowing (applied from policy file nlp.yaml)"
    assert QuotaShare.objects.get(name="nlp").borrow_limit == 40

    again = api.post(
        "/api/v1/policy/apply/",
        {**body, "reason": "Again", "versions": plan["versions"]},
        format="json",
    )
    assert again.status_code == 409
    assert "share 'research fleet/nlp' changed" in again.json()["detail"]


def test_a_bad_file_is_a_400_naming_line_and_field(admin, varied_queue):
    content = policy_export(format="native", queue=varied_queue).content
    bad = content.replace("borrow_limit: 150", "borrow_limit: -7")
    count = PolicyChange.objects.count()
    response = client_for(admin).post(
        "/api/v1/policy/apply/",
        {"content": bad, "format": "native", "reason": "Tighten"},
        format="json",
    )
    assert response.status_code == 400
    line = bad.splitlines().index("    borrow_limit: -7") + 1
    assert response.json()["errors"] == {
        "queues[0].shares[5].borrow_limit": [f"line {line}: must be at least -1"]
    }
    assert PolicyChange.objects.count() == count


def test_plan_and_apply_are_for_admins(team_lead, varied_queue):
    body = {"content": edited_native(varied_queue)}
    api = client_for(team_lead)
    assert api.post("/api/v1/policy/plan/", body, format="json").status_code == 403
    assert api.post("/api/v1/policy/apply/", body, format="json").status_code == 403


def test_a_one_queue_file_can_target_another_queue(admin, varied_queue):
    body = json.loads(policy_export(format="aws-batch", queue=varied_queue).content)
    body["jobQueue"] = "somewhere-in-aws"
    response = client_for(admin).post(
        "/api/v1/policy/plan/",
        {"content": json.dumps(body), "queue": varied_queue.pk},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["change_count"] == 0
    missing = client_for(admin).post(
        "/api/v1/policy/plan/", {"content": json.dumps(body), "queue": 999999}, format="json"
    )
    assert missing.status_code == 400
    assert missing.json()["errors"] == {"queue": ["no queue with id 999999"]}


def test_the_endpoints_are_in_the_openapi_schema(admin):
    schema = client_for(admin).get("/api/schema/?format=json")
    paths = yaml.safe_load(schema.content)["paths"]
    assert {"/api/v1/queues/{id}/export/", "/api/v1/policy/plan/", "/api/v1/policy/apply/"} <= set(
        paths
    )
