"""Short database outages stop no running program; a checkpoint disk that cannot be
written stops the runner taking jobs, and says so.

Real parts: a Celery runner worker running real training processes on PostgreSQL
(Redis the broker); the outage is the database's own: every backend of the test
database terminated while new connections are refused for 2.2 s (what a restart does
to its clients: the tests share one PostgreSQL server, which no test may restart), or
a 30 s `LOCK TABLE` on the job table; the checkpoint root is a real tmpfs of 256 KiB
filled up. Who is alive is read from /proc (`procs.Sampler`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from django.db import connection

from fleet.models import Job, JobEvent
from scheduler.models import Runner
from scheduler.services.runs import jobs_requeue_lost
from tests.scheduler.live.conftest import wait_for
from tests.scheduler.runner.conftest import python
from tests.scheduler.runner.procs import Sampler, processes_of, watched_root
from tests.scheduler.runner.test_stall_and_death import (
    RUNNERS_ONLY,
    second_connection,
    two_running,
)

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

OUTAGE = "tests.scheduler.runner.outage_settings"


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def pids(jobs) -> dict[int, list[int]]:
    return {job.pk: sorted(p.pid for p in processes_of(job.pk)) for job in jobs}


def sweep_quietly() -> list[int]:
    """The sweep as beat runs it; during the outage it fails like any client."""
    try:
        return jobs_requeue_lost(claim_timeout=30)
    except Exception:  # noqa: BLE001 - the database is away
        connection.close()
        return []


@pytest.fixture
def sampler():
    watcher = Sampler(interval=0.05)
    watcher.start()
    yield watcher
    watcher.stop()


def holds_liveness_lock(runner) -> None:
    wait_for(
        lambda: Runner.objects.filter(
            pid=runner.process.pid, liveness_locked_at__isnull=False
        ).exists(),
        what="the runner to hold its liveness lock",
    )


def test_a_2_s_database_restart_stops_no_running_program(
    worker_env, start_worker, started, sampler, capsys
):
    worker_env["DJANGO_SETTINGS_MODULE"] = OUTAGE
    runner = start_worker(name="restarted", queues=RUNNERS_ONLY)
    jobs = two_running(started, runner)
    holds_liveness_lock(runner)
    before = pids(jobs)
    name = connection.settings_dict["NAME"]
    admin = second_connection(os.environ["DATABASE_URL"].rpartition("/")[2])
    admin.autocommit = True
    requeued: list[int] = []
    try:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        cut = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s",
            [name],
        ).fetchone()[0]
        down = time.monotonic()
        sampler.mark(f"database down: {cut} backends terminated, connections refused")
        while time.monotonic() < down + 2.2:
            requeued += sweep_quietly()
            time.sleep(0.2)
    finally:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        admin.close()
    up = time.monotonic()
    sampler.mark("database up")
    connection.close()
    while time.monotonic() < up + 8:  # sweeps as beat sends them, past the liveness bound
        requeued += sweep_quietly()
        time.sleep(0.5)
    after = pids(jobs)
    sampler.stop()
    log = runner.output()
    with capsys.disabled():
        print(
            f"\nrestart: {cut} backends terminated, connections refused {up - down:.1f} s; "
            f"programs before {before}, 8 s after {after}; requeued {requeued}"
        )
        for job in jobs:
            print(sampler.timeline(job.pk, "database restart"))
    assert cut >= 2
    assert after == before and all(len(p) == 1 for p in before.values())
    assert requeued == []
    for job in jobs:
        current = fresh(job)
        assert (current.state, current.attempt, current.requeues) == ("RUNNING", 1, 0)
        assert len(sampler.seen(job.pk)) == 1
    assert "liveness lock lost" in log  # the outage reached the runner
    assert "liveness is unconfirmed" not in log and "stopping" not in log
    assert not JobEvent.objects.filter(job__in=jobs, type="REQUEUED").exists()


def test_a_30_s_lock_on_the_job_table_stops_no_running_program(
    worker_env, start_worker, started, sampler, capsys
):
    worker_env["DJANGO_SETTINGS_MODULE"] = OUTAGE
    runner = start_worker(name="locked", queues=RUNNERS_ONLY)
    jobs = two_running(started, runner)
    before = pids(jobs)
    frozen = {job.pk: fresh(job).heartbeat_at for job in jobs}
    locker = second_connection()
    locker.execute("LOCK TABLE scheduler_job IN ACCESS EXCLUSIVE MODE")
    locked = time.monotonic()
    sampler.mark("LOCK TABLE scheduler_job (ACCESS EXCLUSIVE) for 30 s")
    try:
        time.sleep(30)
        during = pids(jobs)
    finally:
        locker.rollback()
        locker.close()
    held = time.monotonic() - locked
    sampler.mark(f"lock released after {held:.1f} s")
    for job in jobs:
        wait_for(
            lambda job=job: fresh(job).heartbeat_at > frozen[job.pk],
            timeout=10,
            what="the heartbeats to get through",
        )
    requeued = jobs_requeue_lost(claim_timeout=30)
    after = pids(jobs)
    sampler.stop()
    with capsys.disabled():
        print(
            f"\nlock: held {held:.1f} s; programs before {before}, during {during}, after {after}"
        )
    assert during == before and after == before
    assert requeued == []
    for job in jobs:
        assert (fresh(job).state, fresh(job).attempt, fresh(job).requeues) == ("RUNNING", 1, 0)
        assert len(sampler.seen(job.pk)) == 1
    assert "stopping" not in runner.output()


@pytest.fixture
def full_tmpfs():
    """A real tmpfs of 256 KiB as the checkpoint root, filled up: fill() / free()."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    root = Path(tempfile.mkdtemp(prefix="test-full-tmpfs-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0711", "tmpfs", str(root)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        root.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    filler = root / "filler"

    class Disk:
        path = root

        def fill(self) -> None:
            with open(filler, "wb") as handle, contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()

        def free(self) -> None:
            filler.unlink()

    try:
        with watched_root(root):
            yield Disk()
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)


