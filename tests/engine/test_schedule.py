"""`schedule(snapshot, now)`: the live scheduler's entry point, decisions and reasons."""

from engine import (
    Fail,
    PendingJob,
    Preempt,
    QueueSpec,
    RunningJob,
    ShareSpec,
    Snapshot,
    Start,
    schedule,
)

G = "ml.g5.xlarge"


def running(job_id, share, *, priority=0, n=1, started_at=0, seq=0, **extra):
    return RunningJob(job_id, share, priority, G, n, started_at, seq, **extra)


def pending(job_id, share, *, priority=0, n=1, submitted_at=0, **extra):
    return PendingJob(job_id, share, priority, G, n, submitted_at, **extra)


SHARES = (
    ShareSpec("lender", {G: 2}, "LEND"),
    ShareSpec("borrower", {G: 1}, "LEND_AND_BORROW", borrow_limit=100),
)


def test_reclaim_decisions_come_before_the_start_they_make_room_for():
    snapshot = Snapshot(
        QueueSpec({G: 3}),
        SHARES,
        running=(
            running("b1", "borrower"),
            running("b2", "borrower", seq=1, started_at=5),
            running("l1", "lender", seq=2),
        ),
        pending=(pending("l2", "lender", submitted_at=10),),
    )
    result = schedule(snapshot, 20)
    assert result.decisions == (
        Preempt("b2", "reclaim", "l2", fails=False),
        Start("l2", borrowed=False),
    )
    assert result.reasons == {"b2": "WAITING_FOR_CAPACITY"}


def test_a_spent_retry_bound_fails_the_victim():
    snapshot = Snapshot(
        QueueSpec({G: 3}),
        SHARES,
        running=(
            running("b1", "borrower"),
            running("b2", "borrower", seq=1, preemption_retries=0),
            running("l1", "lender", seq=2),
        ),
        pending=(pending("l2", "lender"),),
    )
    assert schedule(snapshot, 1).decisions[0] == Preempt("b2", "reclaim", "l2", fails=True)


def test_reasons_for_every_pending_job():
    shares = (ShareSpec("a", {G: 2}, "LEND"), ShareSpec("b", {G: 2}, "LEND"))
    snapshot = Snapshot(
        QueueSpec({G: 3}),
        shares,
        running=(running("a1", "a", n=2), running("b0", "b", n=1, seq=1)),
        pending=(
            pending("a-big", "a", n=3),
            pending("a-huge", "a", n=5),
            pending("a-next", "a", priority=5),
            pending("a-last", "a"),
            pending("b1", "b", n=1, submitted_at=5),
        ),
    )
    result = schedule(snapshot, 0)
    assert result.decisions == ()
    assert result.reasons == {
        "a-big": "QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
        "a-huge": "SERVICE_ENVIRONMENT_MAX_RESOURCE",
        "a-next": "SHARE_LIMIT_REACHED",
        "a-last": "BLOCKED_BEHIND_HEAD",
        "b1": "WAITING_FOR_CAPACITY",
    }


def test_capacity_below_use_preempts_even_protected_jobs_first():
    shares = (ShareSpec("a", {G: 2}, "LEND"),)
    snapshot = Snapshot(
        QueueSpec({G: 1}),
        shares,
        running=(running("a1", "a", protected_until=100), running("a2", "a", priority=5, seq=1)),
    )
    result = schedule(snapshot, 10)
    assert result.decisions == (Preempt("a1", "capacity_change", None, fails=False),)


def test_misconfigured_jobs_fail_after_the_runnable_time_limit():
    queue = QueueSpec({G: 1}, runnable_time_limit=60)
    snapshot = Snapshot(
        queue,
        (ShareSpec("a", {G: 1}, "LEND"),),
        pending=(
            pending("old", "a", n=2, misconfigured_since=0),
            pending("new", "a", n=2, misconfigured_since=30),
            pending("unknown", "a", n=2),
        ),
    )
    result = schedule(snapshot, 60)
    assert result.decisions == (Fail("old", "time_limit"),)
    assert set(result.reasons) == {"new", "unknown"}


