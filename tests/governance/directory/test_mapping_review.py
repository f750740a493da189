"""A directory group mapping's addition and removal are policy writes like the others:
a reason is required (next to its field, and nothing changes without it), the write
applies at once without review, and under POLICY_CHANGES_NEED_REVIEW it becomes a
proposal that another admin (never its author) approves, which applies it and records
the history entry with the author's reason."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from core.bounds import MAX_TEXT
from core.rules import Refused
from governance.directory import services
from governance.directory.models import GroupMapping
from governance.models import PolicyChange, PolicyProposal
from governance.proposals.services import proposal_approve
from tests.factories import TeamFactory, UserFactory

pytestmark = pytest.mark.django_db
URL = "/directory/"
WHY = "vision's leads are the ones in the vision-leads group"


def _add(client, team, reason=WHY):
    return client.post(
        URL, {"group": "vision-leads", "kind": "team_lead", "team": team.pk, "reason": reason}
    )


def _history():
    return PolicyChange.objects.filter(target=PolicyChange.Target.GROUP_MAPPING)


@pytest.mark.parametrize(
    ("reason", "message"),
    [("", "say why this change is made"), ("   ", "say why"), ("x" * (MAX_TEXT + 1), "at most")],
)
def test_an_addition_needs_a_reason_shown_next_to_its_field(client, admin, reason, message):
    vision = TeamFactory(name="vision")
    client.force_login(admin)
    response = _add(client, vision, reason=reason)
    assert response.status_code == 400
    assert message in " ".join(response.context["form"].errors["reason"])
    assert 'id="id_reason_error"' in response.content.decode()
    assert not GroupMapping.objects.exists() and not _history().exists()
    assert not PolicyProposal.objects.exists()


def test_a_missing_reason_is_said_with_the_forms_own_problems(client, admin):
    client.force_login(admin)
    response = client.post(URL, {"group": "g", "kind": "team_lead", "team": "999999"})
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "Select a valid choice" in " ".join(errors["team"])
    assert "say why" in " ".join(errors["reason"])


def test_a_removal_needs_a_reason_shown_next_to_its_field(client, admin):
    vision = TeamFactory(name="vision")
    client.force_login(admin)
    assert _add(client, vision).status_code == 302
    mapping = GroupMapping.objects.get()
    url = reverse("directory-mapping-delete", args=[mapping.pk])
    response = client.post(url, {f"remove-{mapping.pk}-reason": ""})
    assert response.status_code == 400
    text = response.content.decode()
    assert f'id="id_remove-{mapping.pk}-reason_error"' in text
    assert "say why this change is made" in text
    assert GroupMapping.objects.get() == mapping
    assert _history().count() == 1


def test_without_review_both_apply_at_once_with_their_reasons(client, admin, settings):
    assert not settings.POLICY_CHANGES_NEED_REVIEW
    vision = TeamFactory(name="vision")
    client.force_login(admin)
    page = client.get(URL).content.decode()
    assert 'id="review-note"' not in page and "Add mapping" in page
    assert _add(client, vision).url == reverse("directory")
    mapping = GroupMapping.objects.get()
    (added,) = _history()
    assert (added.reason, added.actor, added.cause) == (WHY, admin, "edit")
    url = reverse("directory-mapping-delete", args=[mapping.pk])
    assert client.post(url, {f"remove-{mapping.pk}-reason": "led by hand"}).status_code == 302
    assert not GroupMapping.objects.exists()
    assert _history().latest("id").reason == "led by hand"
    assert not PolicyProposal.objects.exists()


def test_under_review_an_addition_waits_then_applies_on_another_admins_approval(
    client, admin, settings
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    vision = TeamFactory(name="vision")
    client.force_login(admin)
    page = client.get(URL).content.decode()
    assert 'id="review-note"' in page and "waits for another admin's review" in page
    assert "Propose mapping" in page

    response = _add(client, vision)
    assert response.url == reverse("proposal-list")
    said = " ".join(str(m) for m in get_messages(response.wsgi_request))
    assert "waiting for another admin's review" in said
    assert "new directory group mapping" in said
    assert not GroupMapping.objects.exists() and not _history().exists()
    (proposal,) = PolicyProposal.objects.all()
    assert proposal.kind == PolicyProposal.Kind.MAPPING_CREATE
    assert (proposal.author, proposal.reason) == (admin, WHY)
    assert proposal.object_repr == "vision-leads → lead of vision"
    assert proposal.before is None and proposal.payload["after"]["gives"] == "lead of vision"

    # Its author cannot approve it: separation of duties, as for every proposal.
    with pytest.raises(Refused):
        proposal_approve(actor=admin, proposal=proposal)
    assert not GroupMapping.objects.exists()

    other = UserFactory(username="second-admin", roles=["admins"])
    client.force_login(other)
    response = client.post(reverse("proposal-approve", args=[proposal.pk]))
    assert response.status_code == 302
    proposal.refresh_from_db()
    assert proposal.state == PolicyProposal.State.APPLIED and proposal.reviewer == other
    mapping = GroupMapping.objects.get()
    assert (mapping.group, mapping.kind, mapping.team) == ("vision-leads", "team_lead", vision)
    (entry,) = _history()
    assert proposal.applied_change == entry
    assert (entry.actor, entry.reason, entry.before) == (admin, WHY, None)
    assert entry.after == proposal.payload["after"]


def test_under_review_a_removal_waits_then_removes_on_approval(client, admin, settings):
    vision = TeamFactory(name="vision")
    client.force_login(admin)
    assert _add(client, vision).status_code == 302
    mapping = GroupMapping.objects.get()
    settings.POLICY_CHANGES_NEED_REVIEW = True
    assert "Propose the removal" in client.get(URL).content.decode()

    url = reverse("directory-mapping-delete", args=[mapping.pk])
    response = client.post(url, {f"remove-{mapping.pk}-reason": "led by hand from now"})
    assert response.url == reverse("proposal-list")
    assert GroupMapping.objects.get() == mapping and _history().count() == 1
    proposal = PolicyProposal.objects.get()
    assert proposal.kind == PolicyProposal.Kind.MAPPING_DELETE
    assert proposal.before["group"] == "vision-leads" and proposal.payload["after"] is None

    other = UserFactory(username="second-admin", roles=["admins"])
    proposal = proposal_approve(actor=other, proposal=proposal)
    assert proposal.state == PolicyProposal.State.APPLIED
    assert not GroupMapping.objects.exists()
    removed = _history().latest("id")
    assert proposal.applied_change == removed
    assert (removed.actor, removed.reason, removed.after) == (admin, "led by hand from now", None)


def test_an_approval_says_why_it_cannot_apply_and_changes_nothing(admin, settings):
    """The policy moved on since the proposal: the same mapping was added meanwhile, or
    its team is gone. The proposal stays pending, with the problem said."""
    from core.errors import InvalidInput

    vision = TeamFactory(name="vision")
    settings.POLICY_CHANGES_NEED_REVIEW = True
    first = services.mapping_create(
        actor=admin, group="vision-leads", kind="team_lead", team=vision, reason=WHY
    ).proposal
    second = services.mapping_create(
        actor=admin, group="VISION-LEADS", kind="team_lead", team=vision, reason=WHY
    ).proposal
    other = UserFactory(username="second-admin", roles=["admins"])
    proposal_approve(actor=other, proposal=first)
    with pytest.raises(InvalidInput) as refused:
        proposal_approve(actor=other, proposal=second)
    assert "already gives this" in " ".join(refused.value.messages())
    second.refresh_from_db()
    assert second.is_pending and GroupMapping.objects.count() == 1
