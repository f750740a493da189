"""How a run ended is the runner's record, on the database's clock.

- A runner whose clock is 60 s off reports an end: the end and its event are the
  database's time, never before the start (the skew is this process's own, as in
  test_clock_skew: the services run here as a runner's thread runs them).
- The sweep, before it requeues a lost run, reads the run's exit record in the run
  area (real files): a program that ended is recorded as it ended, never run again;
  without a record the run is requeued.
"""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from fleet.models import Job, JobEvent
from scheduler.executors.run_area import RunArea, write_exit_record
from scheduler.liveness import database_now
from scheduler.services.passes import scheduling_pass
from scheduler.services.runs import job_claim_run, job_process_exited, jobs_requeue_lost
from tests.scheduler.runner.test_clock_skew import skew  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(process_queue, submit, runner_settings):
    def start(name: str) -> Job:
        job = submit("qs1", name, command="python3 -m train", at=None)
        scheduling_pass(queue_id=process_queue.pk, now=timezone.now())
        job.refresh_from_db()
        assert job.state == Job.State.RUNNING
        return job

    return start


@pytest.mark.parametrize("seconds", [-60, +60])
def test_a_runner_60_s_off_reports_an_end_on_the_database_clock(running, skew, seconds):  # noqa: F811
    job = running("skewed")
    skew(seconds)
    token = job_claim_run(job_id=job.pk, attempt=1, worker="gpu-1:7", lease_seconds=30)
    assert job_process_exited(job_id=job.pk, attempt=1, lease_token=token, exit_code=0)
    skew(0)
    job.refresh_from_db()
    event = JobEvent.objects.get(job=job, type="SUCCEEDED")
    truth = database_now()
    print(f"\nrunner {seconds:+d} s: started {job.started_at}, finished {job.finished_at}")
    assert job.state == Job.State.SUCCEEDED
    assert job.finished_at >= job.started_at
    assert abs((truth - job.finished_at).total_seconds()) < 5  # the database's time
    assert event.at == job.finished_at


def test_the_sweep_ends_a_lost_run_as_its_exit_record_says_instead_of_rerunning_it(running):
    ended = running("ended")
    lost = running("lost")
    for job in (ended, lost):
        assert job_claim_run(job_id=job.pk, attempt=1, worker="gpu-1:7", lease_seconds=0.2)
    area = RunArea.of(ended.pk, 1)
    area.area.mkdir(parents=True)
    time.sleep(0.1)
    end = database_now()  # after the start, before the sweep
    write_exit_record(
        area.exit,
        {"attempt": 1, "exit_code": 0, "ended_at": end.timestamp(), "progress": 40},
    )
    time.sleep(0.5)  # both leases expire

    assert jobs_requeue_lost(claim_timeout=30) == [lost.pk]

    ended.refresh_from_db()
    lost.refresh_from_db()
    assert (ended.state, ended.attempt, ended.requeues, ended.exit_code) == (
        Job.State.SUCCEEDED,
        1,
        0,
        0,
    )
    assert ended.finished_at >= ended.started_at
    assert abs((ended.finished_at - end).total_seconds()) < 0.01
    assert not JobEvent.objects.filter(job=ended, type="REQUEUED").exists()
    assert (lost.state, lost.requeues) == (Job.State.RUNNABLE, 1)


def test_an_exit_record_of_a_failure_fails_the_lost_run_with_its_code(running):
    job = running("failed")
    assert job_claim_run(job_id=job.pk, attempt=1, worker="gpu-1:7", lease_seconds=0.2)
    area = RunArea.of(job.pk, 1)
    area.area.mkdir(parents=True)
    write_exit_record(area.exit, {"attempt": 1, "exit_code": 3, "ended_at": time.time()})
    time.sleep(0.5)
    assert jobs_requeue_lost(claim_timeout=30) == []
    job.refresh_from_db()
    assert (job.state, job.exit_code, job.requeues) == (Job.State.FAILED, 3, 0)
    event = JobEvent.objects.get(job=job, type="FAILED")
    assert (event.cause, event.detail) == ("exit_code", {"exit_code": 3})
