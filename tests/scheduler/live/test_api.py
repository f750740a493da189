"""The jobs API: submission (one and bulk), reads, priority and termination."""

import pytest
from rest_framework.test import APIClient

from scheduler.models import Job, JobEvent
from tests.factories import JobFactory, QuotaShareFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def api_for():
    def login(user):
        client = APIClient()
        client.force_login(user)
        return client

    return login


def job_body(share, **fields):
    return {
        "share": share.pk,
        "name": "bert",
        "instance_type": "ml.g5.xlarge",
        "expected_duration": 3600,
        **fields,
    }


def test_submit_one_job(api_for, lead, shares):
    response = api_for(lead).post(
        "/api/v1/jobs/", job_body(shares["qs1"], priority=4, checkpoint_interval=600), format="json"
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "RUNNABLE" and body["priority"] == 4 and body["team"] == "team-qs1"
    assert JobEvent.objects.filter(job_id=body["id"], type="SUBMITTED").count() == 1


def test_submission_errors_have_the_one_error_shape(api_for, lead, shares):
    response = api_for(lead).post(
        "/api/v1/jobs/", job_body(shares["qs1"], instances=0, priority=10_000), format="json"
    )

    assert response.status_code == 400
    body = response.json()
    assert set(body["errors"]) == {"instances", "priority"}
    assert body["detail"].startswith("instances: ")
    assert not Job.objects.exists()


def test_a_lead_may_not_submit_into_another_teams_share(api_for, lead, shares):
    response = api_for(lead).post("/api/v1/jobs/", job_body(shares["qs3"]), format="json")
    assert response.status_code == 403
    assert not Job.objects.exists()


@pytest.mark.parametrize("role", ["exception_owner", "leadership", "outsider"])
def test_other_roles_may_not_use_the_jobs_api(request, api_for, shares, role):
    client = api_for(request.getfixturevalue(role))
    assert client.get("/api/v1/jobs/").status_code == 403
    assert client.post("/api/v1/jobs/", job_body(shares["qs1"]), format="json").status_code == 403


def test_anonymous_requests_get_401(shares):
    assert APIClient().get("/api/v1/jobs/").status_code == 401


def test_bulk_submission_is_all_or_none(api_for, admin, shares):
    client = api_for(admin)
    good = [job_body(shares["qs1"], name=f"sweep-{n}") for n in range(50)]

    response = client.post("/api/v1/jobs/bulk/", {"jobs": good}, format="json")
    assert response.status_code == 201
    assert response.json()["count"] == 50
    assert Job.objects.count() == 50

    bad = [*good[:3], job_body(shares["qs1"], name="", expected_duration=0)]
    response = client.post("/api/v1/jobs/bulk/", {"jobs": bad}, format="json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"jobs[3].name", "jobs[3].expected_duration"}
    assert Job.objects.count() == 50


def test_bulk_submission_reads_do_not_grow_with_the_jobs(api_for, admin, shares):
    """Shares, types and urgencies are looked up once; inserts are batched (by the
    database's parameter limit: SQLite's is low, PostgreSQL takes 1,000 rows at once)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api_for(admin)
    jobs = [job_body(shares["qs1"], name=f"sweep-{n}") for n in range(300)]
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/api/v1/jobs/bulk/", {"jobs": jobs}, format="json")
    assert response.status_code == 201
    reads = [q for q in captured.captured_queries if q["sql"].startswith("SELECT")]
    assert len(reads) == 3 + 3  # session, user, roles; shares, types, queue capacities


def test_unknown_share_and_type_are_reported_by_name(api_for, admin, shares):
    response = api_for(admin).post(
        "/api/v1/jobs/bulk/",
        {"jobs": [{**job_body(shares["qs1"]), "share": 999_999, "instance_type": "ml.nope"}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "jobs[0].share": ["no share with id 999999"],
        "jobs[0].instance_type": ["no instance type named ml.nope"],
    }


def test_priority_and_terminate(api_for, lead, shares):
    client = api_for(lead)
    job = Job.objects.get(pk=client.post("/api/v1/jobs/", job_body(shares["qs1"])).json()["id"])

    response = client.post(f"/api/v1/jobs/{job.pk}/priority/", {"priority": 9}, format="json")
    assert response.status_code == 200 and response.json()["priority"] == 9

    response = client.post(f"/api/v1/jobs/{job.pk}/terminate/")
    assert response.status_code == 200 and response.json()["state"] == "FAILED"

    response = client.post(f"/api/v1/jobs/{job.pk}/terminate/")
    assert response.status_code == 400

    events = client.get(f"/api/v1/jobs/{job.pk}/events/").json()
    assert [e["type"] for e in events] == ["SUBMITTED", "PRIORITY_CHANGED", "FAILED"]


def test_priority_of_another_teams_job_is_forbidden(api_for, lead, submit):
    job = submit("qs3", "theirs")
    response = api_for(lead).post(
        f"/api/v1/jobs/{job.pk}/priority/", {"priority": 9}, format="json"
    )
    assert response.status_code == 403


def test_missing_job_is_404(api_for, admin, queue):
    assert api_for(admin).get("/api/v1/jobs/424242/").status_code == 404


def test_list_filters_and_constant_queries(api_for, admin, queue, django_assert_num_queries):
    share = QuotaShareFactory(queue=queue)
    JobFactory.create_batch(20, share=share)
    JobFactory.create_batch(5, share=share, state=Job.State.SUCCEEDED)
    client = api_for(admin)

    with django_assert_num_queries(3 + 2):  # session, user, roles; count, rows
        response = client.get("/api/v1/jobs/", {"state": "SUCCEEDED"})
    assert response.json()["count"] == 5
    assert client.get("/api/v1/jobs/", {"team": "x"}).status_code == 400


def test_the_jobs_api_is_in_the_openapi_schema(api_for, admin):
    schema = api_for(admin).get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/v1/jobs/", "/api/v1/jobs/bulk/", "/api/v1/jobs/{id}/priority/"} <= set(paths)
