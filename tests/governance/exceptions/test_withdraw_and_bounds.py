"""The requester withdraws a submitted request until it is decided (page and API), and a
window may start at most the urgency's maximum window from now."""

from datetime import timedelta

import pytest
from django.urls import reverse

from core.errors import Refused
from governance.exceptions.services import (
    TransitionRefused,
    exception_request_approve,
    exception_request_withdraw,
    request_validate,
)
from governance.models import ExceptionEvent, ExceptionRequest

pytestmark = pytest.mark.django_db
State = ExceptionRequest.State


def test_a_window_far_ahead_is_refused_naming_the_start(scene):
    data = scene.capacity(
        window_start=scene.now + timedelta(days=5 * 365),
        window_end=scene.now + timedelta(days=5 * 365, hours=4),
    )
    errors = request_validate(actor=scene.lead, data=data, now=scene.now)
    assert list(errors) == ["window_start"]
    assert (
        "urgency 'Launch' allows a window to start at most 24 h ahead" in errors["window_start"][0]
    )


def test_a_window_within_the_maximum_is_accepted(scene):
    data = scene.capacity(
        window_start=scene.now + timedelta(hours=20),
        window_end=scene.now + timedelta(hours=24),
    )
    assert request_validate(actor=scene.lead, data=data, now=scene.now) == {}


def test_the_api_refuses_a_window_in_2031_naming_the_field(scene, api_as):
    answer = api_as(scene.lead).post(
        "/api/v1/exception-requests/",
        {
            "kind": "TEMPORARY_CAPACITY",
            "team": scene.qs1.team.name,
            "urgency": scene.urgency.pk,
            "justification": "Far ahead",
            "window_start": "2031-01-01T09:00:00Z",
            "window_end": "2031-01-01T17:00:00Z",
            "share": scene.qs1.pk,
            "instance_type": scene.g5.name,
            "extra_instances": 1,
        },
        format="json",
    )
    assert answer.status_code == 400, answer.content
    assert "window_start" in str(answer.json())
    assert not ExceptionRequest.objects.exists()


def test_the_requester_withdraws_a_submitted_request_to_a_draft(scene, client_as):
    request = scene.file()
    assert request.state == State.SUBMITTED
    page = client_as(scene.lead).get(reverse("exception-detail", args=[request.pk]))
    assert "Withdraw request" in page.content.decode()
    answer = client_as(scene.lead).post(reverse("exception-withdraw", args=[request.pk]))
    assert answer.status_code == 302
    request.refresh_from_db()
    assert request.state == State.DRAFT and request.submitted_at is None
    assert request.events.filter(type=ExceptionEvent.Type.WITHDRAWN, actor=scene.lead).exists()
    # A draft again: it can be edited and submitted anew.
    page = client_as(scene.lead).get(reverse("exception-detail", args=[request.pk]))
    assert "Edit draft" in page.content.decode()


def test_only_the_requester_withdraws_and_only_until_it_is_decided(scene, api_as):
    request = scene.file()
    with pytest.raises(Refused):
        exception_request_withdraw(actor=scene.owner, request=request)
    exception_request_approve(actor=scene.owner, request=request)
    request.refresh_from_db()
    with pytest.raises(TransitionRefused):
        exception_request_withdraw(actor=scene.lead, request=request)
    answer = api_as(scene.lead).post(f"/api/v1/exception-requests/{request.pk}/withdraw/")
    assert answer.status_code == 400, answer.content
    assert "state" in str(answer.json())
    request.refresh_from_db()
    assert request.state == State.ACTIVE


def test_the_api_withdraws(scene, api_as):
    request = scene.file()
    answer = api_as(scene.lead).post(f"/api/v1/exception-requests/{request.pk}/withdraw/")
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "DRAFT"
