"""The impact preview of a policy change, or of a change to some jobs, on the current jobs."""

from dataclasses import replace

import pytest

from engine import (
    PendingJob,
    Preempt,
    QueueSpec,
    RunningJob,
    ShareSpec,
    Snapshot,
    Start,
    assess_job_change,
    assess_policy_change,
)

G = "ml.g5.xlarge"


def running(job_id, share, *, seq, priority=0):
    return RunningJob(job_id, share, priority, G, 1, 0, seq)


SHARES = (
    ShareSpec("vision", {G: 4}, "LEND_AND_BORROW"),
    ShareSpec("nlp", {G: 4}, "LEND_AND_BORROW", borrow_limit=50),
    ShareSpec("ops", {G: 4}, "LEND"),
)
SNAPSHOT = Snapshot(
    QueueSpec({G: 12}),
    SHARES,
    running=tuple(running(f"v{i}", "vision", seq=i) for i in range(4)),
    pending=(PendingJob("n-big", "nlp", 0, G, 7, 0),),
)


def kinds(impacts):
    return {(impact.kind, impact.share) for impact in impacts}


def test_lowering_a_limit_makes_running_jobs_reclaimable():
    lowered = (ShareSpec("vision", {G: 2}, "LEND_AND_BORROW"), *SHARES[1:])
    impacts = assess_policy_change(SNAPSHOT, shares=lowered)
    reclaimable = next(i for i in impacts if i.kind == "becomes_reclaimable")
    assert reclaimable.text == (
        "lowering ml.g5.xlarge from 4 to 2 makes 2 running jobs of share vision "
        "reclaimable: other shares can take their ml.g5.xlarge back at any time"
    )
    assert reclaimable.jobs == ("v2", "v3")  # the most recent starts go first
    # nlp's own cap (50 % of 4) still binds, so its borrowing does not change.
    assert all(i.share != "nlp" for i in impacts if i.kind == "borrow_capacity")


def test_lowering_a_lender_shrinks_what_others_can_borrow():
    lowered = (*SHARES[:2], ShareSpec("ops", {G: 1}, "LEND"))
    impacts = assess_policy_change(SNAPSHOT, shares=lowered)
    borrow = [(i.share, i.text) for i in impacts if i.kind == "borrow_capacity"]
    assert borrow == [
        ("vision", "share vision can borrow 3 fewer ml.g5.xlarge (at most 5 beyond its limit)")
    ]


def test_raising_the_borrow_limit_cures_a_misconfigured_job():
    raised = (SHARES[0], ShareSpec("nlp", {G: 4}, "LEND_AND_BORROW", borrow_limit=100), SHARES[2])
    impacts = assess_policy_change(SNAPSHOT, shares=raised)
    assert ("cured", "nlp") in kinds(impacts)
    assert ("would_start", "nlp") in kinds(impacts)


def test_lowering_capacity_would_preempt_now():
    impacts = assess_policy_change(SNAPSHOT, capacity={G: 3})
    preempt = next(i for i in impacts if i.kind == "would_preempt")
    assert preempt.jobs == ("v3",)
    assert "capacity would be below what is running" in preempt.text
    exceed = next(i for i in impacts if i.kind == "limits_exceed_capacity")
    assert exceed.text.startswith("the queue's limits now add up to 12 of 3 ml.g5.xlarge")
    assert ("becomes_misconfigured", "nlp") in kinds(impacts)


def test_an_unchanged_policy_has_no_effect():
    impacts = assess_policy_change(SNAPSHOT, shares=SHARES)
    assert [i.kind for i in impacts] == ["no_effect"]


def test_a_share_with_jobs_cannot_be_dropped():
    with pytest.raises(ValueError, match="share 'vision' still has jobs"):
        assess_policy_change(SNAPSHOT, shares=SHARES[1:])


# A full share that preempts within itself: two running jobs at priority 5, one waiting.
FULL = Snapshot(
    QueueSpec({G: 2}),
    (ShareSpec("a", {G: 2}, "LEND", in_share_preemption=True),),
    running=(running("r1", "a", seq=1, priority=5), running("r2", "a", seq=2, priority=5)),
    pending=(PendingJob("p", "a", 1, G, 1, 10),),
)


def test_raising_a_waiting_jobs_priority_would_preempt_and_start_it():
    made, dropped = assess_job_change(FULL, lambda job: replace(job, priority=9), {"p"}, 20)
    assert made == (Preempt("r2", "priority", "p", fails=False), Start("p", borrowed=False))
    assert dropped == ()


def test_protecting_running_jobs_drops_the_preemption_a_pass_would_make():
    raised = replace(FULL, pending=(PendingJob("p", "a", 9, G, 1, 10),))
    made, dropped = assess_job_change(
        raised, lambda job: replace(job, protected_until=100), {"r1", "r2"}, 20
    )
    assert made == ()
    assert dropped == (Preempt("r2", "priority", "p", fails=False), Start("p", borrowed=False))
