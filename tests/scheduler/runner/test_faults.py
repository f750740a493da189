"""Exactly one live process per job, under faults, on real Celery workers.

Faults: the runner's database connections terminated again and again mid-job
(`pg_terminate_backend`), `kill -9` of the runner, a runner frozen (SIGSTOP) past its
lease (its watchdog kills its process by the lease's end), and a run fenced by the
sweep while its runner lives.
Who is alive is read from /proc (`procs.Sampler`: each job's processes carry its
JOB_ID), never from the database; every test asserts at most one live process of the
job at every sample, and prints the sampled timeline (`pytest -s` shows it).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import time

import pytest
from django.db import connection
from django.utils import timezone

from fleet.models import Job, JobEvent
from scheduler.services.jobs import job_terminate
from scheduler.services.runs import jobs_requeue_lost
from tests.scheduler.live.conftest import checkpoint_root, wait_for
from tests.scheduler.runner.conftest import python, train
from tests.scheduler.runner.procs import Sampler, processes_of

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

RUNNERS_ONLY = "instances.ml.g5.xlarge"


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def terminate_other_connections() -> int:
    """Terminate every backend of the test database but this test's own: the runner's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def log_of(worker) -> str:
    worker.log.flush()
    return worker.log_path.read_text(errors="replace")


def claimed_by(worker, job: Job, progress: int = 1):
    def check():
        current = fresh(job)
        mine = current.worker.endswith(f":{worker.process.pid}")
        return mine and current.progress >= progress and current

    return check


def attempt_log(worker_env, job: Job, attempt: int) -> str:
    log = checkpoint_root(worker_env) / f"job-{job.pk}" / f"attempt-{attempt}.log"
    try:
        return log.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def resumed_from(worker_env, job: Job, attempt: int) -> int:
    log = attempt_log(worker_env, job, attempt)
    return int(re.search(rf"attempt {attempt}: starting at step (\d+)", log)[1])


@pytest.fixture
def sampler():
    watcher = Sampler()
    watcher.start()
    yield watcher
    watcher.stop()


def test_terminated_database_connections_never_stop_or_double_the_run(
    start_worker, started, sampler, capsys
):
    runner = start_worker(name="runner")
    job = started("terminated", train(100))
    wait_for(claimed_by(runner, job, progress=5), what="the run to report progress")

    terminated = []
    for _ in range(8):
        terminated.append(terminate_other_connections())
        sampler.mark(f"terminated {terminated[-1]} backends")
        time.sleep(0.7)

    done = wait_for(
        lambda: fresh(job).state == "SUCCEEDED" and fresh(job), timeout=40, what="the job"
    )
    sampler.stop()
    with capsys.disabled():
        print("\n" + sampler.timeline(job.pk, "database connections terminated 8 times"))
    assert all(count >= 1 for count in terminated)
    assert sampler.max_live(job.pk) == 1
    assert len(sampler.seen(job.pk)) == 1  # one process, from first step to last
    assert (done.attempt, done.requeues, done.exit_code) == (1, 0, 0)
    assert "heartbeat failed" in log_of(runner)  # the retries were needed, and sufficed


def test_kill_9_of_the_runner_stops_its_process_and_the_job_resumes_elsewhere(
    start_worker, started, sampler, worker_env, capsys
):
    doomed = start_worker(name="doomed", queues=RUNNERS_ONLY)
    job = started("survivor", train(150))
    wait_for(claimed_by(doomed, job, progress=15), what="the run to pass a checkpoint")

    sampler.mark("kill -9 of the runner")
    killed = time.monotonic()
    doomed.kill()
    wait_for(lambda: processes_of(job.pk) == [], timeout=5, what="the job's process to die")
    gone_after = time.monotonic() - killed
    sampler.mark(f"no process of the job left ({gone_after:.2f} s after the kill)")

    start_worker(name="rescuer")
    requeued = wait_for(
        lambda: jobs_requeue_lost(claim_timeout=3), timeout=15, what="the lease to expire"
    )
    sampler.mark("the sweep requeued the run (lease expired)")
    done = wait_for(
        lambda: fresh(job).state == "SUCCEEDED" and fresh(job), timeout=45, what="the rerun"
    )
    sampler.stop()
    with capsys.disabled():
        print("\n" + sampler.timeline(job.pk, "kill -9 of the runner"))
    assert requeued == [job.pk]
    assert sampler.max_live(job.pk) == 1
    assert [p.attempt for p in sampler.seen(job.pk)] == [1, 2]
    assert gone_after < 2
    assert done.attempt == 2 and done.requeues == 1
    start = resumed_from(worker_env, job, 2)
    assert start >= 10 and start % 10 == 0  # from its checkpoint, not from scratch


