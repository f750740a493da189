"""Spec v2 (interruption contracts) through `schedule(snapshot, now)`, the live
scheduler's entry point, and V13's reclaim bound (`engine.contracts`)."""

from dataclasses import replace

import pytest

from engine import (
    PendingJob,
    Preempt,
    QueueSpec,
    RunningJob,
    ScenarioError,
    ShareSpec,
    Snapshot,
    Start,
    load_scenario,
    schedule,
)
from engine.contracts import Contract, contract_problems, policy_reclaim_bound, reclaim_bound

G = "ml.g5.xlarge"
SHARES = (
    ShareSpec("lender", {G: 1}, "LEND"),
    ShareSpec("borrower", {G: 1}, "LEND_AND_BORROW"),
)


def running(job_id, share, *, n=1, started_at=0, seq=0, **extra):
    return RunningJob(job_id, share, 0, G, n, started_at, seq, **extra)


def pending(job_id, share, *, n=1, submitted_at=0, **extra):
    return PendingJob(job_id, share, 0, G, n, submitted_at, **extra)


def borrowing(b2_extra=None, *, capacity=2, shares=SHARES):
    """b1 within the borrower's limit, b2 borrowed (example 1 of the spec's v2 section)."""
    return (
        running("b1", "borrower"),
        running("b2", "borrower", seq=1, **(b2_extra or {})),
    )


def test_a_victim_with_grace_gets_notice_and_the_starter_waits():
    snapshot = Snapshot(
        QueueSpec({G: 2}),
        SHARES,
        running=borrowing({"grace": 120, "checkpoint_on_notice": 30}),
        pending=(pending("l1", "lender", submitted_at=100),),
    )
    result = schedule(snapshot, 100)
    assert result.decisions == (
        Preempt("b2", "reclaim", "l1", fails=False, grace_until=220, stop_at=130, saves=True),
    )


def test_checkpoint_on_notice_longer_than_grace_stops_at_the_end_of_grace():
    snapshot = Snapshot(
        QueueSpec({G: 2}),
        SHARES,
        running=borrowing({"grace": 60, "checkpoint_on_notice": 90, "preemption_retries": 0}),
        pending=(pending("l1", "lender", submitted_at=100),),
    )
    (decision,) = schedule(snapshot, 100).decisions
    assert (decision.stop_at, decision.saves, decision.fails) == (160, False, True)


def test_a_waiting_starter_and_its_stopping_victim_decide_nothing():
    snapshot = Snapshot(
        QueueSpec({G: 2}),
        SHARES,
        running=borrowing({"grace": 120, "stopping_until": 220, "notice_for": "l1"}),
        pending=(pending("l1", "lender", submitted_at=100, awaiting_victims=("b2",)),),
    )
    assert schedule(snapshot, 150).decisions == ()


def test_a_stopping_job_is_not_reclaimed_again():
    """V7/V8.5: another starter does not count on the capacity b2 will free, and over'
    leaves the borrower nothing else to give."""
    snapshot = Snapshot(
        QueueSpec({G: 2}),
        SHARES,
        running=borrowing({"grace": 120, "stopping_until": 220}),
        pending=(pending("l2", "lender", submitted_at=150),),
    )
    assert schedule(snapshot, 150).decisions == ()


def test_the_hold_keeps_freed_capacity_for_the_waiting_starter():
    """V8.2: l1 waits for b3; b2's instance, already freed, is held: b2 may not borrow it."""
    shares = (ShareSpec("lender", {G: 2}, "LEND"), ShareSpec("borrower", {G: 1}, "LEND_AND_BORROW"))
    stopping = running("b3", "borrower", seq=2, started_at=10, grace=100, stopping_until=200)
    base = dict(running=(running("b1", "borrower"), stopping))
    waiting = pending("l1", "lender", n=2, submitted_at=100, awaiting_victims=("b3",))
    held = Snapshot(
        QueueSpec({G: 3}),
        shares,
        pending=(pending("b2", "borrower"), replace(waiting, held_instances=1)),
        **base,
    )
    assert schedule(held, 150).decisions == ()
    not_held = Snapshot(
        QueueSpec({G: 3}), shares, pending=(pending("b2", "borrower"), waiting), **base
    )
    assert schedule(not_held, 150).decisions == (Start("b2", borrowed=True),)


