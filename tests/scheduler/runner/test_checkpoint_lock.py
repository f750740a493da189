"""Two attempts never use one checkpoint directory at once, whatever the database says.

The runner flocks the job's lock file before starting the process and the process
inherits the lock. Here a separate process holds that lock, as an older attempt's
process would (its runner frozen or dead, the sweep having requeued the run): the new
attempt waits for it, and gives the job back if it outlives the wait.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from fleet.models import Job, JobEvent
from scheduler.executors.process.run import run_job
from scheduler.executors.run_area import RunArea
from tests.scheduler.runner.conftest import job_files, python

pytestmark = pytest.mark.django_db

HOLD = (
    "import fcntl, sys, time; lock = open(sys.argv[1], 'a'); fcntl.flock(lock, fcntl.LOCK_EX); "
    "print('held', flush=True); time.sleep(float(sys.argv[2])); "
    "print(time.time(), flush=True)"
)
STARTED_AT = """
import json, os, time
started = time.time()
lock = os.path.join(os.path.dirname(os.environ['JOB_CHECKPOINT_DIR']), 'lock')
held = []
for fd in os.listdir('/proc/self/fd'):
    try:
        held.append(os.readlink('/proc/self/fd/' + fd))
    except OSError:  # the directory listing's own descriptor, closed by now
        pass
with open(os.path.join(os.environ['JOB_CHECKPOINT_DIR'], 'started.json'), 'w') as out:
    json.dump({'at': started, 'holds_lock': lock in held}, out)
"""


def hold_lock(job: Job, seconds: float) -> subprocess.Popen:
    """A process holding the job's lock for `seconds`, then printing when it let go."""
    paths = RunArea.of(job.pk, 1)
    paths.area.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(paths.lock), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_new_attempt_waits_until_the_old_attempts_process_is_gone(
    runner_settings, started, checkpoints
):
    job = started("waits", python(STARTED_AT))
    holder = hold_lock(job, 1.5)

    assert run_job(job.pk, 1) == "exited 0"

    released_at = float(holder.stdout.readline())
    holder.wait(timeout=5)
    started_run = json.loads(
        (job_files(checkpoints, job.pk) / "checkpoint" / "started.json").read_text()
    )
    assert started_run["at"] >= released_at
    assert started_run["holds_lock"]  # the process itself holds it, as long as it lives
    assert Job.objects.get(pk=job.pk).state == "SUCCEEDED"


@pytest.mark.slow
def test_an_attempt_gives_the_job_back_when_the_old_process_outlives_the_wait(
    runner_settings, started, checkpoints
):
    job = started("busy", python(STARTED_AT))
    holder = hold_lock(job, 30)
    try:
        began = time.monotonic()
        assert run_job(job.pk, 1) == "busy"
        # The lease (3 s) and the grace (1 s): the longest an older runner may take.
        assert 4 <= time.monotonic() - began < 10
    finally:
        holder.kill()
        holder.wait()

    requeued = Job.objects.get(pk=job.pk)
    assert (requeued.state, requeued.requeues) == ("RUNNABLE", 1)
    assert JobEvent.objects.get(job=job, type="REQUEUED").cause == "checkpoint_busy"
    assert not (job_files(checkpoints, job.pk) / "checkpoint" / "started.json").exists()