def test_in_share_preemption_respects_protection_and_priority():
    shares = (ShareSpec("a", {G: 2}, "LEND", in_share_preemption=True),)
    snapshot = Snapshot(
        QueueSpec({G: 2}),
        shares,
        running=(
            running("low-protected", "a", priority=0, protected_until=50),
            running("same", "a", priority=3, seq=1),
        ),
        pending=(pending("hi", "a", priority=3),),
    )
    assert schedule(snapshot, 10).decisions == ()
    assert schedule(snapshot, 50).decisions == (
        Preempt("low-protected", "priority", "hi", fails=False),
        Start("hi", borrowed=False),
    )


def test_snapshot_and_specs_are_frozen_and_hashable():
    share = ShareSpec("a", {G: 1}, "LEND")
    assert hash(share) == hash(ShareSpec("a", {G: 1}, "LEND"))
    assert share.capacity_limits == {G: 1}
    snapshot = Snapshot(QueueSpec({G: 1}), [share])
    assert isinstance(snapshot.shares, tuple)
    assert hash(snapshot)


def test_a_preempted_job_rejoins_its_queue_at_its_submission_time():
    """A pass victim queues by when it was submitted, not when it last started."""
    from engine import PendingJob, QueueSpec, RunningJob, ShareSpec, Snapshot, schedule

    snapshot = Snapshot(
        queue=QueueSpec(capacity={"gpu": 1}),
        shares=(
            ShareSpec(
                name="a", capacity_limits={"gpu": 1}, strategy="LEND", in_share_preemption=True
            ),
        ),
        running=(
            RunningJob(
                id="r",
                share="a",
                priority=1,
                instance_type="gpu",
                instances=1,
                started_at=10,
                start_seq=1,
                submitted_at=0,
            ),
        ),
        pending=(
            PendingJob(
                id="q", share="a", priority=1, instance_type="gpu", instances=1, submitted_at=3
            ),
            PendingJob(
                id="p", share="a", priority=5, instance_type="gpu", instances=1, submitted_at=5
            ),
        ),
    )
    result = schedule(snapshot, 20)
    assert [type(d).__name__ + ":" + d.job for d in result.decisions] == ["Preempt:r", "Start:p"]
    assert result.reasons["q"] == "BLOCKED_BEHIND_HEAD"
    assert result.reasons["r"] != "BLOCKED_BEHIND_HEAD"


def test_a_reclaim_victim_blocks_the_smaller_job_behind_it():
    """v1.1: the victim is its share's head again at once, so b3 does not take the instance
    the reclaim left over, in this pass or the next."""
    shares = (ShareSpec("a", {G: 2}, "LEND"), ShareSpec("b", {G: 2}, "LEND_AND_BORROW"))
    snapshot = Snapshot(
        QueueSpec({G: 4}),
        shares,
        running=(
            running("b1", "b", priority=5, n=2, seq=0),
            running("b2", "b", priority=1, n=2, seq=1),
        ),
        pending=(pending("b3", "b", n=1), pending("a1", "a", submitted_at=10)),
    )
    result = schedule(snapshot, 10)
    assert result.decisions == (
        Preempt("b2", "reclaim", "a1", fails=False),
        Start("a1", borrowed=False),
    )
    assert result.reasons == {"b2": "WAITING_FOR_CAPACITY", "b3": "BLOCKED_BEHIND_HEAD"}


def test_reserved_idle_is_held_for_a_start_within_a_limit_in_the_borrowing_phase():
    shares = (ShareSpec("x", {G: 4}, "LEND_AND_BORROW"), ShareSpec("r", {G: 1}, "RESERVE"))
    snapshot = Snapshot(QueueSpec({G: 4}), shares, pending=(pending("x1", "x", n=4),))
    result = schedule(snapshot, 0)
    assert result.decisions == ()
    assert result.reasons == {"x1": "WAITING_FOR_CAPACITY"}
