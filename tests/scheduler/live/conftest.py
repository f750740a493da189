"""Fixtures of the live scheduler tests: the AWS sample queue, a lead of its teams, and
a `submit` helper; time is passed explicitly (`clock`) so nothing sleeps."""

from __future__ import annotations

import datetime as dt
import hashlib
import shlex
from pathlib import Path

import pytest

from fleet.models import InstanceType, QuotaShare
from scheduler.services.jobs import JobData, job_submit
from tests.factories import job_definition

T0 = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def real_time_jobs(settings):
    """Simulated jobs progress one compute second per second unless a test says otherwise."""
    settings.SIMULATED_SECONDS_PER_SECOND = 1


@pytest.fixture
def clock():
    """clock(t) -> T0 + t seconds."""
    return lambda seconds=0: T0 + dt.timedelta(seconds=seconds)


@pytest.fixture
def queue(aws_queue):
    return aws_queue


@pytest.fixture
def shares(queue) -> dict[str, QuotaShare]:
    return {share.name: share for share in queue.shares.select_related("queue", "team")}


@pytest.fixture
def lead(team_lead, shares):
    """A team lead of qs1's and qs2's teams (not qs3's)."""
    shares["qs1"].team.leads.add(team_lead)
    shares["qs2"].team.leads.add(team_lead)
    return team_lead


def command_definition(queue, command: str):
    """A definition of its own for a test's command line: its argument vector is the
    split line, with no parameters (the runner's tests choose their own arguments)."""
    argv = shlex.split(command)
    digest = hashlib.sha256("\0".join(argv).encode()).hexdigest()[:12]
    return job_definition(queue, name=f"command-{digest}", command=argv)


@pytest.fixture
def submit(queue, shares, clock):
    def submit(
        share: str,
        name: str,
        *,
        at: int | None = 0,
        by=None,
        command: str | None = None,
        revision=None,
        **fields,
    ):
        """Submit at T0 + `at` seconds, or at the real current time when `at` is None.

        The job runs `revision`, or the definition of `command`, or one that models
        work only.
        """
        fields.setdefault("expected_duration", 3600)
        fields.setdefault("instance_type", InstanceType.objects.get(name="ml.g5.xlarge"))
        if revision is None:
            revision = command_definition(queue, command) if command else job_definition(queue)
        data = JobData(share=shares[share], name=name, revision=revision, **fields)
        return job_submit(data=data, submitted_by=by, now=None if at is None else clock(at))

    return submit


# Real Celery workers (integration tests marked `redis` and `postgres`).


def wait_for(predicate, *, timeout: float = 30, interval: float = 0.1, what: str = "condition"):
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}", pytrace=False)
        time.sleep(interval)


class Worker:
    """A `celery -A config worker` subprocess on the test database."""

    def __init__(self, *, queues: str, tmp_path, name: str, concurrency: int = 4):
        self.queues = queues
        self.name = name
        self.concurrency = concurrency
        self.log_path = tmp_path / f"{name}.log"
        self.process = None

    def start(self, env: dict) -> Worker:
        import subprocess
        import sys

        from django.conf import settings

        self.log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--loglevel=INFO",
                f"--queues={self.queues}",
                "--pool=threads",
                f"--concurrency={self.concurrency}",
                f"--hostname={self.name}@%h",
                "--without-gossip",
                "--without-mingle",
            ],
            env=env,
            cwd=settings.BASE_DIR,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed with its job processes
        )
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        import socket

        from core.celery import app

        node = f"{self.name}@{socket.gethostname()}"

        def ready():
            if self.process.poll() is not None:
                pytest.fail(f"worker {self.name} exited:\n{self.output()}", pytrace=False)
            return app.control.ping(destination=[node], timeout=0.5)

        wait_for(ready, timeout=timeout, interval=0.2, what=f"worker {self.name} to start")

    def kill(self, sig=None) -> None:
        import os
        import signal
        import subprocess

        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, sig or signal.SIGKILL)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)

    def stop(self) -> None:
        self.kill()
        self.log.close()

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-5000:]


@pytest.fixture
def worker_env(transactional_db, tmp_path):
    """The environment of a worker on this test's database (pytest-django's test_…).

    As root, the worker runs jobs as `nobody` (a root runner refuses to run them as
    root), under a checkpoint root that account can reach: pytest's are private.
    """
    import os
    import shutil
    import tempfile

    from django.db import connection

    from core.celery import app

    url = os.environ["DATABASE_URL"]
    base, _, _ = url.rpartition("/")
    app.control.purge()  # no message of an earlier test reaches this one's worker
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/{connection.settings_dict['NAME']}",
        "DJANGO_SETTINGS_MODULE": "tests.scheduler.live.worker_settings",
        "DJANGO_SECURE": "0",
        "VAR_DIR": str(tmp_path / "var"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(_root()), os.environ.get("PYTHONPATH")])),
    }
    checkpoints = None
    if os.geteuid() == 0:
        checkpoints = tempfile.mkdtemp(prefix="test-checkpoints-")
        os.chmod(checkpoints, 0o711)
        env.update(RUNNER_USER="nobody", JOB_CHECKPOINT_ROOT=checkpoints)
    from tests.scheduler.runner.procs import watched_root

    with watched_root(checkpoint_root(env)):
        yield env
    if checkpoints is not None:
        shutil.rmtree(checkpoints, ignore_errors=True)


def checkpoint_root(worker_env) -> Path:
    """Where the workers of `worker_env` keep the jobs' files."""
    root = worker_env.get("JOB_CHECKPOINT_ROOT")
    return Path(root) if root else Path(worker_env["VAR_DIR"]) / "checkpoints"


def _root():
    from django.conf import settings

    return settings.BASE_DIR


@pytest.fixture
def start_worker(worker_env, tmp_path):
    """start_worker(queues=..., name=...) -> a ready Worker; every one is killed at teardown."""
    workers: list[Worker] = []

    def start(
        *,
        queues: str = "interactive,celery,executor.slurm,instances.ml.g5.xlarge",
        name: str = "w1",
        **kwargs,
    ):
        worker = Worker(queues=queues, tmp_path=tmp_path, name=name, **kwargs).start(worker_env)
        workers.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in workers:
        worker.stop()
