"""Every policy write, on every page and API operation, with POLICY_CHANGES_NEED_REVIEW:
it becomes a proposal, the page says so and shows the proposals page, the API answers
202 with it, and nothing applies. Without review the same write applies at once."""

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import UrgencyDefinition
from fleet.selectors import share_document
from governance.models import PolicyChange, PolicyProposal
from governance.policy.services import PolicyWrite, share_data_from_document, share_update
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db

XL = "ml.g5.xlarge"
URGENCY = {
    "name": "Launch deadline",
    "meaning": "A public launch date that cannot move.",
    "priority": "800",
    "max_window_hours": "72",
}


@pytest.fixture
def edited(admin, aws_queue):
    """A change to revert: qs2's limit raised to 2 (the tests turn review on after it)."""
    share = aws_queue.shares.get(name="qs2")
    doc = {**share_document(share), "capacity_limits": {XL: 2}}
    return share_update(
        actor=admin,
        share=share,
        data=share_data_from_document(doc),
        reason="grow",
        expected_version=share.version,
    ).entry


def _share_form(share, **changes) -> dict:
    data = {
        "name": share.name,
        "team": str(share.team_id),
        "strategy": share.strategy,
        "borrow_limit": "",
        "state": share.state,
        "version": str(share.version),
        "reason": "Rebalance",
        "limit-0-instance_type": XL,
        "limit-0-max_instances": "2",
    }
    return {**data, **changes}


def _page_writes(aws_queue, edited):
    qs3 = aws_queue.shares.get(name="qs3")
    capacity = {
        "reason": "New hardware",
        "version": str(aws_queue.version),
        "capacity-0-instance_type": XL,
        "capacity-0-max_instances": "5",
    }
    return {
        "share_create": (
            reverse("share-create", args=[aws_queue.pk]),
            _share_form(qs3, name="qs4"),
        ),
        "share_update": (reverse("share-edit", args=[qs3.pk]), _share_form(qs3)),
        "queue_capacity": (reverse("queue-capacity", args=[aws_queue.pk]), capacity),
        "urgency_create": (reverse("urgency-create"), {**URGENCY, "reason": "Agreed"}),
        "revert": (reverse("history-revert", args=[edited.pk]), {"reason": "Too early"}),
        "team_create": (reverse("team-create"), {"name": "speech", "reason": "New team"}),
        "team_update": (
            reverse("team-edit", args=[qs3.team_id]),
            {"name": qs3.team.name, "description": "Speech", "reason": "Describe it"},
        ),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "share_create",
        "share_update",
        "queue_capacity",
        "urgency_create",
        "revert",
        "team_create",
        "team_update",
    ],
)
def test_a_page_write_under_review_shows_the_proposal(settings, admin, aws_queue, edited, kind):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    client = Client()
    client.force_login(admin)
    url, data = _page_writes(aws_queue, edited)[kind]
    changes = PolicyChange.objects.count()

    response = client.post(url, data)

    assert response.status_code == 302, response.content.decode()[:2000]
    assert response.url == reverse("proposal-list")
    proposal = PolicyProposal.objects.get()
    assert (proposal.kind, proposal.author, proposal.state) == (kind, admin, "PENDING")
    [message] = [str(m) for m in get_messages(response.wsgi_request)]
    assert message.startswith("Proposed, waiting for another admin's review: ")
    assert f"(proposal #{proposal.pk}). Nothing changes until it is approved." in message
    assert PolicyChange.objects.count() == changes


def _api_writes(aws_queue, edited):
    qs3 = aws_queue.shares.get(name="qs3")
    share = {"queue": aws_queue.pk, "name": "qs4", "team": "team-qs1", "strategy": "LEND"}
    urgency = {**URGENCY, "priority": 800, "max_window_hours": 72, "reason": "r"}
    return {
        "queue_create": (
            "post",
            "/api/v1/queues/",
            {"name": "research", "capacity": {XL: 2}, "reason": "r"},
        ),
        "queue_capacity": (
            "patch",
            f"/api/v1/queues/{aws_queue.pk}/",
            {"capacity": {XL: 5}, "reason": "r", "version": aws_queue.version},
        ),
        "share_create": (
            "post",
            "/api/v1/shares/",
            {**share, "capacity_limits": {XL: 1}, "reason": "r"},
        ),
        "share_update": (
            "patch",
            f"/api/v1/shares/{qs3.pk}/",
            {"capacity_limits": {XL: 2}, "reason": "r", "version": qs3.version},
        ),
        "urgency_create": ("post", "/api/v1/urgency-definitions/", urgency),
        "revert": ("post", f"/api/v1/policy-changes/{edited.pk}/revert/", {"reason": "r"}),
        "team_create": ("post", "/api/v1/teams/", {"name": "speech", "reason": "r"}),
        "team_update": (
            "patch",
            f"/api/v1/teams/{qs3.team_id}/",
            {"description": "Speech", "reason": "r"},
        ),
        "team_delete": (
            "delete",
            f"/api/v1/teams/{TeamFactory(name='spare').pk}/",
            {"reason": "r"},
        ),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "queue_create",
        "queue_capacity",
        "share_create",
        "share_update",
        "urgency_create",
        "revert",
        "team_create",
        "team_update",
        "team_delete",
    ],
)
def test_an_api_write_under_review_answers_202_with_the_proposal(
    settings, admin, aws_queue, edited, kind
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    client = APIClient()
    client.force_authenticate(admin)
    method, url, body = _api_writes(aws_queue, edited)[kind]
    changes = PolicyChange.objects.count()

    response = getattr(client, method)(url, body, format="json")

    assert response.status_code == 202, response.json()
    proposal = PolicyProposal.objects.get()
    assert response.json()["id"] == proposal.pk
    assert (response.json()["kind"], response.json()["state"]) == (kind, "PENDING")
    assert PolicyChange.objects.count() == changes


def test_an_urgency_update_under_review_answers_202(settings, admin):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    urgency = UrgencyDefinition.objects.create(
        name="Deadline", meaning="m", priority=5, max_window_hours=2
    )
    client = APIClient()
    client.force_authenticate(admin)

    response = client.patch(
        f"/api/v1/urgency-definitions/{urgency.pk}/",
        {"priority": 6, "reason": "r", "version": urgency.version},
        format="json",
    )

    assert response.status_code == 202, response.json()
    assert response.json()["kind"] == "urgency_update"
    assert UrgencyDefinition.objects.get(pk=urgency.pk).priority == 5


def test_a_write_returns_what_it_applied_or_what_it_proposed(settings, admin, aws_queue):
    share = aws_queue.shares.get(name="qs2")

    def grow(instances):
        doc = {**share_document(share), "capacity_limits": {XL: instances}}
        return share_update(
            actor=admin,
            share=share,
            data=share_data_from_document(doc),
            reason="grow",
            expected_version=share.version,
        )

    applied = grow(2)
    assert isinstance(applied, PolicyWrite)
    assert (applied.applied, applied.entry.share, applied.proposal) == (share, share, None)
    settings.POLICY_CHANGES_NEED_REVIEW = True
    share.refresh_from_db()
    proposed = grow(3)
    assert (proposed.applied, proposed.entry) == (None, None)
    assert proposed.proposal == PolicyProposal.objects.get()
    unchanged = grow(2)  # the same policy: nothing to review, nothing recorded
    assert (unchanged.applied, unchanged.entry, unchanged.proposal) == (share, None, None)
