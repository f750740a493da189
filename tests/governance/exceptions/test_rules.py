"""Urgency limits kinds and windows; leads file only for their teams; capacity is bounded.
The same messages, on the named field, in the service, the page and the API."""

from datetime import timedelta

import pytest

from core.errors import InvalidInput
from governance.exceptions.services import request_validate
from governance.models import ExceptionRequest
from tests.factories import JobFactory, TeamFactory, UrgencyDefinitionFactory

Kind = ExceptionRequest.Kind
pytestmark = pytest.mark.django_db


def errors(scene, **overrides):
    return request_validate(actor=scene.lead, data=scene.capacity(**overrides), now=scene.now)


def test_a_window_longer_than_the_urgency_allows_is_refused_on_window_end(scene):
    problems = errors(scene, window_end=scene.now + timedelta(hours=30))
    assert problems["window_end"] == [
        "the window is 30 h 01 m long; urgency 'Launch' allows at most 24 h"
    ]


def test_the_window_must_end_after_it_starts_and_in_the_future(scene):
    assert (
        "must be after the start"
        in errors(scene, window_end=scene.now - timedelta(hours=2))["window_end"][0]
    )
    past = errors(
        scene,
        window_start=scene.now - timedelta(hours=3),
        window_end=scene.now - timedelta(hours=1),
    )
    assert past["window_end"] == ["must be in the future"]


def test_the_urgency_limits_the_kind(scene):
    scene.urgency.allowed_kinds = [Kind.PRIORITY_RAISE]
    scene.urgency.save()
    assert errors(scene)["kind"] == [
        "urgency 'Launch' does not allow a temporary capacity; it allows: priority raise"
    ]


def test_the_urgency_limits_who_may_invoke_it(scene):
    scene.urgency.invokers.add(TeamFactory(name="someone-else"))
    assert errors(scene)["urgency"] == ["team team-qs1 may not invoke urgency 'Launch'"]


def test_team_leads_file_only_for_teams_they_lead(scene):
    problems = errors(scene, team=scene.qs2.team, share=scene.qs2)
    assert problems["team"] == [
        "you can only file requests for teams you lead, and you do not lead team-qs2"
    ]


def test_the_share_must_be_the_teams(scene):
    assert errors(scene, share=scene.qs2)["share"] == [
        "share aws-sample / qs2 belongs to team team-qs2, not to team-qs1"
    ]


def test_the_queue_capacity_bounds_temporary_capacity(scene):
    assert errors(scene, extra_instances=3)["extra_instances"] == [
        "share qs1 would have 4 ml.g5.xlarge, more than the queue's capacity of 3; ask for at "
        "most 2"
    ]
    assert errors(scene, extra_instances=2) == {}


def test_jobs_must_be_the_teams_and_still_live(scene):
    other = JobFactory(share=scene.qs2, instance_type=scene.g5, name="nlp-job")
    done = JobFactory(share=scene.qs1, instance_type=scene.g5, name="old", state="SUCCEEDED")
    data = scene.jobs(jobs=[other, done])
    problems = request_validate(actor=scene.lead, data=data, now=scene.now)["jobs"]
    assert problems == [
        "job nlp-job is not a job of team team-qs1",
        "job old has finished (succeeded)",
    ]


def test_protection_is_for_running_jobs(scene):
    data = scene.jobs(kind=Kind.PREEMPTION_PROTECTION, jobs=[scene.waiting])
    assert request_validate(actor=scene.lead, data=data, now=scene.now)["jobs"] == [
        "job vision-sweep is not running: only running jobs can be preempted"
    ]


def test_the_service_refuses_and_writes_nothing(scene):
    with pytest.raises(InvalidInput) as error:
        scene.file(scene.capacity(window_end=scene.now + timedelta(hours=48)))
    assert "window_end" in error.value.errors
    assert not ExceptionRequest.objects.exists()


def page_post(scene, **overrides):
    data = {
        "kind": Kind.TEMPORARY_CAPACITY,
        "team": str(scene.qs1.team.pk),
        "urgency": str(scene.urgency.pk),
        "justification": "Launch",
        "window_start": (scene.now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
        "window_end": (scene.now + timedelta(hours=30)).strftime("%Y-%m-%dT%H:%M"),
        "share": str(scene.qs1.pk),
        "instance_type": str(scene.g5.pk),
        "extra_instances": "1",
        "submit": "1",
    }
    data.update(overrides)
    return data


def test_the_page_names_the_field_of_a_too_long_window(scene, client_as):
    response = client_as(scene.lead).post("/exceptions/new/", page_post(scene))
    assert response.status_code == 400
    form = response.context["form"]
    assert form.errors["window_end"] == [
        "the window is 29 h long; urgency 'Launch' allows at most 24 h"
    ]
    assert b"allows at most 24 h" in response.content
    assert not ExceptionRequest.objects.exists()


def test_the_page_files_and_submits_a_valid_request(scene, client_as):
    response = client_as(scene.lead).post(
        "/exceptions/new/",
        page_post(scene, window_end=(scene.now + timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M")),
    )
    request = ExceptionRequest.objects.get()
    assert response.status_code == 302 and response.url == f"/exceptions/{request.pk}/"
    assert request.state == ExceptionRequest.State.SUBMITTED


def test_the_api_names_the_field_of_a_too_long_window(scene, api_as):
    response = api_as(scene.lead).post(
        "/api/v1/exception-requests/",
        {
            "kind": Kind.TEMPORARY_CAPACITY,
            "team": "team-qs1",
            "urgency": scene.urgency.pk,
            "justification": "Launch",
            "window_start": (scene.now + timedelta(hours=1)).isoformat(),
            "window_end": (scene.now + timedelta(hours=31)).isoformat(),
            "share": scene.qs1.pk,
            "instance_type": "ml.g5.xlarge",
            "extra_instances": 1,
        },
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "detail": "window_end: the window is 30 h long; urgency 'Launch' allows at most 24 h",
        "errors": {"window_end": ["the window is 30 h long; urgency 'Launch' allows at most 24 h"]},
    }


def test_the_urgency_catalogue_limits_are_those_of_the_definition(scene):
    short = UrgencyDefinitionFactory(name="Short", max_window_hours=1)
    problems = errors(scene, urgency=short, window_end=scene.now + timedelta(hours=2))
    assert "allows at most 1 h" in problems["window_end"][0]
