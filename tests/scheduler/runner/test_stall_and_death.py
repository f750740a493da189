"""A database stall shorter than the lease stops no run; a runner killed with kill -9
frees its slots in seconds, and its restart under the same name adopts none of them.

Real parts: a Celery runner worker running real training processes on PostgreSQL, the
stall a `LOCK TABLE scheduler_job IN SHARE MODE` (the lock a plain CREATE INDEX takes)
held from a second connection, who is alive read from /proc (`procs.Sampler`). Each
test prints its figures (`pytest -s` shows them).
"""

from __future__ import annotations

import os
import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from fleet.models import Job, JobEvent
from scheduler.models import Runner
from scheduler.services.passes import scheduling_pass
from scheduler.services.runs import jobs_requeue_lost
from tests.scheduler.live.conftest import wait_for
from tests.scheduler.runner.conftest import train
from tests.scheduler.runner.procs import Sampler, processes_of
from tests.scheduler.runner.test_faults import terminate_other_connections

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

RUNNERS_ONLY = "instances.ml.g5.xlarge"
# The runner keeps a process 20 s without renewing its lease (tests/scheduler/runner/
# long_lease_settings.py); with a grace of 5 s the old rule stopped it at 14.8 s.
LONG_LEASE = "tests.scheduler.runner.long_lease_settings"
KEEP_SECONDS = 20
GRACE = 5
STALL_SECONDS = 16


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def second_connection(dbname: str | None = None) -> psycopg.Connection:
    """A connection of the test's own to the test database (or `dbname`), outside
    Django's."""
    db = connection.settings_dict
    return psycopg.connect(
        dbname=dbname or db["NAME"],
        user=db["USER"] or None,
        password=db["PASSWORD"] or None,
        host=db["HOST"] or None,
        port=db["PORT"] or None,
    )


