"""The `process` executor on a real worker: a job is a subprocess running the example
training script; preemption really stops it (SIGTERM), it resumes from its checkpoint
with less work to do, and a worker killed mid-job gets its job requeued."""

from __future__ import annotations

import re

import pytest
from django.conf import settings

from fleet.models import Job, JobEvent
from scheduler.services.runs import jobs_requeue_lost
from tests.factories import job_definition
from tests.scheduler.live.conftest import checkpoint_root, wait_for

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

TRAIN_SCRIPT = str(settings.BASE_DIR / "scheduler" / "examples" / "train.py")


def train(steps: int, *, step_seconds: float = 0.1, every: int = 10) -> list[str]:
    """The example script by its path: it needs nothing but the standard library, so any
    python3 the job's account may run will do (the sandbox's PATH finds one)."""
    return [
        "python3",
        TRAIN_SCRIPT,
        "--steps",
        str(steps),
        "--step-seconds",
        str(step_seconds),
        "--checkpoint-every",
        str(every),
    ]


@pytest.fixture
def process_queue(queue):
    queue.executor = "process"
    queue.save()
    return queue


@pytest.fixture
def run(process_queue, submit):
    """run(share, name, argv, **fields): submit a job of a definition of its own."""

    def run(share: str, name: str, argv: list[str], **fields):
        revision = job_definition(
            process_queue, name=f"test-{name}", command=argv, stop_grace_seconds=2
        )
        return submit(share, name, revision=revision, at=None, **fields)

    return run


@pytest.fixture
def job_log(worker_env):
    def log(job: Job, attempt: int) -> str:
        path = checkpoint_root(worker_env) / f"job-{job.pk}" / f"attempt-{attempt}.log"
        return path.read_text() if path.exists() else ""

    return log


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_a_job_runs_as_a_subprocess_to_success(start_worker, run, job_log):
    start_worker()
    job = run("qs2", "small", train(10, step_seconds=0.05, every=5), expected_duration=10)

    done = wait_for(
        lambda: fresh(job).state == "SUCCEEDED" and fresh(job), what="the job to succeed"
    )

    assert (done.exit_code, done.progress, done.attempt) == (0, 10, 1)
    assert "done: weight=" in job_log(job, 1)


def test_a_failing_process_ends_failed_with_its_exit_code(start_worker, run):
    start_worker()
    job = run("qs2", "crashes", [*train(10, step_seconds=0.02), "--fail-at", "3"])

    failed = wait_for(lambda: fresh(job).state == "FAILED" and fresh(job), what="the job to fail")

    assert (failed.reason, failed.exit_code) == ("exit_code", 3)
    assert JobEvent.objects.get(job=job, type="FAILED").detail == {"exit_code": 3}


def test_preemption_stops_the_process_and_it_resumes_from_its_checkpoint(
    start_worker, run, job_log
):
    start_worker()
    run("qs1", "own", train(600), priority=5, expected_duration=600)
    borrower = run(
        "qs1", "borrower", train(60), priority=1, expected_duration=60, checkpoint_interval=10
    )
    wait_for(
        lambda: fresh(borrower).progress >= 15, what="the borrower to pass its first checkpoint"
    )

    run("qs2", "owner", train(5, step_seconds=0.05), expected_duration=5)

    wait_for(lambda: fresh(borrower).preemptions == 1, what="the reclaim")
    wait_for(lambda: "SIGTERM at step" in job_log(borrower, 1), what="the process to get SIGTERM")
    # The borrower got notice; it stops when its process has exited, with the figures
    # its status file last reported.
    stopped = wait_for(
        lambda: JobEvent.objects.filter(job=borrower, type="STOPPED").first(), what="the stop"
    )
    preempted = JobEvent.objects.get(job=borrower, type="PREEMPTED")
    assert "grace_until" in preempted.detail and stopped.at >= preempted.at
    resumes_from = stopped.detail["resumes_from"]
    assert resumes_from >= 10 and resumes_from % 10 == 0
    assert stopped.detail["lost_work"] == fresh(borrower).lost_work

    done = wait_for(
        lambda: fresh(borrower).state == "SUCCEEDED" and fresh(borrower),
        timeout=60,
        what="the borrower to restart and finish",
    )
    assert done.attempt == 2 and done.exit_code == 0
    # From the checkpoint its first attempt reported last.
    started_at = int(re.search(r"attempt 2: starting at step (\d+)", job_log(borrower, 2))[1])
    assert started_at == resumes_from


def test_a_job_of_a_killed_worker_is_requeued_and_finishes_elsewhere(
    start_worker, run, process_queue, job_log
):
    first = start_worker(name="doomed")
    job = run("qs2", "survivor", train(30), expected_duration=30, checkpoint_interval=10)
    wait_for(lambda: fresh(job).progress >= 12, what="the job to pass a checkpoint")

    first.kill()  # SIGKILL: no goodbye, no exit report; the job process dies with it

    requeued = wait_for(
        lambda: jobs_requeue_lost(claim_timeout=3),
        timeout=30,
        what="the sweep to see the lease expire",
    )
    assert requeued == [job.pk]
    lost = fresh(job)
    assert (lost.state, lost.requeues, lost.preemptions) == ("RUNNABLE", 1, 0)
    assert JobEvent.objects.filter(job=job, type="REQUEUED", cause="worker_lost").count() == 1

    start_worker(name="rescuer")
    from scheduler.tasks import run_pass

    run_pass.delay(process_queue.pk)
    done = wait_for(
        lambda: fresh(job).state == "SUCCEEDED" and fresh(job), timeout=60, what="the rerun"
    )
    assert done.attempt == 2
    assert "attempt 2: starting at step 10" in job_log(job, 2) or "starting at step 20" in job_log(
        job, 2
    )
