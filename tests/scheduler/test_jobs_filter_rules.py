"""A share or team filter that cannot match within the chosen queue (issue 28, point 9):
the jobs page refuses it next to its field, the jobs API with a 400 naming it, by one
rule (fleet.selectors.queue_filter_conflicts); the signals API refuses a share of
another queue and the dashboard page's parameters it does not take."""

from __future__ import annotations

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

from fleet.models import Job, QuotaShare
from tests.factories import JobFactory, aws_sample_queue

pytestmark = pytest.mark.django_db
JOBS = "/api/v1/jobs/"
SIGNALS = "/api/v1/signals/"


@pytest.fixture
def fleet(aws_queue):
    """aws_queue (qs1..qs3, a team each) and a second queue where only qs1's team has a
    share; a job in each."""
    other = aws_sample_queue("other-queue", capacity=2)
    qs1 = aws_queue.shares.get(name="qs1")
    other.shares.exclude(name="qs1").delete()
    other.shares.filter(name="qs1").update(team=qs1.team)
    g5 = aws_queue.capacities.get().instance_type
    JobFactory(share=aws_queue.shares.get(name="qs2"), instance_type=g5, name="in-aws")
    JobFactory(share=other.shares.get(), instance_type=g5, name="in-other")
    return aws_queue, other


def _cases(aws, other):
    """(name, query, the field refused or None, message) over both queues."""
    qs1, qs2 = (aws.shares.get(name=name) for name in ("qs1", "qs2"))
    other_qs1 = other.shares.get()
    return [
        (
            "team outside",
            {"queue": other.pk, "team": qs2.team_id},
            "team",
            f"team {qs2.team.name} has no share in queue {other.name}",
        ),
        (
            "share outside",
            {"queue": other.pk, "share": qs2.pk},
            "share",
            f"share {qs2.name} is not in queue {other.name}",
        ),
        (
            "share of the other",
            {"queue": aws.pk, "share": other_qs1.pk},
            "share",
            f"share {other_qs1.name} is not in queue {aws.name}",
        ),
        ("team in both", {"queue": other.pk, "team": qs1.team_id}, None, None),
        ("share inside", {"queue": aws.pk, "share": qs2.pk}, None, None),
        ("team without queue", {"team": qs2.team_id}, None, None),
        ("share without queue", {"share": other_qs1.pk}, None, None),
    ]


CASES = [
    "team outside",
    "share outside",
    "share of the other",
    "team in both",
    "share inside",
    "team without queue",
    "share without queue",
]


@pytest.mark.parametrize("case", CASES)
def test_the_page_and_the_api_agree(client, admin, fleet, case):
    aws, other = fleet
    _, query, field, message = next(c for c in _cases(aws, other) if c[0] == case)
    client.force_login(admin)
    api = client.get(JOBS, query)
    page = client.get(reverse("job-list"), query)
    assert page.status_code == 200
    page_errors = {k: list(v) for k, v in page.context["filter_form"].errors.items()}
    page_names = {job.name for job in page.context["page_obj"].object_list}
    if field is None:
        assert api.status_code == 200, api.json()
        assert not page_errors
        # Valid combinations are unchanged: the jobs listed are those of the filters.
        names = {job["name"] for job in api.json()["results"]}
        assert names == page_names == _expected(query)
    else:
        assert api.status_code == 400
        body = api.json()
        assert body["errors"] == {field: [message]}
        assert body["detail"] == f"{field}: {message}"
        assert page_errors == {field: [message]}
        assert message in page.content.decode()
        # The page leaves the refused filter out; the queue still filters.
        assert page_names == _expected({k: v for k, v in query.items() if k != field})


def _expected(query: dict) -> set[str]:
    jobs = Job.objects.all()
    if "queue" in query:
        jobs = jobs.filter(share__queue_id=query["queue"])
    if "share" in query:
        jobs = jobs.filter(share_id=query["share"])
    if "team" in query:
        jobs = jobs.filter(share__team_id=query["team"])
    return set(jobs.values_list("name", flat=True))


def test_a_refused_filter_changes_nothing(client, admin, fleet):
    aws, other = fleet
    before = (Job.objects.count(), QuotaShare.objects.count())
    client.force_login(admin)
    qs2 = aws.shares.get(name="qs2")
    response = client.get(JOBS, {"queue": other.pk, "team": qs2.team_id, "share": qs2.pk})
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"team", "share"}
    assert (Job.objects.count(), QuotaShare.objects.count()) == before


def test_ids_that_name_nothing_still_match_nothing(client, admin, fleet):
    aws, _ = fleet
    client.force_login(admin)
    for query in ({"queue": aws.pk, "team": 999999}, {"queue": 999999, "share": 1}):
        response = client.get(JOBS, query)
        assert response.status_code == 200
        assert response.json()["results"] == []


def test_the_schema_documents_the_400():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"][JOBS]["get"]
    assert "400" in operation["responses"]
    assert "a 400 naming the parameter" in operation["description"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert "with `queue`" in parameters["team"]["description"]
    assert "with `queue`" in parameters["share"]["description"]
    assert "PaginatedJobOutputList" in str(operation["responses"]["200"])
    signals = schema["paths"][SIGNALS]["get"]
    assert "400" in signals["responses"]
    assert "share of another queue" in signals["description"]


def test_the_signals_api_refuses_a_share_of_another_queue(client, leadership, fleet):
    aws, other = fleet
    client.force_login(leadership)
    response = client.get(SIGNALS, {"month": "2025-03", "scope": f"share:{other.name}/qs2"})
    assert response.status_code == 400
    assert response.json()["errors"] == {"scope": [f"share qs2 is not in queue {other.name}"]}
    unknown = client.get(SIGNALS, {"month": "2025-03", "scope": f"share:{aws.name}/nope"})
    assert unknown.json()["errors"] == {"scope": [f"unknown share 'nope' of queue '{aws.name}'"]}
    fine = client.get(SIGNALS, {"month": "2025-03", "scope": f"share:{other.name}/qs1"})
    assert fine.status_code == 200


def test_the_signals_api_refuses_the_pages_parameters(client, leadership, fleet):
    aws, other = fleet
    qs2 = aws.shares.get(name="qs2")
    client.force_login(leadership)
    # The page refuses this pair; the API, which takes no such pair, refuses both names
    # instead of answering for the whole organisation.
    response = client.get(SIGNALS, {"month": "2025-03", "queue": other.pk, "team": qs2.team_id})
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"queue", "team"}
    assert "use scope" in response.json()["errors"]["team"][0]
    both = client.get(SIGNALS, {"month": "2025-3", "team": qs2.team_id})
    assert set(both.json()["errors"]) == {"month", "team"}  # every fault named at once
