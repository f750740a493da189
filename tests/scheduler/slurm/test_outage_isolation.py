"""A Slurm outage never delays another queue (issue 34, point 5).

The Slurm executor's commands run on a Celery queue of their own (`executor.slurm`):
with slurmctld stopped (SIGSTOP on this test's cluster: every command waits for its
SLURM_COMMAND_TIMEOUT), Slurm submissions hold only that queue's worker slots, and a
simulated queue's job starts as fast as without the outage. Real parts: two Celery
worker processes on Redis (`interactive`, two slots, as the issue's; `executor.slurm`,
two slots), PostgreSQL, the test cluster. Latencies are measured from the submission
to the job's RUNNING in the database; how long the Slurm commands were held is what
the Slurm worker logged for its tasks."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
from django.utils import timezone

from core.celery import app
from fleet.models import InstanceType, Job
from scheduler.services.jobs import JobData, job_submit
from tests.factories import aws_sample_queue, job_definition
from tests.scheduler.live.conftest import start_worker, wait_for, worker_env
from tests.scheduler.slurm import daemons
from tests.scheduler.slurm.conftest import JOB_USER

__all__ = ["start_worker", "worker_env"]

COMMAND_TIMEOUT = 10  # seconds each Slurm command may wait (SLURM_COMMAND_TIMEOUT)


def test_slurm_commands_go_to_their_own_queue_and_passes_stay_interactive():
    from scheduler.executors import executor_named

    slurm = executor_named("slurm")
    assert slurm.worker_queue == "executor.slurm"
    assert executor_named("process").worker_queue is None
    assert executor_named("simulated").worker_queue is None
    route = app.amqp.router.route
    assert route({}, "scheduler.run_pass")["queue"].name == "interactive"
    # What the executor sends names its queue, over the generic tasks' route.
    sent = route({"queue": slurm.worker_queue}, "scheduler.executor_start")
    assert sent["queue"].name == "executor.slurm"


def _start_latency(job_of) -> float:
    """Seconds from the submission (job_of() submits) to RUNNING in the database."""
    began = time.monotonic()
    job = job_of()
    while Job.objects.get(pk=job.pk).state != "RUNNING":
        assert time.monotonic() - began < 60, "the simulated job never started"
        time.sleep(0.01)
    return time.monotonic() - began


def _held_seconds(worker, timeout: float = 60) -> list[float]:
    """How long each `scheduler.executor_start` task took, as the Slurm worker logged."""
    pattern = re.compile(r"Task scheduler\.executor_start\[[^\]]+\] succeeded in ([0-9.]+)s")

    def finished():
        found = [float(seconds) for seconds in pattern.findall(worker.output())]
        return len(found) >= 2 and found

    return wait_for(finished, timeout=timeout, interval=0.2, what="the held submissions to end")


@pytest.mark.slurm
@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_stopped_slurmctld_does_not_delay_a_simulated_queues_start(
    slurm_queue, slurm_cluster, slurm_settings, worker_env, start_worker, submit
):
    worker_env.update(
        SLURM_CONF=slurm_cluster.conf,
        SLURM_COMMAND_TIMEOUT=str(COMMAND_TIMEOUT),
        SLURM_JOB_PREFIX=slurm_settings.SLURM_JOB_PREFIX,
        SLURM_JOB_USER=JOB_USER,
        SLURM_ALLOW_ROOT="0",
        SLURM_SUBMIT_STALE_SECONDS="1",
        JOB_CHECKPOINT_ROOT=str(slurm_settings.JOB_CHECKPOINT_ROOT),
    )
    simulated = aws_sample_queue("simulated-beside")
    modelled = job_definition(simulated, name="modelled")
    itype = InstanceType.objects.get(name="ml.g5.xlarge")
    program = job_definition(slurm_queue, name="on-slurm", command=["sleep", "30"], network=True)

    def simulated_job(name: str):
        return lambda: job_submit(
            data=JobData(
                share=simulated.shares.get(name="qs2" if name == "before" else "qs3"),
                name=name,
                revision=modelled,
                instance_type=itype,
                expected_duration=3600,
            ),
            submitted_by=None,
            now=timezone.now(),
        )

    start_worker(queues="interactive", name="interactive", concurrency=2)
    slurm_worker = start_worker(queues="executor.slurm", name="slurm", concurrency=2)

    before = _start_latency(simulated_job("before"))

    controller = daemons.pid(slurm_cluster.conf, "slurmctld")
    os.kill(controller, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        held = []
        for share in ("qs2", "qs3"):  # one pass each: two submissions, two slots held
            job = submit(share, f"held-{share}", revision=program, at=None, expected_duration=60)
            wait_for(
                lambda job=job: Job.objects.get(pk=job.pk).state == "RUNNING",
                what="the Slurm queue's pass to start it",
            )
            held.append(job)
        time.sleep(0.5)  # the submissions are in the Slurm worker's hands
        during = _start_latency(simulated_job("during"))
        measured_at = time.monotonic() - stopped
        # Still held: Slurm has not answered either submission.
        assert not any((Job.objects.get(pk=j.pk).placement or {}).get("job_id") for j in held)
        # The controller stays stopped until the submissions gave up (their timeout).
        took = _held_seconds(slurm_worker)
    finally:
        os.kill(controller, signal.SIGCONT)
    print(
        f"\nslurm outage: simulated start latency {before:.2f} s before, {during:.2f} s "
        f"during (measured {measured_at:.1f} s into the outage); the Slurm submissions "
        f"were held {', '.join(f'{t:.1f}' for t in took)} s"
    )
    assert min(took) >= COMMAND_TIMEOUT * 0.9, took  # the outage really held them
    # Not delayed by the outage: far below one command timeout, as before it.
    assert during < 3, (before, during)
    assert during < COMMAND_TIMEOUT / 3


def _queue_lengths(*names: str) -> dict[str, int]:
    with app.connection_for_write() as connection:
        client = connection.default_channel.client
        return {name: client.llen(name) for name in names}


@pytest.mark.redis
@pytest.mark.django_db
def test_the_reconciliation_fans_out_one_waiting_task_per_executor_to_its_queue(
    aws_queue, settings
):
    """No worker: each reconciling executor a queue uses gets one task on its own queue
    (Slurm's on `executor.slurm`, the process executor's on the background queue), and
    later ticks add none while it waits; an executor no queue uses gets none."""
    from scheduler.tasks import executor_reconcile

    with app.connection_for_write() as connection:
        client = connection.default_channel.client
        client.delete("executor.slurm", "celery")
        from core.cache import liveness_cache

        liveness_cache().delete_many(
            [f"executor-reconcile-waits:{name}" for name in ("slurm", "process")]
        )
    assert executor_reconcile() == []  # a simulated queue only: nothing reconciles
    aws_queue.executor = "slurm"
    aws_queue.save(update_fields=["executor"])
    other = aws_sample_queue("on-process")
    other.executor = "process"
    other.save(update_fields=["executor"])
    try:
        assert executor_reconcile() == ["process", "slurm"]
        assert executor_reconcile() == []  # both still wait
        assert _queue_lengths("executor.slurm", "celery") == {"executor.slurm": 1, "celery": 1}
    finally:
        with app.connection_for_write() as connection:
            connection.default_channel.client.delete("executor.slurm", "celery")
