"""The life of a request: every allowed transition, and every refused one with its message."""

from datetime import timedelta

import pytest

from core.errors import InvalidInput
from governance.exceptions import services, transitions
from governance.models import ExceptionEvent, ExceptionRequest

State = ExceptionRequest.State
pytestmark = pytest.mark.django_db


def future(scene):
    return scene.capacity(
        window_start=scene.now + timedelta(hours=1), window_end=scene.now + timedelta(hours=5)
    )


def events(request):
    return list(request.events.values_list("type", flat=True))


def test_a_draft_is_submitted_then_approved_and_waits_for_its_window(scene):
    request = scene.file(future(scene), submit=False)
    assert request.state == State.DRAFT

    services.exception_request_submit(actor=scene.lead, request=request, now=scene.now)
    assert request.state == State.SUBMITTED and request.submitted_at == scene.now

    services.exception_request_approve(
        actor=scene.owner, request=request, note="fine", now=scene.now
    )
    request.refresh_from_db()
    assert request.state == State.APPROVED
    assert (request.decided_by, request.decision_note) == (scene.owner, "fine")
    assert events(request) == ["FILED", "SUBMITTED", "APPROVED"]


def test_approval_inside_the_window_takes_effect_at_once(scene):
    request = scene.file()
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    request.refresh_from_db()
    assert request.state == State.ACTIVE
    assert events(request) == ["FILED", "SUBMITTED", "APPROVED", "ACTIVATED"]


def test_deny_needs_a_note(scene):
    request = scene.file()
    with pytest.raises(InvalidInput) as error:
        services.exception_request_deny(actor=scene.owner, request=request, note=" ", now=scene.now)
    assert "note" in error.value.errors
    services.exception_request_deny(
        actor=scene.owner, request=request, note="use the LEND share", now=scene.now
    )
    request.refresh_from_db()
    assert request.state == State.DENIED


def test_an_active_exception_is_revoked_by_its_owner_and_its_effect_taken_back(scene):
    request = scene.file()
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    assert scene.qs1.limits.get().max_instances == 2
    request.refresh_from_db()
    services.exception_request_revoke(
        actor=scene.owner, request=request, reason="done early", now=scene.now
    )
    request.refresh_from_db()
    assert request.state == State.REVOKED
    assert scene.qs1.limits.get().max_instances == 1
    assert events(request)[-1] == ExceptionEvent.Type.REVOKED


def test_an_approved_exception_can_be_revoked_before_it_starts(scene, admin):
    request = scene.file(future(scene))
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    services.exception_request_revoke(actor=admin, request=request, reason="plans changed")
    request.refresh_from_db()
    assert request.state == State.REVOKED
    assert scene.qs1.limits.get().max_instances == 1


@pytest.mark.parametrize(
    ("state", "step", "message"),
    [
        (State.SUBMITTED, "submit", "this request is submitted, so it cannot be submitted"),
        (
            State.DRAFT,
            "approve",
            "this request is draft, so it cannot be approved; only a submitted",
        ),
        (State.DRAFT, "deny", "cannot be denied"),
        (State.APPROVED, "approve", "this request is approved, so it cannot be approved"),
        (State.DENIED, "approve", "this request is denied, so it cannot be approved"),
        (State.DENIED, "revoke", "only a approved or active request can"),
        (State.SUBMITTED, "revoke", "this request is submitted, so it cannot be revoked"),
        (State.EXPIRED, "revoke", "this request is expired, so it cannot be revoked"),
        (State.REVOKED, "deny", "this request is revoked"),
        (State.ACTIVE, "approve", "this request is active"),
    ],
)
def test_invalid_transitions_are_refused_with_a_clear_message(scene, admin, state, step, message):
    request = scene.file(future(scene), submit=False)
    ExceptionRequest.objects.filter(pk=request.pk).update(state=state)
    request.refresh_from_db()
    call = {
        "submit": lambda: services.exception_request_submit(actor=scene.lead, request=request),
        "approve": lambda: services.exception_request_approve(actor=scene.owner, request=request),
        "deny": lambda: services.exception_request_deny(
            actor=scene.owner, request=request, note="no"
        ),
        "revoke": lambda: services.exception_request_revoke(
            actor=admin, request=request, reason="no"
        ),
    }[step]
    with pytest.raises(services.TransitionRefused) as error:
        call()
    assert message in error.value.errors["state"][0]
    request.refresh_from_db()
    assert request.state == state


def test_a_decision_happens_once_even_when_two_owners_race(scene, second_owner):
    request = scene.file(future(scene))
    stale = ExceptionRequest.objects.get(pk=request.pk)  # loaded before the first decision
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    with pytest.raises(services.TransitionRefused):
        services.exception_request_deny(actor=second_owner, request=stale, note="too late")
    # The conditional update refuses even a caller whose copy still says SUBMITTED.
    assert transitions.claim(stale, "deny") is False
    request.refresh_from_db()
    assert request.state == State.APPROVED
    assert request.events.filter(type__in=["APPROVED", "DENIED"]).count() == 1


def test_an_ended_window_cannot_be_approved(scene):
    request = scene.file(scene.capacity(window_end=scene.now + timedelta(minutes=5)))
    with pytest.raises(services.TransitionRefused) as error:
        services.exception_request_approve(
            actor=scene.owner, request=request, now=scene.now + timedelta(minutes=10)
        )
    assert "already ended" in str(error.value.errors)