class Sweeper(threading.Thread):
    """The recovery sweep every `JOB_SWEEP_SECONDS`, as beat sends it, in a thread of
    the test (with a connection of its own)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.period = float(settings.JOB_SWEEP_SECONDS)
        self.requeued: list[int] = []
        self.requeued_at: float | None = None  # monotonic, when the first requeue committed
        self.backend_pid: int | None = None
        self.connected = threading.Event()
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.backend_pid = cursor.fetchone()[0]
            self.connected.set()
            while not self._halt.is_set():
                requeued = jobs_requeue_lost(claim_timeout=30)
                if requeued and self.requeued_at is None:
                    self.requeued_at = time.monotonic()
                self.requeued.extend(requeued)
                self._halt.wait(self.period)
        finally:
            connection.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)


@pytest.fixture
def sampler():
    watcher = Sampler()
    watcher.start()
    yield watcher
    watcher.stop()


def two_running(started, runner):
    jobs = [
        started("stall-a", train(100000, step_seconds=0.05), share="qs1", stop_grace_seconds=GRACE),
        started("stall-b", train(100000, step_seconds=0.05), share="qs2", stop_grace_seconds=GRACE),
    ]
    for job in jobs:
        wait_for(
            lambda job=job: fresh(job).worker.endswith(f":{runner.process.pid}")
            and fresh(job).progress >= 5,
            timeout=30,
            what=f"job {job.pk} to run and report",
        )
    return jobs


def test_a_table_lock_shorter_than_the_lease_stops_no_running_job(
    worker_env, start_worker, started, sampler, capsys
):
    worker_env["DJANGO_SETTINGS_MODULE"] = LONG_LEASE
    runner = start_worker(name="stalled", queues=RUNNERS_ONLY)
    jobs = two_running(started, runner)
    pids_before = {job.pk: [p.pid for p in processes_of(job.pk)] for job in jobs}
    assert all(len(pids) == 1 for pids in pids_before.values())

    locker = second_connection()
    locker.execute("LOCK TABLE scheduler_job IN SHARE MODE")
    locked = time.monotonic()
    sampler.mark(f"LOCK TABLE scheduler_job IN SHARE MODE for {STALL_SECONDS} s")
    frozen = {job.pk: fresh(job).heartbeat_at for job in jobs}
    time.sleep(STALL_SECONDS)
    # Still under the lock: no heartbeat got through, and the processes run on.
    assert {job.pk: fresh(job).heartbeat_at for job in jobs} == frozen
    during = {job.pk: [p.pid for p in processes_of(job.pk)] for job in jobs}
    locker.rollback()
    held = time.monotonic() - locked
    locker.close()
    sampler.mark(f"lock released after {held:.1f} s")

    for job in jobs:
        wait_for(
            lambda job=job: fresh(job).heartbeat_at > frozen[job.pk],
            timeout=10,
            what="the heartbeats to get through",
        )
    # The sweep, on the database's clock, finds nothing lost.
    assert jobs_requeue_lost(claim_timeout=KEEP_SECONDS) == []
    time.sleep(1)
    after = {job.pk: [p.pid for p in processes_of(job.pk)] for job in jobs}
    sampler.stop()
    with capsys.disabled():
        print(
            f"\nstall: SHARE lock on scheduler_job held {held:.1f} s "
            f"(lease keeps {KEEP_SECONDS} s, grace {GRACE} s); running jobs: "
            f"{sum(map(len, pids_before.values()))} before, {sum(map(len, during.values()))} "
            f"during, {sum(map(len, after.values()))} after"
        )
        for job in jobs:
            print(sampler.timeline(job.pk, "stall"))
    assert during == pids_before and after == pids_before
    for job in jobs:
        current = fresh(job)
        assert (current.state, current.attempt, current.requeues) == ("RUNNING", 1, 0)
        assert len(sampler.seen(job.pk)) == 1  # one process from start to end
    assert "stopping" not in runner.output()
    assert not JobEvent.objects.filter(job__in=jobs, type="REQUEUED").exists()


def test_kill_9_of_a_runner_frees_its_slots_within_10_s_and_its_restart_adopts_nothing(
    worker_env, start_worker, started, sampler, process_queue, capsys
):
    # Leases of 26 s: only the runner's liveness can free its slots within 10 s.
    worker_env["DJANGO_SETTINGS_MODULE"] = LONG_LEASE
    doomed = start_worker(name="doomed", queues=RUNNERS_ONLY)
    jobs = [
        started("killed-a", train(100000, step_seconds=0.05), share="qs1"),
        started("killed-b", train(100000, step_seconds=0.05), share="qs2"),
    ]
    for job in jobs:
        wait_for(lambda job=job: fresh(job).progress >= 12, timeout=30, what="the runs")
    old_pid = doomed.process.pid
    wait_for(
        lambda: Runner.objects.filter(pid=old_pid, liveness_locked_at__isnull=False).exists(),
        what="the runner to hold its liveness lock",
    )

    sweeper = Sweeper()  # as beat runs it: every JOB_SWEEP_SECONDS
    sweeper.start()
    sampler.mark("kill -9 of the runner")
    killed_at = timezone.now()
    doomed.kill()
    # Restarted at once under the same name (a supervisor would): a new incarnation.
    restarted = start_worker(name="doomed", queues=RUNNERS_ONLY)
    try:
        wait_for(
            lambda: all(fresh(job).state == "RUNNABLE" for job in jobs),
            timeout=30,
            interval=0.05,
            what="the dead runner's slots to be free",
        )
    finally:
        sweeper.stop()
    # When the sweep freed them (the restart above may still have been starting then).
    requeues = JobEvent.objects.filter(job__in=jobs, type="REQUEUED")
    freed_at = max(requeues.values_list("at", flat=True))
    free_after = (freed_at - killed_at).total_seconds()
    requeued = sweeper.requeued
    sweep_every = sweeper.period
    sampler.mark(f"seen free (the sweep freed both {free_after:.1f} s after the kill)")
    processes_gone = [processes_of(job.pk) for job in jobs]

    scheduling_pass(queue_id=process_queue.pk, now=timezone.now())
    for job in jobs:
        wait_for(
            lambda job=job: fresh(job).worker.endswith(f":{restarted.process.pid}")
            and fresh(job).attempt == 2,
            timeout=30,
            what="attempt 2 on the restarted runner",
        )
        wait_for(
            lambda job=job: [p.attempt for p in processes_of(job.pk)] == [2],
            timeout=15,
            what="attempt 2's process",
        )
    sampler.stop()
    with capsys.disabled():
        print(
            f"\nkill -9: both slots free {free_after:.1f} s after the kill "
            f"(sweep every {sweep_every:g} s, RUNNER_DEAD_AFTER_SECONDS "
            f"{settings.RUNNER_DEAD_AFTER_SECONDS:g})"
        )
        for job in jobs:
            print(sampler.timeline(job.pk, "kill -9"))
    assert free_after < 10
    assert sorted(requeued) == sorted(job.pk for job in jobs)
    assert processes_gone == [[], []]  # no process behind a requeued run
    for job in jobs:
        assert sampler.max_live(job.pk) == 1
        assert [p.attempt for p in sampler.seen(job.pk)] == [1, 2]
        event = JobEvent.objects.get(job=job, type="REQUEUED")
        assert (event.cause, event.attempt) == ("worker_lost", 1)
    # The restart is a row of its own; the dead incarnation's stays while a run names it.
    assert restarted.process.pid != old_pid
    names = set(Runner.objects.filter(pid__in=[old_pid, restarted.process.pid]).values_list("name"))
    assert len(names) == 1


def test_a_live_runner_whose_connections_are_terminated_keeps_its_runs_while_sweeps_run(
    start_worker, started, sampler, capsys
):
    runner = start_worker(name="cut-off", queues=RUNNERS_ONLY)
    job = started("cut-off", train(240, step_seconds=0.05))
    wait_for(lambda: fresh(job).progress >= 5, timeout=30, what="the run to report")
    wait_for(
        lambda: Runner.objects.filter(
            pid=runner.process.pid, liveness_locked_at__isnull=False
        ).exists(),
        what="the runner to hold its liveness lock",
    )

    requeued, terminated = [], []
    for _ in range(12):  # its liveness lock is free again and again, for moments
        terminated.append(terminate_other_connections())
        sampler.mark(f"terminated {terminated[-1]} backends")
        for _ in range(2):
            requeued.extend(jobs_requeue_lost(claim_timeout=30))
            time.sleep(0.35)

    done = wait_for(
        lambda: fresh(job).state == "SUCCEEDED" and fresh(job), timeout=40, what="the job"
    )
    sampler.stop()
    with capsys.disabled():
        print("\n" + sampler.timeline(job.pk, "a live runner's connections terminated 12 times"))
    assert all(count >= 1 for count in terminated)
    assert requeued == []
    assert sampler.max_live(job.pk) == 1 and len(sampler.seen(job.pk)) == 1
    assert (done.attempt, done.requeues, done.exit_code) == (1, 0, 0)
    assert "liveness lock lost" in runner.output()


def test_a_runner_cut_off_from_the_database_stops_its_process_before_the_sweep_requeues(
    worker_env, start_worker, started, sampler, capsys
):
    # Long leases: what stops the process here is the unconfirmed liveness lock.
    worker_env["DJANGO_SETTINGS_MODULE"] = LONG_LEASE
    runner = start_worker(name="cut-off", queues=RUNNERS_ONLY)
    job = started("cut-off", train(100000, step_seconds=0.05))
    wait_for(lambda: fresh(job).progress >= 5, timeout=30, what="the run to report")
    wait_for(
        lambda: Runner.objects.filter(
            pid=runner.process.pid, liveness_locked_at__isnull=False
        ).exists(),
        what="the runner to hold its liveness lock",
    )
    name = connection.settings_dict["NAME"]
    # From the database the test one was made from (one cannot lock out one's own).
    admin = second_connection(os.environ["DATABASE_URL"].rpartition("/")[2])
    admin.autocommit = True
    sweeper = Sweeper()
    sweeper.start()
    assert sweeper.connected.wait(10)
    ours = [sweeper.backend_pid]
    try:
        # As if the network failed: no new connection, and the runner's are cut.
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND pid <> ALL(%s)",
                [ours],
            )
            assert cursor.fetchone()[0] >= 1
        cut = time.monotonic()
        sampler.mark("the runner is cut off from the database")
        wait_for(lambda: sweeper.requeued, timeout=30, interval=0.05, what="the requeue")
        requeued_at = sweeper.requeued_at - sampler.started_at
    finally:
        sweeper.stop()
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        admin.close()
    sampler.mark("the sweep requeued the run")
    sampler.stop()
    spans = sampler.spans(job.pk)
    last_alive = max(end for _, end, live in spans if live)
    with capsys.disabled():
        print(
            f"\ncut off: the process stopped {last_alive - (cut - sampler.started_at):.1f} s "
            f"after the cut, the sweep requeued at {requeued_at - (cut - sampler.started_at):.1f} s"
        )
        print(sampler.timeline(job.pk, "runner cut off from the database"))
    assert sweeper.requeued == [job.pk]
    assert last_alive < requeued_at  # no live process behind the requeued run
    runner.log.flush()
    log = runner.log_path.read_text(errors="replace")
    # The runner's own stop, or its watchdog's at the same bound if the runner was late.
    assert "liveness is unconfirmed" in log or "the watchdog fenced" in log
