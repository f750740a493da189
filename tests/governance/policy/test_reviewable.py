"""The policy-write kit (governance.policy.reviewable): every proposal kind is registered
with how it applies and how its changes are reverted, and approving a proposal goes
through that registry, naming a kind nothing applies."""

from decimal import Decimal

import pytest

from fleet.models import InstanceType
from governance.models import PolicyChange, PolicyProposal
from governance.policy import reviewable
from governance.policy.prices import instance_type_price_set
from governance.policy.services import PolicyError, policy_change_revert
from governance.proposals.services import proposal_approve
from tests.factories import UserFactory

XL = "ml.g5.xlarge"


def test_every_proposal_kind_has_its_apply_and_revert():
    registered = reviewable.registered_proposal_kinds()
    assert sorted(registered) == sorted(PolicyProposal.Kind.values)
    for kind in registered.values():
        assert callable(kind.apply), kind.kind
        assert callable(kind.revert), kind.kind


def test_every_change_target_is_reverted_by_the_kinds_that_record_it():
    reverts: dict[str, set] = {}
    for kind in reviewable.registered_proposal_kinds().values():
        if kind.target is not None:
            reverts.setdefault(kind.target, set()).add(kind.revert)
    assert sorted(reverts) == sorted(PolicyChange.Target.values)
    assert all(len(functions) == 1 for functions in reverts.values())


def test_a_second_revert_for_a_target_is_refused(monkeypatch):
    monkeypatch.setattr(reviewable, "_KINDS", dict(reviewable._KINDS))
    monkeypatch.setattr(reviewable, "_REVERTS", dict(reviewable._REVERTS))
    with pytest.raises(ValueError, match="'share' already have another revert"):
        reviewable.register_proposal_kind(
            "share_copy",
            target=PolicyChange.Target.SHARE,
            apply=lambda proposal, **common: None,
            revert=lambda **arguments: None,
        )
    assert "share_copy" not in reviewable.registered_proposal_kinds()


@pytest.fixture
def second_admin(db):
    return UserFactory(username="second-admin", roles=["admins"])


@pytest.mark.django_db
def test_approving_a_kind_nothing_applies_names_it_and_changes_nothing(admin, second_admin):
    proposal = PolicyProposal.objects.create(
        kind="queue_retired", author=admin, reason="from an older release", object_repr="q"
    )
    with pytest.raises(PolicyError) as refused:
        proposal_approve(actor=second_admin, proposal=proposal)
    assert "'queue_retired'" in refused.value.sentence()
    proposal.refresh_from_db()
    assert proposal.state == PolicyProposal.State.PENDING
    assert proposal.applied_change is None


@pytest.mark.django_db
def test_a_change_an_approved_revert_made_is_reverted_by_its_targets_revert(
    admin, second_admin, aws_queue, settings
):
    xl = InstanceType.objects.get(name=XL)
    edit = instance_type_price_set(actor=admin, instance_type=xl, price="1.5", reason="list").entry
    settings.POLICY_CHANGES_NEED_REVIEW = True
    proposal = policy_change_revert(actor=admin, change=edit, reason="not yet").proposal
    assert proposal.kind == PolicyProposal.Kind.REVERT
    reverted = proposal_approve(actor=second_admin, proposal=proposal).applied_change
    assert reverted.reverts == edit
    xl.refresh_from_db()
    assert xl.price_per_hour is None

    settings.POLICY_CHANGES_NEED_REVIEW = False
    again = policy_change_revert(actor=admin, change=reverted, reason="it was right").entry
    assert (again.target, again.reverts) == (PolicyChange.Target.PRICE, reverted)
    xl.refresh_from_db()
    assert xl.price_per_hour == Decimal("1.5")