def disk_problems(client) -> list[str]:
    report = client.get("/healthz/").json()
    return [
        problem
        for runner in report["runners"]["problems"]
        for problem in runner["problems"]
        if "checkpoint directory" in problem
    ], report["status"]


def test_a_full_checkpoint_disk_fails_jobs_by_name_and_stops_the_runner_taking_jobs(
    worker_env, start_worker, started, full_tmpfs, client, capsys
):
    worker_env["JOB_CHECKPOINT_ROOT"] = str(full_tmpfs.path)
    full_tmpfs.fill()
    # A run waiting in the broker when the runner starts: it takes it at once.
    first = started("disk-full-1", python("print('trained')"))
    runner = start_worker(name="full-disk", queues=RUNNERS_ONLY)
    wait_for(lambda: disk_problems(client)[0], timeout=15, what="/healthz/ to name the disk")
    # The run it took before its first probe fails by name; if its probe came first it
    # took none (both are right: no program starts on a disk it cannot write).
    time.sleep(2)
    failed = fresh(first)
    event = JobEvent.objects.filter(job=first, type="FAILED").first()
    problems, status = disk_problems(client)
    # No further start on this runner while it cannot write.
    second = started("disk-full-2", python("print('trained')"))
    time.sleep(3)
    waiting = fresh(second)
    full_tmpfs.free()
    freed = time.monotonic()
    done = wait_for(
        lambda: fresh(second).state == "SUCCEEDED" and fresh(second),
        timeout=30,
        what="the second job once the disk has room",
    )
    resumed_after = time.monotonic() - freed
    wait_for(lambda: not disk_problems(client)[0], timeout=15, what="/healthz/ to clear")
    with capsys.disabled():
        print(
            f"\nfull tmpfs: job 1 {failed.state} (worker {failed.worker!r}) "
            f"cause {event.cause if event else None} ({event.detail if event else None}); "
            f"/healthz/ {status} with {problems}; job 2 unclaimed for 3 s "
            f"(worker {waiting.worker!r}), SUCCEEDED {resumed_after:.1f} s after the disk "
            "had room"
        )
    if failed.worker:  # it took the run
        assert failed.state == "FAILED" and event.cause == "checkpoint_disk_full"
        assert failed.reason == "checkpoint_disk_full"
        assert event.detail["reason"].startswith("cannot write the checkpoint directory: ")
        assert "No space left on device" in event.detail["reason"]
    else:
        assert failed.state == "RUNNING" and not processes_of(first.pk)
    assert any("No space left on device" in problem for problem in problems)
    assert status == "degraded" and problems
    assert (waiting.state, waiting.worker) == ("RUNNING", "")
    assert done.worker.endswith(f":{runner.process.pid}") and done.attempt == 1
