"""Requests go to the owners whose scope covers them; nobody decides their own."""

from datetime import timedelta

import pytest

from core.errors import Refused
from governance.context_processors import nav_items_for
from governance.exceptions import services
from governance.exceptions.selectors import (
    decision_queue,
    decision_queue_count,
    request_owners,
    waiting_seconds,
)
from governance.models import ExceptionOwner
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_owners_of_the_queue_or_of_the_share_receive_the_request(scene):
    share_owner = UserFactory(username="qs1-owner", roles=["exception_owners"])
    ExceptionOwner.objects.create(user=share_owner, share=scene.qs1)
    other_share = UserFactory(username="qs2-owner", roles=["exception_owners"])
    ExceptionOwner.objects.create(user=other_share, share=scene.qs2)
    request = scene.file()

    assert request_owners(request=request) == [scene.owner, share_owner]
    assert list(decision_queue(user=share_owner)) == [request]
    assert list(decision_queue(user=other_share)) == []
    with pytest.raises(Refused, match="outside your scope"):
        services.exception_request_approve(actor=other_share, request=request)


def test_nobody_decides_their_own_request(scene):
    # An owner who also leads the team files a request: it is not in their queue,
    # and deciding it is refused; another owner decides it.
    scene.qs1.team.leads.add(scene.owner)
    scene.owner.groups.add(*scene.lead.groups.all())
    request = scene.file(actor=scene.owner)
    assert list(decision_queue(user=scene.owner)) == []
    assert decision_queue_count(user=scene.owner) == 0
    with pytest.raises(Refused, match="you filed this request"):
        services.exception_request_approve(actor=scene.owner, request=request)
    assert scene.owner not in request_owners(request=request)


def test_admins_cannot_decide_their_own_request_either(scene, admin):
    request = scene.file(actor=admin)
    with pytest.raises(Refused, match="you filed this request"):
        services.exception_request_deny(actor=admin, request=request, note="x")


def test_the_pending_queue_is_oldest_first_with_waiting_time(scene):
    first = scene.file()
    second = services.exception_request_create(
        actor=scene.lead, data=scene.capacity(), submit=True, now=scene.now + timedelta(minutes=7)
    )
    assert list(decision_queue(user=scene.owner)) == [first, second]
    assert waiting_seconds(first, now=scene.now + timedelta(minutes=10)) == 600
    assert decision_queue_count(user=scene.owner) == 2


def test_the_top_bar_shows_the_decision_badge(scene):
    scene.file()
    items = {item.label: item for item in nav_items_for(scene.owner)}
    assert items["Decisions"].badge == 1
    assert "Exceptions" in items and "Knowledge" in items
    assert "Decisions" not in {item.label for item in nav_items_for(scene.lead)}
