"""The Slurm cluster the tests marked `slurm` run on: SLURM_CONF's (tests/conftest.py
skips them without one, or fails them with REQUIRE_SERVICES=1)."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from django.utils import timezone

from fleet.models import InstanceType, Job
from scheduler.executors.slurm import binding as slurm_binding
from scheduler.executors.slurm import services as service
from scheduler.services.passes import scheduling_pass
from tests.scheduler.live import conftest as live
from tests.scheduler.runner.conftest import TRAIN_SCRIPT


class Cluster:
    """SLURM_CONF's cluster, driven with its own commands (argument lists, timeouts)."""

    def __init__(self, conf: str):
        self.conf = conf
        self.env = {**os.environ, "SLURM_CONF": conf}

    def run(self, *argv: str, timeout: float = 20) -> str:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=self.env, check=False
        )
        assert done.returncode == 0, f"{argv}: {done.stderr.strip()}"
        return done.stdout

    def job_field(self, job_id: str, field: str) -> str:
        """One field of `scontrol show job` (JobState, NodeList, ExitCode, ...)."""
        for word in self.run("scontrol", "--oneliner", "show", "job", job_id).split():
            key, _, value = word.partition("=")
            if key == field:
                return value
        raise KeyError(field)

    def wait_state(self, job_id: str, states: set[str], timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.job_field(job_id, "JobState")
            if state in states:
                return state
            time.sleep(0.1)
        raise AssertionError(f"Slurm job {job_id} is {state}, not {sorted(states)}")


@pytest.fixture
def slurm_cluster() -> Cluster:
    return Cluster(os.environ["SLURM_CONF"])


# As root (CI), the jobs run as an unprivileged account, as a deployment's do.
JOB_USER = "nobody" if os.geteuid() == 0 else ""


@pytest.fixture
def slurm_settings(settings, slurm_cluster):
    """The jobs' files under a directory of this test's own that the job's account may
    traverse (the nodes are this host), the jobs run as JOB_USER, and a name prefix of
    this test's own, so the reconciliation touches no other Slurm job; whatever of it is
    left in Slurm is cancelled at the end."""
    root = Path(tempfile.mkdtemp(prefix="test-slurm-"))
    root.chmod(0o711)
    settings.JOB_CHECKPOINT_ROOT = root / "checkpoints"
    settings.SLURM_JOB_USER = JOB_USER
    settings.SLURM_ALLOW_ROOT = False
    settings.SLURM_JOB_PREFIX = f"gpuqtest{os.getpid()}x{time.monotonic_ns() % 10**6}"
    settings.SLURM_SUBMIT_STALE_SECONDS = 1
    yield settings
    names = slurm_cluster.run("squeue", "--noheader", "--states=all", "--format=%i %j")
    for line in names.splitlines():
        job_id, _, name = line.strip().partition(" ")
        if name.startswith(settings.SLURM_JOB_PREFIX + "-"):
            subprocess.run(["scancel", job_id], env=slurm_cluster.env, check=False, timeout=20)
    shutil.rmtree(root, ignore_errors=True)


# The live scheduler's fixtures (a queue with its shares, submissions, a real-time
# clock), the Slurm queue bound to SLURM_CONF's cluster and `start`, for every test
# here; and the helpers the tests share (`from tests.scheduler.slurm.conftest import`).
fast_passwords = live.fast_passwords
real_time_jobs = live.real_time_jobs
clock = live.clock
queue = live.queue
shares = live.shares
submit = live.submit


def train(steps: int, *, step_seconds: float, every: int, on_sigterm: bool = False) -> list[str]:
    argv = ["python3", TRAIN_SCRIPT, "--steps", str(steps), "--step-seconds", str(step_seconds)]
    argv += ["--checkpoint-every", str(every)]
    return [*argv, "--checkpoint-on-sigterm"] if on_sigterm else argv


@pytest.fixture
def slurm_queue(queue, slurm_cluster, slurm_settings):
    queue.executor = "slurm"
    queue.save()
    slurm_binding.queue_bind_slurm(queue=queue, conf=slurm_cluster.conf, partition="gpu")
    slurm_binding.instance_type_set_slurm_resources(
        instance_type=InstanceType.objects.get(name="ml.g5.xlarge"), resources=["--gres=gpu:1"]
    )
    return queue


@pytest.fixture
def start(slurm_queue, submit):
    """start(share, name, argv, **fields) -> the job, submitted and passed (STARTING or
    waiting), and what the pass decided."""
    from tests.factories import job_definition

    def start(share: str, name: str, argv: list[str], *, grace: int = 5, **fields):
        literal = [arg.replace("{", "{{").replace("}", "}}") for arg in argv]
        revision = job_definition(
            slurm_queue, name=name, command=literal, stop_grace_seconds=grace, network=True
        )
        job = submit(share, name, revision=revision, at=None, expected_duration=60, **fields)
        outcome = scheduling_pass(queue_id=slurm_queue.pk, now=timezone.now())
        job.refresh_from_db()
        return job, outcome

    return start


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def settle(predicate, *, timeout: float = 60, what: str):
    """Reconcile every 50 ms until `predicate()` holds; what it returned."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service.slurm_reconcile()
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:g} s: {what}")


def submitted(job: Job) -> str:
    done = service.slurm_submit_run(job_id=job.pk, attempt=fresh(job).attempt)
    assert done.startswith("submitted"), done
    return done.split()[1]
