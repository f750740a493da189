"""The policy services: one set of rules for form, API and import, and a record of every change."""

import pytest

from fleet.models import CapacityLimit, QuotaShare, UrgencyDefinition
from governance.models import PolicyChange
from governance.policy.services import (
    PolicyError,
    ShareData,
    VersionConflict,
    changed_fields,
    policy_change_revert,
    queue_set_capacity,
    share_create,
    share_update,
    urgency_save,
)
from tests.factories import CapacityLimitFactory, QuotaShareFactory, TeamFactory

pytestmark = pytest.mark.django_db


def data_for(share: QuotaShare, **changes) -> ShareData:
    values = {
        "name": share.name,
        "team": share.team,
        "strategy": share.strategy,
        "borrow_limit": share.borrow_limit,
        "in_share_preemption": share.in_share_preemption,
        "state": share.state,
        "capacity_limits": {
            lim.instance_type.name: lim.max_instances for lim in share.limits.all()
        },
    }
    values.update(changes)
    return ShareData(**values)


def new_share(**overrides) -> ShareData:
    values = {
        "name": "new",
        "team": TeamFactory(name="newcomers"),
        "strategy": QuotaShare.Strategy.LEND,
        "capacity_limits": {"ml.g5.xlarge": 1},
    }
    values.update(overrides)
    return ShareData(**values)


def assert_rejected(call, field, message_part):
    before = (
        QuotaShare.objects.count(),
        PolicyChange.objects.count(),
        CapacityLimit.objects.count(),
    )
    with pytest.raises(PolicyError) as caught:
        call()
    assert field in caught.value.errors, caught.value.errors
    assert any(message_part in message for message in caught.value.errors[field])
    after = (
        QuotaShare.objects.count(),
        PolicyChange.objects.count(),
        CapacityLimit.objects.count(),
    )
    assert after == before, "a rejected change must change nothing"


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"strategy": "RESERVE", "borrow_limit": 100}, "borrow_limit", "LEND_AND_BORROW"),
        ({"strategy": "LEND_AND_BORROW", "borrow_limit": -2}, "borrow_limit", ""),
        ({"capacity_limits": {}}, "capacity_limits", ""),
        ({"capacity_limits": {"ml.g5.xlarge": 0}}, "capacity_limits.ml.g5.xlarge", ""),
        (
            {"capacity_limits": {"p4d.24xlarge": 1}},
            "capacity_limits.p4d.24xlarge",
            "not in the queue",
        ),
        ({"strategy": "SHARE_EVERYTHING"}, "strategy", ""),
        ({"name": "qs1"}, "name", "duplicate"),
        ({"team": None}, "team", "team"),
    ],
)
def test_share_create_rejects_what_the_spec_forbids(admin, aws_queue, overrides, field, message):
    assert_rejected(
        lambda: share_create(actor=admin, queue=aws_queue, data=new_share(**overrides), reason="r"),
        field,
        message,
    )


def test_share_create_needs_a_reason(admin, aws_queue):
    assert_rejected(
        lambda: share_create(actor=admin, queue=aws_queue, data=new_share(), reason="  "),
        "reason",
        "why",
    )


def test_a_queue_holds_at_most_twenty_shares(admin, aws_queue):
    for n in range(17):
        share_create(actor=admin, queue=aws_queue, data=new_share(name=f"s{n}"), reason="grow")
    assert aws_queue.shares.count() == 20
    assert_rejected(
        lambda: share_create(actor=admin, queue=aws_queue, data=new_share(name="s21"), reason="r"),
        "non_field_errors",
        "20",
    )


