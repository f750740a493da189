"""Scheduling passes against the database: decisions become rows, under the queue lock.

The AWS sample queue: three ml.g5.xlarge; qs1 LEND_AND_BORROW (borrow limit 200%,
in-share preemption on), qs2 LEND, qs3 RESERVE; one instance each.
"""

import pytest
from django.db import transaction

from engine.types import SHARE_LIMIT_REACHED
from fleet.models import Job, JobEvent
from scheduler.services import passes
from scheduler.services.jobs import job_set_priority, job_terminate
from scheduler.services.passes import scheduling_pass

pytestmark = pytest.mark.django_db


def state(*jobs):
    return {job.name: Job.objects.get(pk=job.pk).state for job in jobs}


def events(job, *types):
    rows = JobEvent.objects.filter(job=job).order_by("at", "pk")
    if types:
        rows = rows.filter(type__in=types)
    return [(e.type, e.cause, e.by.name if e.by else None, e.borrowed) for e in rows]


def everything():
    """Every job and event row, to show that something changed nothing."""
    return (
        list(Job.objects.order_by("pk").values()),
        list(JobEvent.objects.order_by("pk").values()),
    )


def test_submission_records_a_submitted_event_and_waits_for_a_pass(queue, submit, lead):
    job = submit("qs1", "train", by=lead)

    assert job.state == Job.State.RUNNABLE
    assert events(job) == [("SUBMITTED", "", None, False)]
    assert job.submitted_by == lead


def test_borrow_then_reclaim(queue, submit, clock):
    within = submit("qs1", "within", priority=5)
    borrower = submit("qs1", "borrower", priority=1)
    scheduling_pass(queue_id=queue.pk, now=clock(0))

    assert state(within, borrower) == {"within": "RUNNING", "borrower": "RUNNING"}
    assert events(borrower, "STARTED") == [("STARTED", "", None, True)]
    assert Job.objects.get(pk=borrower.pk).ran_borrowed

    owner = submit("qs2", "owner", at=100)
    outcome = scheduling_pass(queue_id=queue.pk, now=clock(100))

    assert outcome.preempted == [borrower.pk] and outcome.started == [owner.pk]
    assert state(within, borrower, owner) == {
        "within": "RUNNING",
        "borrower": "RUNNABLE",
        "owner": "RUNNING",
    }
    assert events(borrower, "PREEMPTED") == [("PREEMPTED", "reclaim", "owner", False)]
    borrower.refresh_from_db()
    assert borrower.preemptions == 1
    assert borrower.lost_work == 100  # no checkpoint: all 100 s are lost
    assert borrower.reason  # why it waits now


def test_in_share_preemption_after_a_priority_raise(queue, submit, clock):
    high = submit("qs1", "high", priority=3)
    med = submit("qs1", "med", priority=2)
    low = submit("qs1", "low", priority=1)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    submit("qs2", "owner", at=1)
    scheduling_pass(queue_id=queue.pk, now=clock(1))
    assert state(high, med, low) == {"high": "RUNNING", "med": "RUNNABLE", "low": "RUNNABLE"}

    job_set_priority(job_id=low.pk, priority=4, now=clock(2))
    scheduling_pass(queue_id=queue.pk, now=clock(2))

    assert state(high, low) == {"high": "RUNNABLE", "low": "RUNNING"}
    assert events(high, "PREEMPTED") == [("PREEMPTED", "priority", "low", False)]
    change = JobEvent.objects.get(job=low, type=JobEvent.Type.PRIORITY_CHANGED)
    assert change.detail == {"from": 1, "to": 4}


def test_a_second_pass_changes_nothing(queue, submit, clock):
    for n in range(4):
        submit("qs1", f"job-{n}", priority=n)
    submit("qs2", "owner")
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    before = everything()

    outcome = scheduling_pass(queue_id=queue.pk, now=clock(0))

    assert not outcome.changed
    assert everything() == before


def test_a_pass_that_crashes_halfway_leaves_the_database_as_it_was(
    queue, submit, clock, monkeypatch
):
    submit("qs1", "a")
    submit("qs1", "b")
    before = everything()

    def crash(*args, **kwargs):
        raise RuntimeError("worker lost mid-pass")

    # The jobs are updated, then writing the events fails: nothing may remain.
    monkeypatch.setattr(JobEvent.objects, "bulk_create", crash)
    with pytest.raises(RuntimeError):
        scheduling_pass(queue_id=queue.pk, now=clock(0))

    assert everything() == before


def test_reasons_are_recorded_and_only_changed_ones_written(
    queue, submit, clock, django_assert_max_num_queries
):
    submit("qs2", "lender-job")
    waiting = [submit("qs2", f"waiting-{n}") for n in range(30)]
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    head = Job.objects.get(pk=waiting[0].pk)
    assert head.reason == SHARE_LIMIT_REACHED
    assert Job.objects.get(pk=waiting[-1].pk).reason == "BLOCKED_BEHIND_HEAD"

    # A fixed number of queries and one page per share, however long the queue (since
    # spec v2 a pass also reads the STOPPING jobs due to stop and whether any job of
    # the queue has a contract).
    with django_assert_max_num_queries(14 + queue.shares.count()):
        scheduling_pass(queue_id=queue.pk, now=clock(1))


