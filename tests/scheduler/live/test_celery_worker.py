"""The live scheduler on a real Celery worker process, Redis and PostgreSQL.

Submissions commit, a pass is enqueued after commit, a worker subprocess runs it on
the test database; the test only watches the database. Nothing sleeps a fixed time:
every wait polls with a timeout.
"""

from __future__ import annotations

import pytest

from core.celery import app
from fleet.models import Job, JobEvent
from scheduler import tasks
from scheduler.services.jobs import job_set_priority
from tests.scheduler.live.conftest import wait_for

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

LONG = 36_000  # compute seconds: ten real minutes at 60x, longer than any test


def states(**jobs: Job) -> dict[str, str]:
    return {name: Job.objects.get(pk=job.pk).state for name, job in jobs.items()}


def wait_states(want: dict[str, str], jobs: dict[str, Job], timeout: float = 30):
    def check():
        got = states(**jobs)
        return got if all(got[name] == state for name, state in want.items()) else None

    return wait_for(check, timeout=timeout, what=f"states {want}, last seen {states(**jobs)}")


def everything():
    return (
        list(Job.objects.order_by("pk").values()),
        list(JobEvent.objects.order_by("pk").values()),
    )


def test_borrow_reclaim_and_in_share_preemption_on_a_worker(start_worker, queue, submit):
    start_worker()
    jobs = {
        "high": submit("qs1", "high", priority=3, expected_duration=LONG, at=None),
        "med": submit("qs1", "med", priority=2, expected_duration=LONG, at=None),
    }
    wait_states({"high": "RUNNING", "med": "RUNNING"}, jobs)
    assert JobEvent.objects.get(job=jobs["med"], type="STARTED").borrowed

    jobs["owner"] = submit("qs2", "owner", priority=1, expected_duration=LONG, at=None)
    wait_states({"owner": "RUNNING", "med": "RUNNABLE"}, jobs)
    reclaim = JobEvent.objects.get(job=jobs["med"], type="PREEMPTED")
    assert (reclaim.cause, reclaim.by_id) == ("reclaim", jobs["owner"].pk)

    jobs["low"] = submit("qs1", "low", priority=1, expected_duration=LONG, at=None)
    job_set_priority(job_id=jobs["low"].pk, priority=4)
    wait_states({"low": "RUNNING", "high": "RUNNABLE"}, jobs)
    in_share = JobEvent.objects.get(job=jobs["high"], type="PREEMPTED")
    assert (in_share.cause, in_share.by_id) == ("priority", jobs["low"].pk)


def test_a_pass_delivered_twice_changes_nothing(start_worker, queue, submit):
    start_worker()
    jobs = {
        f"j{n}": submit("qs1", f"j{n}", priority=n, expected_duration=LONG, at=None)
        for n in range(3)
    }
    jobs["owner"] = submit("qs2", "owner", expected_duration=LONG, at=None)
    wait_states({"j2": "RUNNING", "owner": "RUNNING"}, jobs)
    # Let every pass the submissions asked for finish before taking the picture.
    tasks.run_pass.delay(queue.pk).get(timeout=30)
    before = everything()

    first = tasks.run_pass.apply_async((queue.pk,), task_id="same-message")
    second = tasks.run_pass.apply_async((queue.pk,), task_id="same-message")
    first.get(timeout=30), second.get(timeout=30)

    assert everything() == before


def test_passes_started_at_once_never_overcommit(start_worker, queue, submit):
    """Many passes race on four worker threads; the events never put more instances on
    the queue than its capacity, and no job is started twice without a stop between."""
    start_worker(concurrency=4)
    for n in range(12):
        submit(
            ("qs1", "qs2", "qs3")[n % 3],
            f"job-{n}",
            priority=n % 4,
            expected_duration=LONG,
            at=None,
        )
    results = [tasks.run_pass.delay(queue.pk) for _ in range(16)]
    for result in results:
        result.get(timeout=60)

    capacity = 3
    running: set[int] = set()
    used = 0
    instances = dict(Job.objects.values_list("pk", "instances"))
    for event in JobEvent.objects.order_by("at", "pk"):
        if event.type == "STARTED":
            assert event.job_id not in running, f"job {event.job_id} started twice"
            running.add(event.job_id)
            used += instances[event.job_id]
            assert used <= capacity, f"{used} instances in use at {event.at}"
        elif event.type in ("PREEMPTED", "SUCCEEDED", "FAILED") and event.job_id in running:
            running.discard(event.job_id)
            used -= instances[event.job_id]
    assert used == 3
    assert Job.objects.filter(state="RUNNING").count() == 3


def test_a_policy_change_triggers_a_pass(start_worker, queue, submit, shares, admin):
    from fleet.selectors import share_document
    from governance.policy.services import share_data_from_document, share_update

    start_worker()
    big = submit("qs2", "needs-two", instances=2, expected_duration=LONG, at=None)
    wait_for(
        lambda: Job.objects.get(pk=big.pk).reason == "QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
        what="the first pass to find the job too big for its share",
    )
    doc = share_document(shares["qs2"])
    doc["capacity_limits"] = {"ml.g5.xlarge": 2}
    share_update(
        actor=admin,
        share=shares["qs2"],
        data=share_data_from_document(doc),
        reason="qs2 needs two",
        expected_version=shares["qs2"].version,
    )

    wait_states({"big": "RUNNING"}, {"big": big})


def test_the_tick_is_declared_on_the_celery_app():
    schedule = app.conf.beat_schedule
    assert schedule["scheduler-tick"]["task"] == "scheduler.tick"
    assert schedule["scheduler-sweep"]["task"] == "scheduler.sweep"