def test_share_create_records_who_why_and_what(admin, aws_queue):
    write = share_create(
        actor=admin,
        queue=aws_queue,
        data=new_share(strategy="LEND_AND_BORROW", borrow_limit=50),
        reason="new team joins",
    )
    share = write.applied
    change = PolicyChange.objects.get(share=share)
    assert (write.entry, write.proposal) == (change, None)
    assert (change.actor, change.reason, change.cause, change.before) == (
        admin,
        "new team joins",
        "edit",
        None,
    )
    assert change.after["borrow_limit"] == 50
    assert change.after["capacity_limits"] == {"ml.g5.xlarge": 1}
    assert share.position > aws_queue.shares.get(name="qs3").position


def test_share_update_writes_before_and_after(admin, aws_queue):
    qs2 = aws_queue.shares.get(name="qs2")
    saved = share_update(
        actor=admin,
        share=qs2,
        data=data_for(qs2, strategy="LEND_AND_BORROW", borrow_limit=100),
        reason="nlp needs bursts",
        expected_version=qs2.version,
    )
    qs2.refresh_from_db()
    assert (qs2.strategy, qs2.borrow_limit, qs2.version) == ("LEND_AND_BORROW", 100, 2)
    change = saved.entry  # the write returns the entry it recorded
    assert change == PolicyChange.objects.get(share=qs2)
    assert changed_fields(change.before, change.after) == [
        ("borrow_limit", None, 100),
        ("strategy", "LEND", "LEND_AND_BORROW"),
    ]


def test_switching_away_from_lend_and_borrow_drops_the_borrow_limit(admin, aws_queue):
    qs1 = aws_queue.shares.get(name="qs1")
    share_update(
        actor=admin,
        share=qs1,
        data=data_for(qs1, strategy="LEND", borrow_limit=None),
        reason="stop borrowing",
        expected_version=qs1.version,
    )
    qs1.refresh_from_db()
    assert (qs1.strategy, qs1.borrow_limit) == ("LEND", None)


def test_a_stale_version_is_a_conflict_and_changes_nothing(admin, aws_queue):
    qs2 = aws_queue.shares.get(name="qs2")
    share_update(
        actor=admin,
        share=qs2,
        data=data_for(qs2, in_share_preemption=True),
        reason="first",
        expected_version=1,
    )
    with pytest.raises(VersionConflict) as caught:
        share_update(
            actor=admin,
            share=qs2,
            data=data_for(qs2, state="DISABLED"),
            reason="second",
            expected_version=1,
        )
    assert caught.value.current_version == 2
    assert caught.value.current["in_share_preemption"] is True
    assert caught.value.submitted["state"] == "DISABLED"
    qs2.refresh_from_db()
    assert (qs2.state, qs2.version) == ("ENABLED", 2)
    assert PolicyChange.objects.filter(share=qs2, reason="second").count() == 0


def test_saving_the_same_policy_records_nothing(admin, aws_queue):
    qs2 = aws_queue.shares.get(name="qs2")
    count = PolicyChange.objects.count()
    saved = share_update(
        actor=admin, share=qs2, data=data_for(qs2), reason="no-op", expected_version=1
    )
    assert saved.entry is None and saved.applied == qs2
    assert PolicyChange.objects.count() == count


def test_revert_restores_only_the_fields_that_change_touched(admin, aws_queue):
    qs2 = aws_queue.shares.get(name="qs2")
    share_update(
        actor=admin,
        share=qs2,
        data=data_for(qs2, in_share_preemption=True),
        reason="turn on",
        expected_version=1,
    )
    first = PolicyChange.objects.filter(share=qs2).latest("id")
    qs2.refresh_from_db()
    share_update(
        actor=admin,
        share=qs2,
        data=data_for(qs2, state="DISABLED"),
        reason="pause",
        expected_version=2,
    )
    revert = policy_change_revert(actor=admin, change=first, reason="turned on by mistake").entry
    qs2.refresh_from_db()
    assert (qs2.in_share_preemption, qs2.state) == (False, "DISABLED")
    assert (revert.cause, revert.reverts, revert.reason) == (
        "revert",
        first,
        "turned on by mistake",
    )
    assert PolicyChange.objects.filter(pk=first.pk).exists(), "history is append-only"


