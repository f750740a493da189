"""Email: owners hear of submissions; the requester of decisions and of the end."""

from datetime import timedelta

import pytest
from django.core import mail

from core.errors import InvalidInput
from governance.exceptions import services

pytestmark = pytest.mark.django_db


def test_owners_are_told_of_a_submission(
    scene, second_owner, django_capture_on_commit_callbacks, settings
):
    settings.SITE_URL = "https://quota.example.com"
    with django_capture_on_commit_callbacks(execute=True):
        request = scene.file()
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.subject == f"Exception request #{request.pk} awaits your decision"
    assert message.to == sorted([scene.owner.email, second_owner.email])
    assert f"https://quota.example.com/exceptions/{request.pk}/" in message.body
    assert "1 more ml.g5.xlarge for share aws-sample / qs1" in message.body


def test_a_draft_tells_nobody(scene, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        scene.file(submit=False)
    assert mail.outbox == []


def test_the_requester_hears_of_the_decision_and_the_expiry(
    scene, django_capture_on_commit_callbacks
):
    request = scene.file()
    with django_capture_on_commit_callbacks(execute=True):
        services.exception_request_approve(
            actor=scene.owner, request=request, note="go ahead", now=scene.now
        )
    assert [m.subject for m in mail.outbox] == [f"Exception request #{request.pk} was approved"]
    assert mail.outbox[0].to == [scene.lead.email]
    assert "go ahead" in mail.outbox[0].body

    with django_capture_on_commit_callbacks(execute=True):
        services.exception_request_expire(request_id=request.pk, now=scene.now + timedelta(hours=5))
    assert mail.outbox[-1].subject == f"Exception #{request.pk} expired"
    assert mail.outbox[-1].to == [scene.lead.email]


def test_the_requester_hears_of_a_denial_with_its_note(scene, django_capture_on_commit_callbacks):
    request = scene.file()
    with django_capture_on_commit_callbacks(execute=True):
        services.exception_request_deny(
            actor=scene.owner, request=request, note="borrow from qs2 instead", now=scene.now
        )
    assert mail.outbox[-1].subject == f"Exception request #{request.pk} was denied"
    assert "borrow from qs2 instead" in mail.outbox[-1].body


def test_a_rolled_back_decision_sends_nothing(scene, django_capture_on_commit_callbacks):
    request = scene.file()
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(InvalidInput):
        services.exception_request_deny(actor=scene.owner, request=request, note="")
    assert mail.outbox == []