def test_simulated_jobs_finish_on_the_accelerated_clock(queue, submit, clock, settings):
    settings.SIMULATED_SECONDS_PER_SECOND = 60
    job = submit("qs2", "one-hour", expected_duration=3600)
    nxt = submit("qs2", "next", expected_duration=600)
    scheduling_pass(queue_id=queue.pk, now=clock(0))

    scheduling_pass(queue_id=queue.pk, now=clock(59))
    assert state(job) == {"one-hour": "RUNNING"}

    outcome = scheduling_pass(queue_id=queue.pk, now=clock(61))
    assert outcome.finished == [job.pk] and outcome.started == [nxt.pk]
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED
    assert job.finished_at == clock(60)
    assert job.progress == 3600
    assert JobEvent.objects.get(job=job, type="SUCCEEDED").at == clock(60)


def test_restart_resumes_from_the_last_checkpoint_after_its_overhead(
    queue, submit, clock, settings
):
    settings.SIMULATED_SECONDS_PER_SECOND = 1
    borrower = submit(
        "qs1",
        "ckpt",
        priority=1,
        checkpoint_interval=300,
        restart_overhead=50,
        expected_duration=1000,
    )
    submit("qs1", "own", priority=5, expected_duration=10_000)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    submit("qs2", "owner", at=700, expected_duration=500)
    scheduling_pass(queue_id=queue.pk, now=clock(700))
    borrower.refresh_from_db()
    assert (borrower.checkpointed, borrower.lost_work) == (600, 100)

    scheduling_pass(queue_id=queue.pk, now=clock(1200))  # the owner's job ends
    borrower.refresh_from_db()
    assert borrower.state == Job.State.RUNNING and borrower.attempt == 2
    scheduling_pass(queue_id=queue.pk, now=clock(1200 + 50 + 400))
    borrower.refresh_from_db()
    assert borrower.state == Job.State.SUCCEEDED
    assert borrower.restart_overhead_spent == 50
    assert borrower.waiting_time == 500


def test_terminate_frees_the_capacity_for_the_next_pass(queue, submit, clock):
    first = submit("qs2", "first")
    second = submit("qs2", "second")
    scheduling_pass(queue_id=queue.pk, now=clock(0))

    job_terminate(job_id=first.pk, now=clock(10))
    scheduling_pass(queue_id=queue.pk, now=clock(10))

    assert state(first, second) == {"first": "FAILED", "second": "RUNNING"}
    assert events(first, "FAILED") == [("FAILED", "terminated", None, False)]


def test_retries_exhausted_fails_the_job(queue, submit, clock):
    borrower = submit("qs1", "fragile", priority=1, preemption_retries=0)
    submit("qs1", "own", priority=5)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    submit("qs2", "owner", at=5)
    scheduling_pass(queue_id=queue.pk, now=clock(5))

    borrower.refresh_from_db()
    assert borrower.state == Job.State.FAILED and borrower.reason == "retries_exhausted"
    assert [e[0] for e in events(borrower)] == ["SUBMITTED", "STARTED", "PREEMPTED", "FAILED"]


def test_runnable_time_limit_fails_a_job_that_can_never_start(queue, submit, clock):
    queue.runnable_time_limit = 300
    queue.save()
    too_big = submit("qs2", "too-big", instances=5)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    too_big.refresh_from_db()
    assert too_big.reason == "SERVICE_ENVIRONMENT_MAX_RESOURCE"
    assert too_big.misconfigured_since == clock(0)

    scheduling_pass(queue_id=queue.pk, now=clock(299))
    assert state(too_big) == {"too-big": "RUNNABLE"}
    scheduling_pass(queue_id=queue.pk, now=clock(300))
    too_big.refresh_from_db()
    assert (too_big.state, too_big.reason) == ("FAILED", "time_limit")


def test_a_disabled_share_fails_submissions_at_once(queue, shares, submit):
    shares["qs2"].state = "DISABLED"
    shares["qs2"].save()

    job = submit("qs2", "late")

    assert (job.state, job.reason) == ("FAILED", "share_disabled")
    assert [e[:2] for e in events(job)] == [("SUBMITTED", ""), ("FAILED", "share_disabled")]


def test_the_pass_reads_jobs_only_after_locking_the_queue(queue, submit, clock, monkeypatch):
    """The lock is what makes two passes of one queue take turns (see test_celery_worker
    for two real passes racing on PostgreSQL)."""
    submit("qs1", "a")
    calls = []
    lock, read, fed = passes.lock_queue, passes.queue_state, passes.fed_queue_state
    monkeypatch.setattr(passes, "lock_queue", lambda pk: calls.append("lock") or lock(pk))

    def reader(name, function):
        def read_jobs(q, **kwargs):
            calls.append((name, transaction.get_connection().in_atomic_block))
            return function(q, **kwargs)

        return read_jobs

    monkeypatch.setattr(passes, "queue_state", reader("read all", read))
    monkeypatch.setattr(passes, "fed_queue_state", reader("read heads", fed))

    scheduling_pass(queue_id=queue.pk, now=clock(0))
    submit("qs1", "b", at=1)
    scheduling_pass(queue_id=queue.pk, now=clock(1))

    assert calls == ["lock", ("read all", True), "lock", ("read heads", True)]


def test_a_pass_leaves_the_garbage_collector_as_it_found_it(queue, submit, clock):
    import gc

    submit("qs1", "a")
    assert gc.isenabled()
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    assert gc.isenabled()
    gc.disable()
    try:
        scheduling_pass(queue_id=queue.pk, now=clock(1))
        assert not gc.isenabled()
    finally:
        gc.enable()
