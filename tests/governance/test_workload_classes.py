"""Workload classes are policy writes (history with reason and diff, review, revert,
delete refused while in use), bad values are refused naming the field, and the
lenders' worst-case time to get their capacity back (V13) equals the hand-computed
figure and moves in the impact preview."""

from __future__ import annotations

import pytest

from core.errors import NON_FIELD
from fleet.models import QuotaShare, WorkloadClass
from fleet.selectors import share_document
from governance.models import PolicyChange, PolicyProposal
from governance.policy import contracts
from governance.policy.impact import share_change_impact, workload_class_change_impact
from governance.policy.services import (
    PolicyError,
    policy_change_revert,
    share_data_from_document,
    share_update,
)
from governance.policy.workload_classes import workload_class_delete, workload_class_save
from governance.proposals.services import proposal_approve
from tests.factories import UserFactory, job_definition

pytestmark = pytest.mark.django_db

BATCH = {
    "name": "batch",
    "description": "Long training runs that checkpoint",
    "min_runtime_reclaim": 600,
    "min_runtime_preempt": 300,
    "grace": 60,
    "checkpoint_on_notice": 30,
}


def save(actor, data, **kwargs):
    return workload_class_save(actor=actor, data=data, reason="contracts for issue 24", **kwargs)


def test_a_class_is_created_edited_and_reverted_with_history(admin):
    batch = save(admin, BATCH).applied
    save(admin, {**BATCH, "grace": 120}, workload_class=batch, expected_version=1)

    batch.refresh_from_db()
    assert (batch.grace, batch.version) == (120, 2)
    change = PolicyChange.objects.filter(workload_class=batch).latest("id")
    assert change.target == PolicyChange.Target.WORKLOAD_CLASS
    assert change.reason == "contracts for issue 24"
    assert (change.before["grace"], change.after["grace"]) == (60, 120)

    policy_change_revert(actor=admin, change=change, reason="too long a notice")
    batch.refresh_from_db()
    assert batch.grace == 60
    revert = PolicyChange.objects.latest("id")
    assert (revert.cause, revert.reverts) == (PolicyChange.Cause.REVERT, change)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"grace": -1}, "grace"),
        ({"min_runtime_reclaim": "ten"}, "min_runtime_reclaim"),
        ({"min_runtime_preempt": -5}, "min_runtime_preempt"),
        ({"checkpoint_on_notice": 0}, "checkpoint_on_notice"),
        ({"grace": 0, "checkpoint_on_notice": 30}, "checkpoint_on_notice"),
        ({"name": "  "}, "name"),
    ],
)
def test_bad_values_are_refused_naming_the_field(admin, changes, field):
    with pytest.raises(PolicyError) as refused:
        save(admin, {**BATCH, **changes})

    assert field in refused.value.errors
    assert not WorkloadClass.objects.exists()
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.WORKLOAD_CLASS).exists()


def test_a_name_clash_is_refused_naming_the_name(admin):
    save(admin, BATCH)
    with pytest.raises(PolicyError) as refused:
        save(admin, {**BATCH, "grace": 5})

    assert "already exists" in refused.value.errors["name"][0]
    assert WorkloadClass.objects.count() == 1


def test_a_class_in_use_cannot_be_deleted_and_the_error_names_it(admin, aws_queue):
    batch = save(admin, BATCH).applied
    QuotaShare.objects.filter(name="qs1").update(default_workload_class=batch)

    with pytest.raises(PolicyError) as refused:
        workload_class_delete(actor=admin, workload_class=batch, reason="unused now")

    message = refused.value.errors[NON_FIELD][0]
    assert "batch is in use" in message and "qs1" in message
    assert WorkloadClass.objects.filter(pk=batch.pk).exists()
    assert PolicyChange.objects.filter(workload_class=batch).count() == 1  # the creation

    QuotaShare.objects.filter(name="qs1").update(default_workload_class=None)
    workload_class_delete(actor=admin, workload_class=batch, reason="unused now")
    assert not WorkloadClass.objects.exists()
    deletion = PolicyChange.objects.latest("id")
    assert (deletion.object_repr, deletion.after) == ("batch", None)


def test_under_review_a_class_change_waits_for_another_admin(settings, admin):
    batch = save(admin, BATCH).applied
    settings.POLICY_CHANGES_NEED_REVIEW = True

    written = save(admin, {**BATCH, "grace": 300}, workload_class=batch, expected_version=1)

    assert written.proposal is not None and written.applied is None
    assert written.proposal.kind == PolicyProposal.Kind.CLASS_UPDATE
    assert written.proposal.payload["after"]["grace"] == 300
    batch.refresh_from_db()
    assert batch.grace == 60
    other = UserFactory(username="second-admin", roles=["admins"])
    proposal_approve(actor=other, proposal=written.proposal)
    batch.refresh_from_db()
    assert batch.grace == 300


def test_under_review_a_deletion_waits_then_deletes(settings, admin):
    batch = save(admin, BATCH).applied
    settings.POLICY_CHANGES_NEED_REVIEW = True

    written = workload_class_delete(actor=admin, workload_class=batch, reason="not needed")

    assert written.proposal.kind == PolicyProposal.Kind.CLASS_DELETE
    assert WorkloadClass.objects.filter(pk=batch.pk).exists()
    other = UserFactory(username="second-admin", roles=["admins"])
    proposal = proposal_approve(actor=other, proposal=written.proposal)
    assert not WorkloadClass.objects.exists()
    assert proposal.state == PolicyProposal.State.APPLIED