def test_revert_of_a_creation_disables_the_share(admin, aws_queue):
    share = share_create(actor=admin, queue=aws_queue, data=new_share(), reason="try").applied
    creation = PolicyChange.objects.get(share=share)
    policy_change_revert(actor=admin, change=creation, reason="not needed")
    share.refresh_from_db()
    assert share.state == "DISABLED"


def test_capacity_must_cover_every_limit_type(admin, aws_queue):
    before = aws_queue.version
    with pytest.raises(PolicyError) as caught:
        queue_set_capacity(
            actor=admin,
            queue=aws_queue,
            capacity={"ml.g5.xlarge": 0},
            reason="shrink",
            expected_version=before,
        )
    assert "capacity.ml.g5.xlarge" in caught.value.errors
    aws_queue.refresh_from_db()
    assert aws_queue.version == before
    assert aws_queue.capacities.get().instances == 3


def test_capacity_change_is_recorded_and_revertible(admin, aws_queue):
    change = queue_set_capacity(
        actor=admin,
        queue=aws_queue,
        capacity={"ml.g5.xlarge": 5},
        reason="new hardware",
        expected_version=aws_queue.version,
    ).entry
    assert change == PolicyChange.objects.get(target="queue", queue=aws_queue)
    assert (change.before, change.after) == (
        {"capacity": {"ml.g5.xlarge": 3}},
        {"capacity": {"ml.g5.xlarge": 5}},
    )
    revert = policy_change_revert(actor=admin, change=change, reason="hardware returned")
    assert revert.applied == revert.entry  # a revert applies a change: the new one
    revert = revert.entry
    assert aws_queue.capacities.get().instances == 3
    assert (revert.reverts, revert.after) == (change, {"capacity": {"ml.g5.xlarge": 3}})


def test_capacity_with_a_stale_version_conflicts(admin, aws_queue):
    with pytest.raises(VersionConflict):
        queue_set_capacity(
            actor=admin,
            queue=aws_queue,
            capacity={"ml.g5.xlarge": 4},
            reason="r",
            expected_version=aws_queue.version + 1,
        )


URGENCY = {
    "name": "Deadline",
    "meaning": "A fixed external date.",
    "examples": "",
    "priority": 800,
    "max_window_hours": 72,
    "allowed_kinds": ["PRIORITY_RAISE"],
}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"priority": 10000}, "priority"),
        ({"priority": -1}, "priority"),
        ({"max_window_hours": 0}, "max_window_hours"),
        ({"meaning": ""}, "meaning"),
        ({"name": ""}, "name"),
        ({"allowed_kinds": ["FREE_GPUS"]}, "allowed_kinds"),
    ],
)
def test_urgency_rules(admin, changes, field):
    with pytest.raises(PolicyError) as caught:
        urgency_save(actor=admin, data={**URGENCY, **changes}, reason="r")
    assert field in caught.value.errors
    assert not UrgencyDefinition.objects.exists()


def test_urgency_edit_is_recorded_and_revertible(admin):
    urgency = urgency_save(actor=admin, data=URGENCY, reason="catalogue").applied
    urgency_save(
        actor=admin,
        urgency=urgency,
        data={**URGENCY, "priority": 900},
        reason="raise",
        expected_version=1,
    )
    change = PolicyChange.objects.filter(urgency=urgency).latest("id")
    assert changed_fields(change.before, change.after) == [("priority", 800, 900)]
    policy_change_revert(actor=admin, change=change, reason="too high")
    urgency.refresh_from_db()
    assert (urgency.priority, urgency.version) == (800, 3)


def test_database_refuses_a_borrow_limit_without_lend_and_borrow(aws_queue):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        QuotaShareFactory(queue=aws_queue, strategy="RESERVE", borrow_limit=10)


def test_database_refuses_a_zero_limit(aws_queue):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        CapacityLimitFactory(share=aws_queue.shares.first(), max_instances=0)
