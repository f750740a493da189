"""Interactive work has a Celery queue nothing else floods, and passes coalesce.

With real Celery workers on Redis and PostgreSQL: passes go to the `interactive`
queue, so a backlog of background messages does not delay a submission's start; while
no worker takes them, many submissions leave one pass message per job queue, not one
each.
"""

from __future__ import annotations

import time

import pytest

from core.celery import app
from fleet.models import Job, JobEvent
from scheduler.models import QueuePassState
from tests.scheduler.live.conftest import wait_for

LONG = 36_000


def queue_lengths(*names: str) -> dict[str, int]:
    with app.connection_for_write() as connection:
        client = connection.default_channel.client
        return {name: client.llen(name) for name in names}


def test_interactive_work_is_routed_to_its_own_queue():
    route = app.amqp.router.route
    for name in (
        "scheduler.run_pass",
        "governance.whatif.run",
        "governance.exceptions.activate",
        "governance.exceptions.expire",
    ):
        assert route({}, name)["queue"].name == "interactive", name
    for name in (
        "scheduler.tick",
        "scheduler.sweep",
        "governance.exceptions.sweep",
        "governance.dashboard.refresh_rollups",
    ):
        assert route({}, name)["queue"].name == "celery", name
    assert route({}, "scheduler.demo_traffic")["queue"].name == "demo"


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_submissions_coalesce_into_one_waiting_pass(start_worker, queue, submit):
    jobs = [submit("qs1", f"j{n}", expected_duration=LONG, at=None) for n in range(30)]
    # No worker yet: every submission asked for a pass; one message waits.
    assert queue_lengths("interactive")["interactive"] == 1
    assert QueuePassState.objects.get(queue=queue).pass_requested_at is not None

    start_worker(queues="interactive")
    wait_for(
        lambda: Job.objects.filter(pk__in=[j.pk for j in jobs], state="RUNNING").count() == 2,
        what="the one pass to start the jobs that fit",
    )
    wait_for(
        lambda: QueuePassState.objects.get(queue=queue).pass_requested_at is None,
        what="the pass to take the request",
    )
    # A later submission asks for a new pass, which runs.
    late = submit("qs2", "late", expected_duration=LONG, at=None)
    wait_for(lambda: Job.objects.get(pk=late.pk).state == "RUNNING", what="the late job")


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_background_backlog_does_not_delay_a_start(start_worker, queue, submit):
    from scheduler import tasks

    for _ in range(300):  # what a stalled background worker leaves behind
        tasks.sweep.delay()
    start_worker(queues="interactive", name="interactive")
    assert queue_lengths("celery")["celery"] >= 300

    began = time.monotonic()
    job = submit("qs1", "urgent", expected_duration=LONG, at=None)
    wait_for(
        lambda: JobEvent.objects.filter(job=job, type="STARTED").exists(),
        timeout=10,
        interval=0.02,
        what="the job to start",
    )
    assert time.monotonic() - began < 2
    assert queue_lengths("celery")["celery"] >= 300