def test_a_capacity_cut_stops_a_stopping_job_first():
    snapshot = Snapshot(
        QueueSpec({G: 1}),
        SHARES,
        running=borrowing({"grace": 120, "stopping_until": 220}),
        pending=(pending("l1", "lender", submitted_at=100, awaiting_victims=("b2",)),),
    )
    assert schedule(snapshot, 150).decisions == (
        Preempt("b2", "capacity_change", None, fails=False),
    )


def victim(snapshot, now):
    decisions = schedule(snapshot, now).decisions
    assert decisions[-1] == Start("l1", borrowed=False)
    return decisions[0].job


def test_protection_counts_from_the_current_runs_start():
    """b2 (started later) is the victim unless protected; then b1 is taken instead."""
    protected = borrowing({"min_runtime_reclaim": 300, "run_started_at": 50})
    snapshot = Snapshot(
        QueueSpec({G: 2}), SHARES, running=protected, pending=(pending("l1", "lender"),)
    )
    assert (victim(snapshot, 349), victim(snapshot, 350)) == ("b1", "b2")


def test_protected_until_and_min_runtime_combine():
    """Protected from a cause if either says so."""
    both = borrowing({"min_runtime_reclaim": 100, "protected_until": 400})
    snapshot = Snapshot(QueueSpec({G: 2}), SHARES, running=both, pending=(pending("l1", "lender"),))
    assert (victim(snapshot, 50), victim(snapshot, 200), victim(snapshot, 400)) == (
        "b1",
        "b1",
        "b2",
    )
    later = borrowing({"min_runtime_reclaim": 500, "protected_until": 400})
    snapshot = Snapshot(
        QueueSpec({G: 2}), SHARES, running=later, pending=(pending("l1", "lender"),)
    )
    assert (victim(snapshot, 450), victim(snapshot, 500)) == ("b1", "b2")


def test_a_pass_reports_the_jobs_whose_protection_blocked_a_victim_choice():
    """V4 through the live entry point: b2, the job the rule would take, is protected,
    so b1 is taken instead and b2 counts one block; once unprotected, no block."""
    protected = borrowing({"min_runtime_reclaim": 300})
    snapshot = Snapshot(
        QueueSpec({G: 2}), SHARES, running=protected, pending=(pending("l1", "lender"),)
    )
    assert schedule(snapshot, 100).protected_blocks == {"b2": 1}
    assert schedule(snapshot, 300).protected_blocks == {}
    # Every job protected: nothing is taken, and the job the rule would take counts.
    both = (
        running("b1", "borrower", min_runtime_reclaim=300),
        running("b2", "borrower", seq=1, min_runtime_reclaim=300),
    )
    blocked = schedule(replace(snapshot, running=both), 100)
    assert blocked.decisions == ()
    assert blocked.protected_blocks == {"b2": 1}


# -- V13 ------------------------------------------------------------------------------

EXAMPLE_3_SHARES = (
    ShareSpec("lender", {G: 2}, "LEND"),
    ShareSpec("borrower", {G: 1}, "LEND_AND_BORROW"),
)


def example_3(b2=None, b3=None):
    return Snapshot(
        QueueSpec({G: 3}),
        EXAMPLE_3_SHARES,
        running=(
            running("b1", "borrower"),
            running("b2", "borrower", seq=1, **(b2 or {"min_runtime_reclaim": 200, "grace": 50})),
            running("b3", "borrower", seq=2, **(b3 or {"min_runtime_reclaim": 250, "grace": 30})),
        ),
    )


def test_reclaim_bound_is_a_sum_of_two_maxima():
    """Spec example 3: at 100, 150 s of protection left (b3) plus 50 s of grace (b2) =
    200, not the per-job maximum of protection + grace (180)."""
    assert reclaim_bound(example_3(), "lender", G, 100) == 200


def test_reclaim_bound_counts_a_stopping_jobs_remaining_notice_as_grace():
    snapshot = example_3({"grace": 50, "stopping_until": 300}, {"grace": 30, "stopping_until": 280})
    assert reclaim_bound(snapshot, "lender", G, 260) == 40


def test_reclaim_bound_is_zero_without_borrowers():
    snapshot = Snapshot(QueueSpec({G: 3}), EXAMPLE_3_SHARES, running=(running("b1", "borrower"),))
    assert reclaim_bound(snapshot, "lender", G, 0) == 0
    assert reclaim_bound(example_3(), "lender", G, 400) == 50  # protections over: grace only
    with pytest.raises(ValueError):
        reclaim_bound(snapshot, "nobody", G, 0)


