"""A frozen runner (SIGSTOP) keeps no capacity it cannot give back, and loses no exit.

Real parts: Celery runner workers running real programs on PostgreSQL with Redis as the
broker; the passes and the recovery sweep run in the test's thread, as beat would send
them; who is alive is read from /proc (`procs.Sampler`), not from the product's record.

- A runner holding a reclaim's victim is frozen: its watchdog (a process of its own)
  kills the victim's group by the lease's end, and the sweep frees the slot no sooner:
  at no sample do more programs live than the queue has slots, and the starter's
  program appears only once the victim's is gone.
- A program that exits 0 while its runner is frozen is recorded SUCCEEDED when the
  runner wakes (its exit kept in the run area first), never run a second time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest
from django.utils import timezone

from core.celery import app
from fleet.models import CapacityLimit, Job, JobEvent, QueueCapacity
from scheduler.services.passes import scheduling_pass
from scheduler.services.runs import jobs_requeue_lost, jobs_stop_overdue
from tests.scheduler.live.conftest import checkpoint_root, wait_for
from tests.scheduler.runner.conftest import python
from tests.scheduler.runner.procs import Sampler, processes_of

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

RUNNERS_ONLY = "instances.ml.g5.xlarge"
SLOTS = 2
STUBBORN = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "while True:\n"
    "    time.sleep(0.05)\n"
)


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def node(worker) -> str:
    return f"{worker.name}@{socket.gethostname()}"


def stop_taking_jobs(worker) -> None:
    """The worker consumes no more run messages (so the frozen one cannot swallow the
    starter's); its runs go on."""
    replies = app.control.cancel_consumer(RUNNERS_ONLY, destination=[node(worker)], reply=True)
    assert replies, "the runner did not answer cancel_consumer"


def sweep_and_pass(queue_id: int) -> None:
    jobs_requeue_lost(claim_timeout=30)
    jobs_stop_overdue()
    scheduling_pass(queue_id=queue_id, now=timezone.now())


@pytest.fixture
def two_slots(process_queue, shares):
    QueueCapacity.objects.filter(queue=process_queue).update(instances=SLOTS)
    CapacityLimit.objects.filter(share=shares["qs3"]).delete()
    return process_queue


def test_a_frozen_runner_s_victim_is_dead_before_its_slot_is_given_again(
    two_slots, worker_env, start_worker, submit, definition, settings, capsys
):
    settings.JOB_KILL_MARGIN_SECONDS = 1  # the runners' (worker_settings), for the passes
    frozen = start_worker(name="frozen", queues=RUNNERS_ONLY)
    # A grace of 1 s: the sweep may stop it 2 s after the notice (grace + kill margin),
    # before its frozen runner could have killed it (its lease: 3 s + grace + margin).
    stubborn = definition("ignores-sigterm", python(STUBBORN), stop_grace_seconds=1)
    sampler = Sampler(interval=0.05)
    sampler.start()
    jobs = [
        submit("qs1", "steady", revision=stubborn, at=None, expected_duration=600, priority=5),
        submit("qs1", "borrower", revision=stubborn, at=None, expected_duration=600, priority=1),
    ]
    steady, borrower = jobs
    scheduling_pass(queue_id=two_slots.pk, now=timezone.now())
    for job in jobs:
        wait_for(lambda job=job: processes_of(job.pk), timeout=30, what=f"{job.name} to run")
    other = start_worker(name="other", queues=RUNNERS_ONLY)
    stop_taking_jobs(frozen)
    os.kill(frozen.process.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    sampler.mark("SIGSTOP of the runner holding both jobs")
    try:
        owner = submit("qs2", "owner", revision=stubborn, at=None, expected_duration=600)
        jobs.append(owner)
        sampler.mark("owner submitted (a reclaim of borrower's slot)")

        def owner_runs():
            sweep_and_pass(two_slots.pk)
            return processes_of(owner.pk)

        wait_for(owner_runs, timeout=40, interval=0.2, what="the owner's program")
        started_after = time.monotonic() - frozen_at
        time.sleep(1)
    finally:
        os.kill(frozen.process.pid, signal.SIGCONT)
        sampler.mark("SIGCONT")
    time.sleep(1)
    sampler.stop()
    for job in jobs:
        if fresh(job).is_live:
            from scheduler.services.jobs import job_terminate

            job_terminate(job_id=job.pk)

    ids = {job.pk for job in jobs}
    most = max(sum(len(sample.get(i, [])) for i in ids) for _, sample in sampler.samples)
    spans = sampler.spans(borrower.pk)
    victim_last = max(end for _, end, live in spans if any(p.attempt == 1 for p in live))
    owner_first = min(at for at, sample in sampler.samples if sample.get(owner.pk))
    stopped = JobEvent.objects.filter(job=borrower, type__in=["STOPPED", "REQUEUED"]).first()
    gap = (sampler.samples[-1][0] - sampler.samples[0][0]) / max(1, len(sampler.samples) - 1)
    with capsys.disabled():
        print(
            f"\nfrozen runner: the owner's program started {started_after:.1f} s after the "
            f"SIGSTOP; the victim's last seen at {victim_last:.2f} s, the owner's first at "
            f"{owner_first:.2f} s (sampler time); at most {most} programs on {SLOTS} slots; "
            f"samples every {gap * 1000:.0f} ms; the victim's end: "
            f"{stopped.type if stopped else None} {stopped.cause if stopped else ''}"
        )
        for job in jobs:
            print(sampler.timeline(job.pk, job.name))
    assert gap <= 0.2
    assert most <= SLOTS
    assert owner_first > victim_last
    assert fresh(owner).worker.endswith(f":{other.process.pid}")
    assert fresh(borrower).state != "RUNNING" or fresh(borrower).attempt > 1


def test_a_program_that_exits_during_a_25_s_freeze_of_its_runner_succeeds_once(
    worker_env, start_worker, started, sampler_fixture, capsys
):
    worker_env["DJANGO_SETTINGS_MODULE"] = "tests.scheduler.runner.freeze_settings"
    runner = start_worker(name="freezes", queues=RUNNERS_ONLY)
    sampler = sampler_fixture
    # Ends 3 s after it starts: during the freeze below.
    job = started("ends-in-freeze", python("import time; time.sleep(3)"))
    wait_for(lambda: processes_of(job.pk), timeout=30, interval=0.02, what="the program")
    os.kill(runner.process.pid, signal.SIGSTOP)
    sampler.mark("SIGSTOP of the runner for 25 s")
    requeued = []
    try:
        end = time.monotonic() + 25
        while time.monotonic() < end:
            requeued += jobs_requeue_lost(claim_timeout=30)
            time.sleep(0.5)
        during = fresh(job)
    finally:
        os.kill(runner.process.pid, signal.SIGCONT)
        sampler.mark("SIGCONT")
    thawed = time.monotonic()
    done = wait_for(
        lambda: fresh(job).state == "SUCCEEDED" and fresh(job),
        timeout=20,
        what="the exit to be reported",
    )
    reported_after = time.monotonic() - thawed
    time.sleep(1)
    requeued += jobs_requeue_lost(claim_timeout=30)
    sampler.stop()
    path = checkpoint_root(worker_env) / f"job-{job.pk}" / "attempt-1.exit.json"
    record = json.loads(path.read_text()) if path.exists() else None
    with capsys.disabled():
        print(
            f"\nexit during a 25 s freeze: state during the freeze {during.state}, "
            f"SUCCEEDED {reported_after:.2f} s after SIGCONT; exit record {record}"
        )
        print(sampler.timeline(job.pk, "exit during a freeze"))
    assert during.state == "RUNNING"
    assert requeued == []
    assert (done.attempt, done.requeues, done.exit_code) == (1, 0, 0)
    assert [p.attempt for p in sampler.seen(job.pk)] == [1]  # never a second attempt
    assert not JobEvent.objects.filter(job=job, type="REQUEUED").exists()
    assert done.finished_at >= done.started_at
    # Kept before it was reaped: what the sweep would have read had the lease run out.
    assert record is not None and (record["attempt"], record["exit_code"]) == (1, 0)


@pytest.fixture
def sampler_fixture():
    watcher = Sampler(interval=0.05)
    watcher.start()
    yield watcher
    watcher.stop()
