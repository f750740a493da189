"""Fixtures of the runner tests: the live scheduler's (the AWS sample queue, `submit`,
real Celery workers), a `process` queue, job definitions of a test's own, and a
checkpoint root the job's account can reach.

As root, jobs run as `nobody` (as a root runner must not run them as root): pytest's
temporary directories are private to root, so the jobs' files live in a directory of
their own, and programs are found on the sandbox's PATH (python3 from /usr/bin when
this interpreter is out of the job's reach).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from scheduler.services.passes import scheduling_pass
from tests.factories import job_definition
from tests.scheduler.live import conftest as live
from tests.scheduler.runner.procs import watched_root

# The live scheduler tests' fixtures, for these tests too.
fast_passwords = live.fast_passwords
real_time_jobs = live.real_time_jobs
clock = live.clock
queue = live.queue
shares = live.shares
submit = live.submit
worker_env = live.worker_env
start_worker = live.start_worker

AS_ROOT = os.geteuid() == 0
JOB_USER = "nobody" if AS_ROOT else ""
TRAIN_SCRIPT = str(django_settings.BASE_DIR / "scheduler" / "examples" / "train.py")


def python(code: str) -> list[str]:
    """A definition's command running Python code (no shell: `-c` and its text)."""
    return ["python3", "-c", code]


def train(steps: int, *, step_seconds: float = 0.1, every: int = 10) -> list[str]:
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
def checkpoints():
    root = Path(tempfile.mkdtemp(prefix="test-runner-"))
    root.chmod(0o711)
    with watched_root(root):
        yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def runner_settings(settings, checkpoints):
    """This process as the runner, with the test workers' short timings."""
    settings.JOB_CHECKPOINT_ROOT = checkpoints
    settings.RUNNER_USER = JOB_USER
    settings.RUNNER_ALLOW_ROOT = False
    settings.JOB_HEARTBEAT_SECONDS = 0.2
    settings.JOB_HEARTBEAT_TIMEOUT = 3
    settings.RUNNER_BEAT_SECONDS = 0.5
    return settings


@pytest.fixture
def definition(process_queue):
    """define(name, argv, **fields): a definition running exactly `argv` (its braces
    escaped: a command's `{name}` is a parameter)."""

    def define(name: str, command: list[str], **fields):
        fields.setdefault("stop_grace_seconds", 1)
        literal = [arg.replace("{", "{{").replace("}", "}}") for arg in command]
        return job_definition(process_queue, name=name, command=literal, **fields)

    return define


@pytest.fixture
def started(process_queue, submit, definition):
    """started(name, command, **definition fields) -> a job whose attempt 1 is RUNNING,
    as a pass leaves it for a runner (after commit, the pass sends it to the runners'
    queue: a test with a worker sees it run)."""

    def start(name: str, command: list[str], *, share: str = "qs2", **fields):
        revision = definition(name, command, **fields)
        job = submit(share, name, revision=revision, at=None, expected_duration=300)
        scheduling_pass(queue_id=process_queue.pk, now=timezone.now())
        job.refresh_from_db()
        assert (job.state, job.attempt) == ("RUNNING", 1)
        return job

    return start


def job_files(root: Path, job_id: int) -> Path:
    return root / f"job-{job_id}"