def test_policy_reclaim_bound_is_the_worst_case_over_the_borrowers():
    shares = (
        ShareSpec("lender", {G: 2}, "LEND"),
        ShareSpec("borrower", {G: 1}, "LEND_AND_BORROW"),
        ShareSpec("capped", {G: 1}, "LEND_AND_BORROW", borrow_limit=0),
        ShareSpec("reserved", {G: 1}, "RESERVE"),
    )
    contracts = {
        "borrower": [Contract(min_runtime_reclaim=200, grace=50), Contract(250, grace=30)],
        "capped": [Contract(min_runtime_reclaim=9000)],  # may not borrow: no effect
        "reserved": [Contract(grace=9000)],  # never borrows
        "lender": [Contract(grace=9000)],  # its own jobs are not the reclaim's
    }
    assert policy_reclaim_bound(shares, "lender", G, contracts) == 300
    one = {"borrower": [Contract(min_runtime_reclaim=600, grace=120)]}
    assert policy_reclaim_bound(shares, "lender", G, one) == 720
    assert policy_reclaim_bound(shares, "lender", G, {}) == 0


# -- V1 -------------------------------------------------------------------------------


def _document(**job):
    return {
        "name": "t",
        "queue": {"capacity": {G: 1}},
        "shares": [{"name": "s", "capacity_limits": {G: 1}, "strategy": "LEND"}],
        "jobs": [
            {"id": "j", "share": "s", "instance_type": G, "instances": 1, "submit_at": 0}
            | {"duration": 5}
            | job
        ],
    }


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"grace": -1}, "jobs[0].grace: must be at least 0"),
        ({"grace": 1.5}, "jobs[0].grace: must be a whole number"),
        ({"min_runtime_reclaim": -3}, "jobs[0].min_runtime_reclaim: must be at least 0"),
        ({"min_runtime_preempt": "1"}, "jobs[0].min_runtime_preempt: must be a whole number"),
        ({"checkpoint_on_notice": 0}, "jobs[0].checkpoint_on_notice: must be at least 1"),
        ({"grace": True}, "jobs[0].grace: must be a whole number"),
    ],
)
def test_contract_fields_are_validated(fields, expected):
    with pytest.raises(ScenarioError) as raised:
        load_scenario(_document(**fields))
    assert str(raised.value) == expected


def test_null_contract_fields_are_absent_but_make_a_v2_document():
    scenario = load_scenario(_document(grace=None, checkpoint_on_notice=None))
    job = scenario.jobs[0]
    assert (job.grace, job.min_runtime_reclaim, job.checkpoint_on_notice) == (0, 0, None)
    assert scenario.contracts
    assert not load_scenario(_document()).contracts


def test_contract_problems_is_the_one_range_check_in_the_documents_words():
    assert contract_problems({}) == {}
    assert contract_problems({"grace": None, "checkpoint_on_notice": None}) == {}
    assert contract_problems(
        {
            "checkpoint_on_notice": 0,
            "grace": -1,
            "min_runtime_preempt": True,
            "min_runtime_reclaim": 2**53,
            "notice": 5,
        }
    ) == {
        "min_runtime_reclaim": "must be at most 9007199254740991",
        "min_runtime_preempt": "must be a whole number",
        "grace": "must be at least 0",
        "checkpoint_on_notice": "must be at least 1",
        "notice": "not a contract field (min_runtime_reclaim, min_runtime_preempt, grace, "
        "checkpoint_on_notice)",
    }
    # The format allows notice-less checkpointing (it has no effect): not a range problem.
    assert contract_problems({"grace": 0, "checkpoint_on_notice": 30}) == {}


def test_contract_problems_with_a_products_bound_gives_the_whole_range():
    week = 7 * 24 * 3600
    assert contract_problems({"grace": week, "checkpoint_on_notice": week}, maximum=week) == {}
    assert contract_problems(
        {"grace": week + 1, "checkpoint_on_notice": 0, "min_runtime_reclaim": "60"}, maximum=week
    ) == {
        "min_runtime_reclaim": f"must be a whole number of seconds from 0 to {week}",
        "grace": f"must be a whole number of seconds from 0 to {week}",
        "checkpoint_on_notice": f"must be a whole number of seconds from 1 to {week}",
    }
