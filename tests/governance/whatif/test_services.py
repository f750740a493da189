"""Draft isolation, the draft's validation, review and apply."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput, WrongState
from core.rules import Refused
from fleet.models import QuotaShare
from fleet.selectors import share_document
from governance.models import PolicyChange, WhatIfComparison, WhatIfReview
from governance.policy.services import ShareData
from governance.whatif import services
from tests.factories import UserFactory
from tests.governance.whatif.conftest import AWS_PHILLY_MAPPING, lend_and_borrow_qs2, run_now

pytestmark = pytest.mark.django_db


def live_policy(queue) -> list[dict]:
    return [share_document(share) for share in queue.shares.order_by("position")]


def test_clone_copies_the_current_policy_with_versions(comparison, aws_queue):
    policy, refs = services.policy_snapshot(queue=aws_queue)
    assert comparison.current_policy == policy
    assert comparison.draft_policy == policy
    assert comparison.share_refs == refs
    assert [s["name"] for s in policy["shares"]] == ["qs1", "qs2", "qs3"]
    assert policy["queue"]["capacity"] == {"ml.g5.xlarge": 3}
    assert len(comparison.workload_jobs) == 7  # the recorded jobs of the last 30 days


def test_draft_edits_never_touch_the_live_policy(comparison, aws_queue):
    before = live_policy(aws_queue)
    versions = list(aws_queue.shares.values_list("version", flat=True))
    changes = PolicyChange.objects.count()

    lend_and_borrow_qs2(comparison)
    comparison.refresh_from_db()
    services.comparison_set_workload(
        actor=comparison.author,
        comparison=comparison,
        kind="PHILLY",
        days=1,
        scale=0.05,
        mapping=AWS_PHILLY_MAPPING,
    )
    run_now(comparison)

    assert comparison.draft_policy["shares"][1]["strategy"] == "LEND_AND_BORROW"
    assert comparison.draft_policy["shares"][1]["borrow_limit"] == -1
    assert comparison.current_policy["shares"][1]["strategy"] == "LEND"
    assert services.changed_shares(comparison) == [1]
    assert live_policy(aws_queue) == before
    assert list(aws_queue.shares.values_list("version", flat=True)) == versions
    assert PolicyChange.objects.count() == changes


def test_draft_is_validated_like_the_share_editor(comparison):
    team = QuotaShare.objects.get(name="qs2").team
    bad = ShareData(
        name="qs2",
        team=team,
        strategy="LEND",
        borrow_limit=50,
        capacity_limits={"ml.g5.xlarge": 1, "ml.p4d.24xlarge": 1},
    )
    with pytest.raises(InvalidInput) as raised:
        services.draft_share_update(
            actor=comparison.author, comparison=comparison, index=1, data=bad
        )
    errors = raised.value.errors
    assert errors["borrow_limit"] == ["only allowed with LEND_AND_BORROW"]
    assert any(
        "ml.p4d.24xlarge" in key or "ml.p4d.24xlarge" in " ".join(lines)
        for key, lines in errors.items()
        if key.startswith("capacity_limits")
    )
    comparison.refresh_from_db()
    assert comparison.draft_policy == comparison.current_policy


def test_draft_names_must_stay_unique(comparison):
    team = QuotaShare.objects.get(name="qs2").team
    duplicate = ShareData(
        name="qs1", team=team, strategy="LEND", capacity_limits={"ml.g5.xlarge": 1}
    )
    with pytest.raises(InvalidInput) as raised:
        services.draft_share_update(
            actor=comparison.author, comparison=comparison, index=1, data=duplicate
        )
    assert raised.value.errors == {"name": ["duplicate share name 'qs1'"]}


def test_editing_the_draft_clears_old_results(comparison):
    run_now(comparison)
    assert comparison.status == WhatIfComparison.Status.DONE
    lend_and_borrow_qs2(comparison)
    comparison.refresh_from_db()
    assert comparison.status == WhatIfComparison.Status.DRAFT
    assert comparison.results is None


def test_apply_goes_through_share_update_with_a_linked_reason(comparison, admin, aws_queue):
    lend_and_borrow_qs2(comparison)
    run_now(comparison)
    changes = services.comparison_apply(
        actor=admin, comparison=comparison, reason="qs2 needs bursts for the demo"
    )
    assert len(changes) == 1
    change = changes[0]
    assert change.cause == PolicyChange.Cause.EDIT
    assert change.share.name == "qs2"
    assert change.before["strategy"] == "LEND"
    assert change.after["strategy"] == "LEND_AND_BORROW"
    assert f"what-if comparison #{comparison.pk}" in change.reason
    assert f"/what-if/{comparison.pk}/" in change.reason
    comparison.refresh_from_db()
    assert list(comparison.applied_changes.all()) == [change]
    assert comparison.review_state == WhatIfComparison.Review.APPLIED
    assert QuotaShare.objects.get(queue=aws_queue, name="qs2").strategy == "LEND_AND_BORROW"
    with pytest.raises(WrongState):
        services.comparison_apply(actor=admin, comparison=comparison, reason="again")


def test_apply_needs_results_and_a_change(comparison, admin):
    with pytest.raises(InvalidInput, match="same as the current policy"):
        services.comparison_apply(actor=admin, comparison=comparison, reason="r")
    lend_and_borrow_qs2(comparison)
    with pytest.raises(InvalidInput, match="run the comparison first"):
        services.comparison_apply(actor=admin, comparison=comparison, reason="r")


def test_apply_refuses_a_draft_of_a_share_changed_since_the_clone(comparison, admin):
    lend_and_borrow_qs2(comparison)
    run_now(comparison)
    QuotaShare.objects.filter(name="qs2").update(version=9)
    with pytest.raises(InvalidInput, match="changed by someone else"):
        services.comparison_apply(actor=admin, comparison=comparison, reason="r")
    assert QuotaShare.objects.get(name="qs2").strategy == "LEND"


def test_review_flow_when_changes_need_review(comparison, admin, settings):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    other = UserFactory(username="second-admin", roles=["admins"])
    lend_and_borrow_qs2(comparison)
    run_now(comparison)

    with pytest.raises(WrongState, match="need review"):
        services.comparison_apply(actor=admin, comparison=comparison, reason="r")
    services.comparison_propose(actor=admin, comparison=comparison)
    with pytest.raises(Refused, match="another admin"):
        services.comparison_review(actor=admin, comparison=comparison, approve=True)
    with pytest.raises(WrongState, match="under review|proposed"):
        lend_and_borrow_qs2(comparison)
    with pytest.raises(InvalidInput):
        services.comparison_review(actor=other, comparison=comparison, approve=False)  # no note
    services.comparison_review(
        actor=other, comparison=comparison, approve=False, note="show a longer window"
    )
    comparison.refresh_from_db()
    assert comparison.review_state == WhatIfComparison.Review.REJECTED
    services.comparison_propose(actor=admin, comparison=comparison)
    services.comparison_review(actor=other, comparison=comparison, approve=True, note="ok")
    comparison.refresh_from_db()
    assert comparison.reviewer == other
    changes = services.comparison_apply(actor=admin, comparison=comparison, reason="approved")
    assert len(changes) == 1
    actions = list(comparison.reviews.values_list("action", "actor__username"))
    assert actions == [
        (WhatIfReview.Action.PROPOSED, "admin-user"),
        (WhatIfReview.Action.REJECTED, "second-admin"),
        (WhatIfReview.Action.PROPOSED, "admin-user"),
        (WhatIfReview.Action.APPROVED, "second-admin"),
        (WhatIfReview.Action.APPLIED, "admin-user"),
    ]


def test_save_attaches_to_articles_and_exception_requests(comparison):
    from governance.models import KnowledgeArticle

    article = KnowledgeArticle.objects.create(title="Why qs2 lends", slug="why-qs2", body="x")
    services.comparison_save(
        actor=comparison.author,
        comparison=comparison,
        title="Evidence",
        note="qs2 bursts",
        articles=[article],
    )
    comparison.refresh_from_db()
    assert comparison.saved and comparison.note == "qs2 bursts"
    assert list(article.whatif_comparisons.all()) == [comparison]
    with pytest.raises(InvalidInput):
        services.comparison_save(actor=comparison.author, comparison=comparison, title=" ", note="")


def test_the_history_links_an_applied_change_to_its_comparison(comparison, admin, client):
    lend_and_borrow_qs2(comparison)
    run_now(comparison)
    (change,) = services.comparison_apply(actor=admin, comparison=comparison, reason="bursts")
    client.force_login(admin)

    html = client.get("/history/").content.decode()

    assert f'href="/what-if/{comparison.pk}/">what-if comparison #{comparison.pk}</a>' in html
    assert f'id="change-{change.pk}"' in html


def _lend_qs3(comparison: WhatIfComparison) -> WhatIfComparison:
    index = [s["name"] for s in comparison.draft_policy["shares"]].index("qs3")
    share = QuotaShare.objects.get(queue=comparison.queue, name="qs3")
    data = ShareData(
        name="qs3",
        team=share.team,
        strategy=QuotaShare.Strategy.LEND,
        capacity_limits={"ml.g5.xlarge": 1},
    )
    return services.draft_share_update(
        actor=comparison.author, comparison=comparison, index=index, data=data
    )


def test_two_applies_by_one_admin_at_once_link_their_own_changes(
    comparison, admin, aws_queue, monkeypatch
):
    """The second apply runs while the first is between its writes (one admin saving
    twice at once): each comparison links the change it wrote, not the other's."""
    first = run_now(lend_and_borrow_qs2(comparison))
    second = run_now(_lend_qs3(services.comparison_create(actor=admin, queue=aws_queue)))
    share_update = services.share_update
    interleaved = []

    def update_meanwhile(**kwargs):
        if not interleaved:
            interleaved.append(None)  # once: the second apply's own write goes straight on
            interleaved[0] = services.comparison_apply(
                actor=admin, comparison=second, reason="qs3 lends"
            )
        return share_update(**kwargs)

    monkeypatch.setattr(services, "share_update", update_meanwhile)
    changes = services.comparison_apply(actor=admin, comparison=first, reason="qs2 borrows")

    (theirs,) = interleaved[0]
    (mine,) = changes
    assert (mine.share.name, theirs.share.name) == ("qs2", "qs3")
    first.refresh_from_db()
    second.refresh_from_db()
    assert list(first.applied_changes.all()) == [mine]
    assert list(second.applied_changes.all()) == [theirs]
    assert f"what-if comparison #{first.pk}" in mine.reason
    assert f"what-if comparison #{second.pk}" in theirs.reason
