"""The Slurm cluster the tests marked `slurm` run on: SLURM_CONF's (tests/conftest.py
skips them without one, or fails them with REQUIRE_SERVICES=1)."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


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