def _set_default(admin, share: QuotaShare, class_name: str | None, reason: str = "contract"):
    share = QuotaShare.objects.select_related("team", "queue").get(pk=share.pk)
    data = share_data_from_document({**share_document(share), "default_workload_class": class_name})
    return share_update(
        actor=admin, share=share, data=data, reason=reason, expected_version=share.version
    )


def test_a_share_default_class_is_a_share_write_with_its_diff_and_revert(admin, aws_queue):
    batch = save(admin, BATCH).applied
    qs1 = aws_queue.shares.get(name="qs1")

    written = _set_default(admin, qs1, "batch")

    qs1.refresh_from_db()
    assert qs1.default_workload_class == batch
    assert (
        written.entry.before["default_workload_class"],
        written.entry.after["default_workload_class"],
    ) == (None, "batch")
    policy_change_revert(actor=admin, change=written.entry, reason="back to no contract")
    qs1.refresh_from_db()
    assert qs1.default_workload_class is None


def test_an_unknown_default_class_is_refused_naming_the_field(admin, aws_queue):
    with pytest.raises(PolicyError) as refused:
        _set_default(admin, aws_queue.shares.get(name="qs1"), "nonesuch")

    assert "default_workload_class" in refused.value.errors
    assert aws_queue.shares.get(name="qs1").default_workload_class is None


# The trade-off (V13). In the AWS sample queue only qs1 borrows (LEND_AND_BORROW, 200 %),
# so qs2's and qs3's capacity is reclaimed from qs1's jobs, and nobody borrows from qs1.


def _bounds(queue) -> dict[str, int]:
    return {b.share: b.seconds for b in contracts.reclaim_bounds(contracts.queue_contracts(queue))}


def test_the_worst_case_is_the_largest_protection_plus_the_largest_grace(admin, aws_queue):
    # Borrowers' classes (min 600, grace 60) and (min 0, grace 120): 600 + 120 = 720 s,
    # not the largest per-class sum (660 s).
    long_runs = save(admin, {**BATCH, "checkpoint_on_notice": None}).applied
    notice = save(
        admin,
        {
            "name": "notice",
            "min_runtime_reclaim": 0,
            "min_runtime_preempt": 0,
            "grace": 120,
            "checkpoint_on_notice": None,
        },
    ).applied
    _set_default(admin, aws_queue.shares.get(name="qs1"), long_runs.name)
    assert _bounds(aws_queue) == {"qs1": 0, "qs2": 600 + 60, "qs3": 600 + 60}

    job_definition(aws_queue, name="finetune", workload_class=notice)

    assert _bounds(aws_queue) == {"qs1": 0, "qs2": 720, "qs3": 720}
    words = contracts.share_reclaim_bounds(aws_queue.shares.get(name="qs2"))[0].words
    assert words == "within 12 m 00 s (720 s) at worst"


def test_a_retired_definition_and_an_older_revision_do_not_count(admin, aws_queue):
    notice = save(admin, {**BATCH, "name": "notice", "min_runtime_reclaim": 0}).applied
    revision = job_definition(aws_queue, name="finetune", workload_class=notice)
    assert _bounds(aws_queue)["qs2"] == 60

    type(revision).objects.create(
        definition=revision.definition, revision=2, created_at=revision.created_at
    )
    assert _bounds(aws_queue)["qs2"] == 0  # its latest revision names no class


def test_the_impact_preview_says_what_a_default_class_does(admin, aws_queue):
    save(admin, BATCH)
    qs1 = QuotaShare.objects.select_related("team", "queue").get(name="qs1")
    data = share_data_from_document({**share_document(qs1), "default_workload_class": "batch"})

    lines = [
        line.text
        for line in share_change_impact(queue=aws_queue, data=data, share=qs1)
        if line.kind == "reclaim_bound"
    ]

    type_name = aws_queue.capacities.get().instance_type.name
    assert lines == [
        f"qs2's worst-case time to get its {type_name} back: 0 s (0 s) → 11 m 00 s (660 s)",
        f"qs3's worst-case time to get its {type_name} back: 0 s (0 s) → 11 m 00 s (660 s)",
    ]


def test_the_impact_preview_says_what_a_class_change_does(admin, aws_queue):
    batch = save(admin, BATCH).applied
    _set_default(admin, aws_queue.shares.get(name="qs1"), "batch")

    lines = workload_class_change_impact(
        workload_class=batch, data={**BATCH, "min_runtime_reclaim": 1800}
    )

    type_name = aws_queue.capacities.get().instance_type.name
    assert [line.text for line in lines] == [
        f"aws-sample: qs2's worst-case time to get its {type_name} back: "
        "11 m 00 s (660 s) → 31 m 00 s (1860 s)",
        f"aws-sample: qs3's worst-case time to get its {type_name} back: "
        "11 m 00 s (660 s) → 31 m 00 s (1860 s)",
    ]
