"""A deploy stops a runner with SIGTERM: its job's process gets SIGTERM and its
definition's grace to checkpoint, and only then is the job given back, with that
checkpoint (the example script's `--checkpoint-on-sigterm`)."""

from __future__ import annotations

import json
import signal

import pytest

from fleet.models import Job, JobEvent
from tests.scheduler.live.conftest import checkpoint_root, wait_for
from tests.scheduler.runner.conftest import train
from tests.scheduler.runner.procs import processes_of

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_a_stopped_runner_gives_its_job_back_with_the_checkpoint_made_on_sigterm(
    worker_env, start_worker, started
):
    runner = start_worker(name="runner", queues="instances.ml.g5.xlarge")
    # No periodic checkpoint before step 1000: whatever is saved was saved on SIGTERM.
    job = started("deployed", [*train(5000, every=1000), "--checkpoint-on-sigterm"])
    wait_for(lambda: fresh(job).progress >= 5, what="the run to make progress")

    runner.process.send_signal(signal.SIGTERM)  # what `docker compose stop` sends

    back = wait_for(lambda: fresh(job).state == "RUNNABLE" and fresh(job), timeout=30, what="it")
    assert runner.process.wait(timeout=30) == 0
    assert processes_of(job.pk) == []
    assert JobEvent.objects.get(job=job, type="REQUEUED").cause == "runner_stopped"
    area = checkpoint_root(worker_env) / f"job-{job.pk}"
    saved = json.loads((area / "checkpoint" / "checkpoint.json").read_text())
    assert back.checkpointed == saved["step"] >= 5
    assert f"SIGTERM at step {saved['step']}; last checkpoint {saved['step']}" in (
        (area / "attempt-1.log").read_text()
    )
