"""Job search (issue 28, point 3): by name, id, definition and submitter, on the jobs page
and in the API (`GET /api/v1/jobs/?search=`), within what the user may see."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import Job
from scheduler.selectors import job_list
from tests.factories import JobFactory, UserFactory, job_definition

pytestmark = pytest.mark.django_db


@pytest.fixture
def api_for():
    def login(user):
        client = APIClient()
        client.force_login(user)
        return client

    return login


@pytest.fixture
def jobs(queue, shares, lead):
    """Four jobs: two of qs1 (the lead's team), one of qs2, one of qs3 (not the lead's)."""
    resnet = job_definition(queue, name="resnet-train")
    bert = job_definition(queue, name="bert-finetune")
    alice = UserFactory(username="alice.nguyen", roles=["team_leads"])
    return {
        "vision": JobFactory(
            share=shares["qs1"], name="vision-sweep-1", definition_revision=resnet
        ),
        "vision2": JobFactory(share=shares["qs1"], name="vision-sweep-2", submitted_by=alice),
        "nlp": JobFactory(share=shares["qs2"], name="nlp-eval", definition_revision=bert),
        "other": JobFactory(
            share=shares["qs3"],
            name="speech-base",
            submitted_by=alice,
            parameters={"dataset": "vision-private"},
        ),
    }


def names(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {row["name"] for row in response.json()["results"]}


def test_the_api_finds_jobs_by_name_id_definition_and_submitter(api_for, admin, jobs):
    client = api_for(admin)

    def found(search):
        return names(client.get("/api/v1/jobs/", {"search": search}))

    assert found("VISION-sweep") == {"vision-sweep-1", "vision-sweep-2"}  # any case
    assert found(str(jobs["nlp"].pk)) == {"nlp-eval"}
    assert found(f"#{jobs['other'].pk}") == {"speech-base"}
    assert found("resnet") == {"vision-sweep-1"}  # the definition's name
    assert found("alice") == {"vision-sweep-2", "speech-base"}  # the submitter's username
    assert found("alice sweep") == {"vision-sweep-2"}  # every word must match
    assert found("  ") == {row.name for row in Job.objects.all()}  # blank: no search
    assert found("nothing-like-it") == set()
    # It combines with the other filters.
    assert names(
        client.get("/api/v1/jobs/", {"search": "alice", "share": jobs["other"].share_id})
    ) == {"speech-base"}


def test_a_number_too_big_for_an_id_is_searched_as_text_only(api_for, admin, jobs):
    response = api_for(admin).get("/api/v1/jobs/", {"search": "9" * 40})
    assert names(response) == set()


def test_bad_searches_are_400s_naming_the_parameter(api_for, admin, jobs):
    client = api_for(admin)
    for bad in ("x" * 201, "vision\x00"):
        response = client.get("/api/v1/jobs/", {"search": bad})
        assert response.status_code == 400
        assert "search" in response.json()["errors"], response.json()


def test_search_is_in_the_openapi_schema(api_for, admin):
    schema = api_for(admin).get("/api/schema/", HTTP_ACCEPT="application/json").json()
    (parameter,) = [
        p for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"] if p["name"] == "search"
    ]
    assert parameter["in"] == "query"
    assert parameter["schema"]["maxLength"] == 200
    assert "submitter" in parameter["description"]


def test_search_stays_within_what_the_user_may_see(api_for, lead, jobs, exception_owner):
    # Leads see every team's jobs (the rules' "job.view": a queue is shared), so their
    # search finds exactly what their list shows, and nothing the list does not.
    client = api_for(lead)
    listed = names(client.get("/api/v1/jobs/"))
    assert names(client.get("/api/v1/jobs/", {"search": "alice"})) <= listed
    # What only the job's team may read is not searched: its parameter values.
    assert names(client.get("/api/v1/jobs/", {"search": "vision-private"})) == set()
    # Roles that may not read jobs find none, by the API or by the selector.
    assert api_for(exception_owner).get("/api/v1/jobs/", {"search": "vision"}).status_code == 403
    assert not job_list(filters={"search": "vision"}, user=exception_owner).exists()
    assert job_list(filters={"search": "vision"}, user=lead).count() == 2


def test_search_reads_the_job_table_without_joins(
    api_for, admin, jobs, queue, shares, django_assert_num_queries
):
    JobFactory.create_batch(60, share=shares["qs1"], name="bulk-vision")
    client = api_for(admin)
    client.get("/api/v1/jobs/")
    # Session, user, roles; the definitions and users the word names; the rows and their
    # COUNT.
    with django_assert_num_queries(3 + 1 + 2) as captured:
        response = client.get("/api/v1/jobs/", {"search": "vision"})
    assert response.json()["count"] == 62
    (count,) = [q["sql"] for q in captured.captured_queries if "COUNT(" in q["sql"]]
    assert "JOIN" not in count.split("WHERE")[0]


def test_the_jobs_page_searches(client, lead, jobs):
    client.force_login(lead)
    page = client.get(reverse("job-list"), {"search": "alice"})
    body = page.content.decode()
    assert 'type="search"' in body and 'name="search"' in body
    assert ">vision-sweep-2</a>" in body and ">speech-base</a>" in body
    assert ">nlp-eval</a>" not in body
    # htmx asks for the list alone, as the filters do.
    fragment = client.get(
        reverse("job-list"), {"search": "bert"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="job-list"
    ).content.decode()
    assert "<html" not in fragment and ">nlp-eval</a>" in fragment
    nothing = client.get(reverse("job-list"), {"search": "zzz"}).content.decode()
    assert "No jobs match" in nothing


def test_a_search_too_long_is_named_next_to_its_field(client, lead, jobs):
    client.force_login(lead)
    page = client.get(reverse("job-list"), {"search": "v" * 201})
    assert page.status_code == 200
    assert page.context["filter_form"].errors["search"]
    assert 'id="id_search_error"' in page.content.decode()


@pytest.mark.parametrize(
    "word",
    ["50%", "a_b", "back\\slash", "it's", "%s", "'; DROP TABLE scheduler_job; --", "Ünïcode"],
)
def test_a_search_word_is_text_never_a_pattern_or_sql(api_for, admin, shares, word):
    JobFactory(share=shares["qs1"], name=f"job {word} end")
    JobFactory(share=shares["qs1"], name="job 50x ab backslash its plain")
    response = api_for(admin).get("/api/v1/jobs/", {"search": word})
    assert names(response) == {f"job {word} end"}
    assert Job.objects.count() == 2
