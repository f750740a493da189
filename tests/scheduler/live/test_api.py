"""The jobs API: submission of a job definition with parameters (one and bulk), the
refused free-form command, idempotent submission with a client token, reads, priority
and termination."""

import pytest
from rest_framework.test import APIClient

from fleet.models import InstanceType, Job, JobEvent
from tests.factories import JobFactory, QuotaShareFactory, job_definition

pytestmark = pytest.mark.django_db

STEPS = {"name": "steps", "type": "integer", "min": 1, "max": 1_000_000, "default": 100}
DATASET = {"name": "dataset", "type": "choice", "choices": ["imagenet", "coco"]}


@pytest.fixture
def api_for():
    def login(user):
        client = APIClient()
        client.force_login(user)
        return client

    return login


@pytest.fixture
def train(queue):
    return job_definition(
        queue,
        name="train",
        command=["python", "-m", "train", "--steps={steps}", "--data", "{dataset}"],
        parameters=[STEPS, DATASET],
        instance_type=InstanceType.objects.get(name="ml.g5.xlarge"),
        expected_duration=600,
        checkpoint_interval=60,
        restart_overhead=5,
    )


def job_body(share, **fields):
    return {
        "definition": "train",
        "share": share.pk,
        "name": "bert",
        "parameters": {"dataset": "imagenet"},
        **fields,
    }