def test_kill_9_of_the_runner_also_stops_what_the_jobs_process_started(
    start_worker, started, sampler
):
    with_helpers = (
        "import subprocess, time; "
        "[subprocess.Popen(['sleep', '600']) for _ in range(2)]; time.sleep(600)"
    )
    doomed = start_worker(name="doomed", queues=RUNNERS_ONLY)
    job = started("launcher", python(with_helpers))
    wait_for(lambda: len(processes_of(job.pk)) == 3, timeout=20, what="the helpers to start")
    assert fresh(job).worker.endswith(f":{doomed.process.pid}")

    doomed.kill()

    # PR_SET_PDEATHSIG kills the first process; the runner's watchdog, its group.
    wait_for(lambda: processes_of(job.pk) == [], timeout=5, what="every process of the job")


def test_a_frozen_runners_process_is_fenced_by_its_watchdog_and_attempt_2_resumes(
    start_worker, started, sampler, worker_env, capsys
):
    frozen = start_worker(name="frozen", queues=RUNNERS_ONLY)
    job = started("frozen", train(5000, step_seconds=0.05))  # runs until terminated
    wait_for(claimed_by(frozen, job, progress=12), what="the run to pass a checkpoint")
    rescuer = start_worker(name="rescuer")

    os.kill(frozen.process.pid, signal.SIGSTOP)
    sampler.mark("SIGSTOP to the runner: its process runs on, its lease is not renewed")
    try:
        requeued = wait_for(
            lambda: jobs_requeue_lost(claim_timeout=3), timeout=15, what="the lease to expire"
        )
        sampler.mark("the sweep requeued the run; attempt 2 starts on the rescuer")
        wait_for(
            lambda: "waiting for a previous attempt's processes" in log_of(rescuer),
            timeout=15,
            what="attempt 2 to wait for the checkpoint lock",
        )
        time.sleep(1)
        # The database says attempt 2; the old process is gone (the frozen runner's
        # watchdog killed it by the lease's end), but the frozen runner still holds the
        # checkpoint lock (its own descriptor): attempt 2 waits for it.
        assert processes_of(job.pk) == []
        assert fresh(job).attempt == 2
    finally:
        os.kill(frozen.process.pid, signal.SIGCONT)
    sampler.mark("SIGCONT: the runner finds its process fenced and lets the lock go")

    wait_for(
        lambda: [p.attempt for p in processes_of(job.pk)] == [2] and fresh(job).progress > 0,
        timeout=20,
        what="attempt 2 to start once the old process is gone",
    )
    # The job's progress may still be attempt 1's: wait for the script's own first line
    # (a notice is delivered at once, and could stop it before it printed).
    wait_for(
        lambda: "attempt 2: starting at step" in attempt_log(worker_env, job, 2),
        timeout=10,
        what="attempt 2's script to report where it resumed",
    )
    job_terminate(job_id=job.pk)
    sampler.mark("terminated by a person")
    wait_for(lambda: processes_of(job.pk) == [], timeout=10, what="attempt 2 to stop")
    # Terminated with its grace: FAILED once its runner reported the exit.
    wait_for(lambda: fresh(job).state == "FAILED", timeout=10, what="the termination")
    sampler.stop()
    with capsys.disabled():
        print("\n" + sampler.timeline(job.pk, "runner frozen past its lease"))
    assert requeued == [job.pk]
    assert sampler.max_live(job.pk) == 1
    spans = [(start, end, {p.attempt for p in live}) for start, end, live in sampler.spans(job.pk)]
    last_of_first = max(end for _, end, attempts in spans if attempts == {1})
    first_of_second = min(start for start, _, attempts in spans if attempts == {2})
    assert last_of_first < first_of_second
    assert "the watchdog fenced the process" in log_of(frozen)
    start = resumed_from(worker_env, job, 2)
    assert start >= 10 and start % 10 == 0  # from the checkpoint attempt 1 left
    # Attempt 1, fenced, reported nothing: the only ending is the termination.
    assert list(
        JobEvent.objects.filter(job=job, type="FAILED").values_list("cause", "attempt")
    ) == [("terminated", 2)]


def test_a_run_the_sweep_requeued_is_stopped_by_its_living_runner(start_worker, started, sampler):
    runner = start_worker(name="runner", queues=RUNNERS_ONLY)
    job = started("fenced", train(300))
    wait_for(claimed_by(runner, job, progress=3), what="the run to start")

    def expire_and_sweep():
        past = timezone.now() - dt.timedelta(seconds=1)
        Job.objects.filter(pk=job.pk, state="RUNNING").update(lease_expires_at=past)
        return jobs_requeue_lost(claim_timeout=3)

    # As if the runner had gone silent: the sweep fences attempt 1.
    assert wait_for(expire_and_sweep, timeout=10, what="the sweep") == [job.pk]
    fenced = time.monotonic()

    wait_for(lambda: processes_of(job.pk) == [], timeout=5, what="the runner to stop it")
    assert time.monotonic() - fenced < 3  # its next heartbeat was refused
    assert "the run is over" in log_of(runner)
    requeued = fresh(job)
    # Nobody ran a pass: it waits, and the stopped process reported nothing.
    assert (requeued.state, requeued.exit_code, requeued.attempt) == ("RUNNABLE", None, 1)
    assert sampler.max_live(job.pk) == 1