def test_submit_one_job(api_for, lead, shares, train):
    response = api_for(lead).post(
        "/api/v1/jobs/",
        job_body(shares["qs1"], priority=4, parameters={"steps": 250, "dataset": "coco"}),
        format="json",
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "RUNNABLE" and body["priority"] == 4 and body["team"] == "team-qs1"
    assert (body["definition"], body["revision"]) == ("train", 1)
    assert body["parameters"] == {"steps": 250, "dataset": "coco"}
    assert "command" not in body and "argv" not in body
    job = Job.objects.get(pk=body["id"])
    assert job.argv == ["python", "-m", "train", "--steps=250", "--data", "coco"]
    assert job.definition_revision == train
    assert JobEvent.objects.filter(job_id=body["id"], type="SUBMITTED").count() == 1


@pytest.mark.parametrize("share_state", ["ENABLED", "DISABLED"])
def test_the_submission_reply_is_what_a_read_gives(api_for, lead, shares, train, share_state):
    """The reply is made from the job as it was written, not read back: it must be what
    the job's own read gives, field for field, RUNNABLE or FAILED at once."""
    share = shares["qs1"]
    share.state = share_state
    share.save(update_fields=["state"])
    client = api_for(lead)
    reply = client.post(
        "/api/v1/jobs/",
        job_body(share, parameters={"steps": 250, "dataset": "coco"}, client_token="t-1"),
        format="json",
    )
    assert reply.status_code == 201, reply.json()
    body = reply.json()
    assert body["state"] == ("RUNNABLE" if share_state == "ENABLED" else "FAILED")
    assert client.get(f"/api/v1/jobs/{body['id']}/").json() == body
    assert client.get(f"/api/v1/jobs/?share={share.pk}").json()["results"] == [body]
    # A retry with the same token is read back, and gives the same.
    retry = client.post(
        "/api/v1/jobs/",
        job_body(share, parameters={"steps": 250, "dataset": "coco"}, client_token="t-1"),
        format="json",
    )
    assert (retry.status_code, retry.json()) == (200, body)


def test_defaults_come_from_the_revision_and_a_submission_may_override_them(
    api_for, lead, shares, train
):
    client = api_for(lead)
    defaults = client.post("/api/v1/jobs/", job_body(shares["qs1"]), format="json").json()
    overridden = client.post(
        "/api/v1/jobs/",
        job_body(shares["qs1"], expected_duration=90, checkpoint_interval=30, restart_overhead=0),
        format="json",
    ).json()

    assert defaults["parameters"] == {"steps": 100, "dataset": "imagenet"}
    figures = ("instance_type", "instances", "expected_duration", "checkpoint_interval")
    assert [defaults[key] for key in (*figures, "restart_overhead")] == [
        "ml.g5.xlarge",
        1,
        600,
        60,
        5,
    ]
    assert [overridden[key] for key in ("expected_duration", "checkpoint_interval")] == [90, 30]
    assert overridden["restart_overhead"] == 0


def test_submission_errors_have_the_one_error_shape(api_for, lead, shares, train):
    response = api_for(lead).post(
        "/api/v1/jobs/", job_body(shares["qs1"], instances=0, priority=10_000), format="json"
    )

    assert response.status_code == 400
    body = response.json()
    assert set(body["errors"]) == {"instances", "priority"}
    assert body["detail"].startswith("instances: ")
    assert not Job.objects.exists()


@pytest.mark.parametrize("role", ["lead", "admin"])
@pytest.mark.parametrize("key", ["command", "argv"])
def test_a_free_form_command_is_refused_for_every_role(request, api_for, shares, train, role, key):
    client = api_for(request.getfixturevalue(role))
    command = "python -c 'import os; print(os.environ)'"

    one = client.post("/api/v1/jobs/", {**job_body(shares["qs1"]), key: command}, format="json")
    bulk = client.post(
        "/api/v1/jobs/bulk/",
        {"jobs": [job_body(shares["qs1"]), {**job_body(shares["qs1"]), key: [command]}]},
        format="json",
    )
    bare = client.post("/api/v1/jobs/", {"share": shares["qs1"].pk, key: command}, format="json")

    assert one.status_code == 400
    assert one.json()["detail"] == f"{key}: jobs run a registered job definition"
    assert bulk.status_code == 400
    assert bulk.json()["errors"] == {f"jobs[1].{key}": ["jobs run a registered job definition"]}
    assert bare.status_code == 400
    assert bare.json()["detail"] == f"{key}: jobs run a registered job definition"
    assert not Job.objects.exists()


UNKNOWN = {"environment": {"LD_PRELOAD": "/tmp/x.so"}, "run_as": "root", "working_directory": "/"}


def test_unknown_job_fields_are_refused_by_name_not_dropped(api_for, lead, shares, train):
    client = api_for(lead)

    response = client.post("/api/v1/jobs/", {**job_body(shares["qs1"]), **UNKNOWN}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {
        key: ["not a field of a job submission"] for key in UNKNOWN
    }
    assert response.json()["detail"] == "environment: not a field of a job submission"
    assert not Job.objects.exists()


def test_unknown_fields_come_with_the_other_errors(api_for, lead, shares, train):
    body = {**job_body(shares["qs1"], priority="high"), "run_as": "root", "command": "id"}
    errors = api_for(lead).post("/api/v1/jobs/", body, format="json").json()["errors"]

    assert errors == {
        "run_as": ["not a field of a job submission"],
        "command": ["jobs run a registered job definition"],
        "priority": ["A valid integer is required."],
    }


def test_bulk_refuses_unknown_fields_per_item_by_index(api_for, lead, shares, train):
    client = api_for(lead)
    jobs = [
        job_body(shares["qs1"]),
        {**job_body(shares["qs1"]), "run_as": "root"},
        job_body(shares["qs1"]),
        {**job_body(shares["qs1"]), "environment": {}, "working_directory": "/"},
    ]

    items = client.post("/api/v1/jobs/bulk/", {"jobs": jobs}, format="json")
    top = client.post("/api/v1/jobs/bulk/", {"jobs": jobs[:1], "environment": {}}, format="json")

    assert items.status_code == 400
    assert items.json()["errors"] == {
        "jobs[1].run_as": ["not a field of a job submission"],
        "jobs[3].environment": ["not a field of a job submission"],
        "jobs[3].working_directory": ["not a field of a job submission"],
    }
    assert top.status_code == 400
    assert list(top.json()["errors"]) == ["environment"]
    assert not Job.objects.exists()


def test_every_declared_field_still_passes(api_for, lead, shares, train):
    body = job_body(
        shares["qs1"],
        revision=None,
        instance_type="ml.g5.xlarge",
        instances=1,
        expected_duration=90,
        priority=3,
        urgency=None,
        checkpoint_interval=30,
        restart_overhead=0,
        preemption_retries=1,
        client_token="retry-1",
    )

    response = api_for(lead).post("/api/v1/jobs/", body, format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["client_token"] == "retry-1"


def test_a_priority_change_refuses_unknown_fields(api_for, admin, shares):
    job = JobFactory(share=shares["qs1"])
    response = api_for(admin).post(
        f"/api/v1/jobs/{job.pk}/priority/", {"priority": 9, "state": "SUCCEEDED"}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"] == {"state": ["not a field of a priority change"]}


@pytest.mark.parametrize(
    ("parameters", "errors"),
    [
        (
            {"steps": 0, "dataset": "coco"},
            {"parameters.steps": ["must be an integer between 1 and 1000000"]},
        ),
        (
            {"steps": "12; rm -rf /", "dataset": "coco"},
            {"parameters.steps": ["must be an integer between 1 and 1000000"]},
        ),
        (
            {"steps": True, "dataset": "coco"},
            {"parameters.steps": ["must be an integer between 1 and 1000000"]},
        ),
        ({"steps": 5}, {"parameters.dataset": ["required: give a value"]}),
        (
            {"dataset": "$(id)"},
            {"parameters.dataset": ["must be one of: imagenet, coco"]},
        ),
        (
            {"dataset": "coco\nrm -rf /"},
            {"parameters.dataset": ["must be one line (no line breaks)"]},
        ),
        ({"dataset": "coco\x00"}, {"parameters.dataset": ["must not contain a NUL byte"]}),
        (
            {"dataset": "coco", "script": "evil.py"},
            {
                "parameters.script": [
                    "train:1 has no parameter script (its parameters: steps, dataset)"
                ]
            },
        ),
    ],
)
def test_parameter_values_are_checked_and_errors_name_the_parameter(
    api_for, lead, shares, train, parameters, errors
):
    response = api_for(lead).post(
        "/api/v1/jobs/", job_body(shares["qs1"], parameters=parameters), format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"] == errors
    assert not Job.objects.exists()


def test_a_definition_must_allow_the_queue_and_be_active(api_for, admin, lead, shares, train):
    from tests.factories import JobQueueFactory

    job_definition(JobQueueFactory(name="elsewhere"), name="elsewhere-only")
    client = api_for(lead)

    foreign = client.post(
        "/api/v1/jobs/", job_body(shares["qs1"], definition="elsewhere-only"), format="json"
    )
    unknown = client.post(
        "/api/v1/jobs/", job_body(shares["qs1"], definition="nope", revision=3), format="json"
    )
    old = client.post("/api/v1/jobs/", job_body(shares["qs1"], revision=7), format="json")
    api_for(admin).post(
        f"/api/v1/job-definitions/{train.definition_id}/retire/",
        {"reason": "replaced by train-v2"},
        format="json",
    )
    retired = client.post("/api/v1/jobs/", job_body(shares["qs1"]), format="json")

    assert foreign.json()["errors"]["definition"][0].startswith(
        "elsewhere-only may not run in queue aws-sample"
    )
    assert unknown.json()["errors"] == {"definition": ["no job definition named nope"]}
    assert old.json()["errors"] == {"revision": ["train has no revision 7 (its latest is 1)"]}
    assert retired.json()["errors"]["definition"] == [
        "train is retired; choose another job definition"
    ]
    assert not Job.objects.exists()


def test_a_lead_may_not_submit_into_another_teams_share(api_for, lead, shares, train):
    response = api_for(lead).post("/api/v1/jobs/", job_body(shares["qs3"]), format="json")
    assert response.status_code == 403
    assert not Job.objects.exists()


@pytest.mark.parametrize("role", ["exception_owner", "leadership", "outsider"])
def test_other_roles_may_not_use_the_jobs_api(request, api_for, shares, train, role):
    client = api_for(request.getfixturevalue(role))
    assert client.get("/api/v1/jobs/").status_code == 403
    assert client.post("/api/v1/jobs/", job_body(shares["qs1"]), format="json").status_code == 403


def test_anonymous_requests_get_401(shares):
    assert APIClient().get("/api/v1/jobs/").status_code == 401


def test_bulk_submission_is_all_or_none(api_for, admin, shares, train):
    client = api_for(admin)
    good = [
        job_body(shares["qs1"], name=f"sweep-{n}", parameters={"dataset": "coco", "steps": n + 1})
        for n in range(50)
    ]

    response = client.post("/api/v1/jobs/bulk/", {"jobs": good}, format="json")
    assert response.status_code == 201
    assert response.json()["count"] == 50 and response.json()["created"] == [True] * 50
    assert Job.objects.count() == 50
    assert Job.objects.get(name="sweep-9").argv[3] == "--steps=10"

    bad = [*good[:3], job_body(shares["qs1"], name="", expected_duration=0, parameters={})]
    response = client.post("/api/v1/jobs/bulk/", {"jobs": bad}, format="json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {
        "jobs[3].name",
        "jobs[3].expected_duration",
        "jobs[3].parameters.dataset",
    }
    assert Job.objects.count() == 50


def test_bulk_submission_reads_do_not_grow_with_the_jobs(api_for, admin, shares, train):
    """Shares, types, urgencies and definitions are looked up once; inserts are batched
    (by the database's parameter limit: SQLite's is low, PostgreSQL takes 1,000 rows)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api_for(admin)
    jobs = [job_body(shares["qs1"], name=f"sweep-{n}") for n in range(300)]
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/api/v1/jobs/bulk/", {"jobs": jobs}, format="json")
    assert response.status_code == 201
    reads = [q for q in captured.captured_queries if q["sql"].startswith("SELECT")]
    # session, user, roles; shares, the definitions with their revisions (no instance
    # type named: the definition's); queue capacities, the definitions' queues
    assert len(reads) == 3 + 2 + 2


def test_unknown_share_and_type_are_reported_by_name(api_for, admin, shares, train):
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


# Idempotent submission (client_token).


def test_a_retry_with_the_same_token_and_body_returns_the_original_job(
    api_for, lead, shares, train
):
    client = api_for(lead)
    body = job_body(shares["qs1"], client_token="run-2026-11-30-a")

    first = client.post("/api/v1/jobs/", body, format="json")
    # The same body with its keys in another order and its defaults spelled out.
    retry = client.post(
        "/api/v1/jobs/",
        {"priority": None, **dict(reversed(list(body.items())))},
        format="json",
    )

    assert first.status_code == 201 and retry.status_code == 200
    assert retry.json() == first.json()
    assert Job.objects.count() == 1
    assert JobEvent.objects.count() == 1


def test_the_same_token_with_another_body_is_a_conflict_naming_the_original(
    api_for, lead, shares, train
):
    client = api_for(lead)
    first = client.post(
        "/api/v1/jobs/", job_body(shares["qs1"], client_token="tok-1"), format="json"
    ).json()

    response = client.post(
        "/api/v1/jobs/", job_body(shares["qs1"], client_token="tok-1", priority=9), format="json"
    )

    assert response.status_code == 409
    body = response.json()
    assert body["job"] == first["id"] and body["original_jobs"] == {"client_token": first["id"]}
    assert body["detail"].startswith(f"client_token: was used for job {first['id']} (bert)")
    assert set(body["errors"]) == {"client_token"}
    assert Job.objects.count() == 1


def test_tokens_are_per_submitter_and_checked(api_for, lead, admin, shares, train):
    body = job_body(shares["qs1"], client_token="shared-name")
    mine = api_for(lead).post("/api/v1/jobs/", body, format="json")
    theirs = api_for(admin).post("/api/v1/jobs/", body, format="json")
    too_long = api_for(lead).post(
        "/api/v1/jobs/", job_body(shares["qs1"], client_token="x" * 65), format="json"
    )
    unprintable = api_for(lead).post(
        "/api/v1/jobs/", job_body(shares["qs1"], client_token="a\tb"), format="json"
    )

    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["id"] != theirs.json()["id"]
    assert too_long.json()["errors"] == {"client_token": ["at most 64 printable characters"]}
    assert unprintable.json()["errors"] == {"client_token": ["at most 64 printable characters"]}
    assert Job.objects.count() == 2


def test_bulk_items_have_their_own_tokens(api_for, admin, shares, train):
    client = api_for(admin)
    items = [
        job_body(shares["qs1"], name=f"sweep-{n}", client_token=f"sweep-{n}") for n in range(3)
    ]
    first = client.post("/api/v1/jobs/bulk/", {"jobs": items[:2]}, format="json").json()

    retry = client.post("/api/v1/jobs/bulk/", {"jobs": items}, format="json")
    again = client.post("/api/v1/jobs/bulk/", {"jobs": items}, format="json")
    conflict = client.post(
        "/api/v1/jobs/bulk/",
        {"jobs": [items[0], {**items[1], "name": "renamed"}]},
        format="json",
    )
    twice = client.post("/api/v1/jobs/bulk/", {"jobs": [items[0], items[0]]}, format="json")

    assert retry.status_code == 201
    assert retry.json()["ids"][:2] == first["ids"]
    assert retry.json()["created"] == [False, False, True]
    assert again.status_code == 200 and again.json()["created"] == [False, False, False]
    assert conflict.status_code == 409
    assert conflict.json()["original_jobs"] == {"jobs[1].client_token": first["ids"][1]}
    assert twice.json()["errors"] == {
        "jobs[1].client_token": ["jobs[0] of this request has the same token"]
    }
    assert Job.objects.count() == 3


# Reads and changes.


def test_priority_and_terminate(api_for, lead, shares, train):
    client = api_for(lead)
    job = Job.objects.get(
        pk=client.post("/api/v1/jobs/", job_body(shares["qs1"]), format="json").json()["id"]
    )

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

    # Session, user, roles; the rows (a first page shorter than a page needs no COUNT).
    with django_assert_num_queries(3 + 1):
        response = client.get("/api/v1/jobs/", {"state": "SUCCEEDED"})
    assert response.json()["count"] == 5
    JobFactory.create_batch(50, share=share, state=Job.State.SUCCEEDED)
    with django_assert_num_queries(3 + 2) as captured:  # and a COUNT for a full one,
        response = client.get("/api/v1/jobs/", {"state": "SUCCEEDED", "share": share.pk})
    assert (response.json()["count"], len(response.json()["results"])) == (55, 50)
    (count,) = [q["sql"] for q in captured.captured_queries if "COUNT(" in q["sql"]]
    assert "JOIN" not in count  # which needs none of the rows' joins
    assert client.get("/api/v1/jobs/", {"page": 2}).json()["count"] == 75
    assert client.get("/api/v1/jobs/", {"team": "x"}).status_code == 400


def test_the_jobs_api_is_in_the_openapi_schema(api_for, admin):
    schema = api_for(admin).get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    body = schema.json()
    assert {"/api/v1/jobs/", "/api/v1/jobs/bulk/", "/api/v1/jobs/{id}/priority/"} <= set(
        body["paths"]
    )
    submit = body["paths"]["/api/v1/jobs/"]["post"]
    assert {"200", "201", "400", "409"} <= set(submit["responses"])
    fields = body["components"]["schemas"]["JobInputRequest"]["properties"]
    assert fields["priority"]["maximum"] == 9999 and fields["client_token"]["maxLength"] == 64
    assert "command" not in fields
    for name in ("JobInputRequest", "JobBulkInputRequest", "PriorityInputRequest"):
        assert body["components"]["schemas"][name]["additionalProperties"] is False
