"""Capacity is free when the victim has stopped, not when it was chosen (issue 24).

Real parts: a Celery worker (runner and passes) running real training processes on
PostgreSQL, with Redis as the broker, and /proc read every 20 ms (`procs.Sampler`).
On a 2-slot process queue a sequence of reclaims, in-share preemptions and
terminations runs through jobs that honour SIGTERM (the example script, saving a
checkpoint on it) and jobs that ignore it until SIGKILL: at no sample do more job
processes live on the queue than it has slots. The test prints the figures (`pytest
-s`): the most live processes seen, the preemptions and terminations covered, and the
notice latency, from the decision (the PREEMPTED event) to the SIGTERM the process
received.
"""

from __future__ import annotations

import datetime as dt
import re
import time

import pytest

from fleet.models import CapacityLimit, Job, JobEvent, QueueCapacity
from scheduler.services.jobs import job_terminate
from tests.scheduler.live.conftest import checkpoint_root, wait_for
from tests.scheduler.runner.conftest import python, train
from tests.scheduler.runner.procs import Sampler

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

SLOTS = 2
# Ignores SIGTERM until SIGKILL.
STUBBORN = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "while True:\n"
    "    time.sleep(0.05)\n"
)
# The runner's log line of a notice: when it sent SIGTERM to which run.
SIGTERM_SENT = re.compile(
    r"^\[(?P<at>[\d-]+ [\d:]+,\d+): INFO/MainProcess\] "
    r"job (?P<job>\d+) attempt (?P<attempt>\d+): notice: SIGTERM now",
    re.MULTILINE,
)


def sigterms_sent(log: str) -> dict[tuple[int, int], float]:
    """(job id, attempt) -> when the runner sent SIGTERM (epoch seconds, its log's
    local time)."""
    return {
        (int(m["job"]), int(m["attempt"])): dt.datetime.strptime(m["at"], "%Y-%m-%d %H:%M:%S,%f")
        .astimezone()
        .timestamp()
        for m in SIGTERM_SENT.finditer(log)
    }


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def live_on_queue(sample: dict, job_ids: set[int]) -> int:
    """Live processes of the queue's jobs in one sample: one slot each (1 instance)."""
    return sum(len(processes) for job_id, processes in sample.items() if job_id in job_ids)


@pytest.fixture
def two_slots(process_queue, shares):
    """The AWS sample queue with 2 instances: qs1 (LEND_AND_BORROW, in-share preemption)
    and qs2 (LEND) own one each; qs3 reserves none."""
    QueueCapacity.objects.filter(queue=process_queue).update(instances=SLOTS)
    CapacityLimit.objects.filter(share=shares["qs3"]).delete()
    return process_queue


def test_no_more_job_processes_live_than_slots_through_reclaims_preemptions_and_terminations(
    two_slots, worker_env, start_worker, submit, definition
):
    worker_env["DJANGO_SETTINGS_MODULE"] = "tests.scheduler.runner.notice_settings"
    worker = start_worker(name="runner")
    root = checkpoint_root(worker_env)
    decided: dict[tuple[int, int], float] = {}  # terminations: (job, attempt) -> when
    honours = definition(
        "honours-sigterm",
        [*train(2000, step_seconds=0.05, every=1000), "--checkpoint-on-sigterm"],
        stop_grace_seconds=3,
    )
    stubborn = definition("ignores-sigterm", python(STUBBORN), stop_grace_seconds=2)
    sampler = Sampler(interval=0.02)
    sampler.start()
    jobs: list[Job] = []

    def job(share, name, revision, contract=None, **fields):
        fields.setdefault("expected_duration", 600)
        made = submit(share, name, revision=revision, at=None, **fields)
        # The contract, as its workload class would set it at submission (it matters
        # only once the job is a victim).
        Job.objects.filter(pk=made.pk).update(**(contract or {}))
        jobs.append(made)
        sampler.mark(f"submitted {name}")
        return made

    def running(*names):
        return all(fresh(j).state == "RUNNING" for j in jobs if j.name in names)

    try:
        # qs1 fills both slots: one within its limit, one borrowed from qs2.
        steady = job("qs1", "steady", honours, {"grace": 3, "checkpoint_on_notice": 2}, priority=5)
        borrower = job("qs1", "borrower", stubborn, priority=1)
        wait_for(lambda: running("steady", "borrower"), timeout=30, what="qs1's two jobs")
        time.sleep(1.5)  # the example script makes progress to save
        # Reclaim: qs2's owner takes its slot back from the stubborn borrower.
        owner = job("qs2", "owner", stubborn)
        wait_for(lambda: running("owner"), timeout=30, what="the reclaim")
        # In-share preemption: an urgent qs1 job takes steady's slot (it checkpoints).
        urgent = job("qs1", "urgent", stubborn, priority=9)
        wait_for(lambda: running("urgent"), timeout=30, what="the in-share preemption")
        # Terminations: the stubborn owner and urgent jobs get their grace, then SIGKILL.
        sampler.mark("terminate owner")
        decided[(owner.pk, fresh(owner).attempt)] = time.time()
        job_terminate(job_id=owner.pk)
        wait_for(lambda: fresh(owner).state == "FAILED", timeout=30, what="owner's stop")
        # Steady resumes from the checkpoint it saved on SIGTERM.
        wait_for(lambda: fresh(steady).state == "RUNNING", timeout=30, what="steady's restart")
        sampler.mark("terminate urgent")
        decided[(urgent.pk, fresh(urgent).attempt)] = time.time()
        job_terminate(job_id=urgent.pk)
        wait_for(lambda: fresh(urgent).state == "FAILED", timeout=30, what="urgent's stop")
        wait_for(lambda: fresh(borrower).state == "RUNNING", timeout=30, what="borrower back")
        time.sleep(0.5)
    finally:
        sampler.stop()
        for each in jobs:
            if fresh(each).is_live:
                job_terminate(job_id=each.pk)

    ids = {j.pk for j in jobs}
    most = max(live_on_queue(sample, ids) for _, sample in sampler.samples)
    events = JobEvent.objects.filter(job_id__in=ids)
    preempted = list(events.filter(type="PREEMPTED").order_by("at"))
    terminated = events.filter(
        type="FAILED", cause="terminated", job_id__in=[owner.pk, urgent.pk]
    ).count()
    for event in preempted:
        decided[(event.job_id, event.attempt)] = event.at.timestamp()
    sent = sigterms_sent(worker.log_path.read_text())
    latencies = {run: sent[run] - at for run, at in decided.items() if run in sent}
    names = {j.pk: j.name for j in jobs}
    times = [at for at, _ in sampler.samples]
    gap = (times[-1] - times[0]) / max(1, len(times) - 1)
    print(
        f"\nmax live job processes on the queue: {most} (slots {SLOTS}), over "
        f"{len(preempted)} preemptions ({', '.join(e.cause for e in preempted)}) and "
        f"{terminated} terminations; {len(sampler.samples)} samples asked every 20 ms, "
        f"taken every {gap * 1000:.0f} ms on average"
    )
    print(
        "notice latency, decision -> SIGTERM (heartbeat every 2 s): "
        + ", ".join(
            f"{names[job]} #{attempt} {seconds * 1000:.0f} ms"
            for (job, attempt), seconds in sorted(latencies.items())
        )
    )
    for each in jobs:
        print(sampler.timeline(each.pk, each.name))

    assert most <= SLOTS
    assert [e.cause for e in preempted] == ["reclaim", "priority"]
    assert terminated == 2
    # Every notice reached its run by the broadcast, well before the next heartbeat.
    assert set(latencies) == set(decided)
    assert max(latencies.values()) < 1.5
    # Steady saved on notice; its second attempt started from that checkpoint.
    steady = fresh(steady)
    stopped = events.get(job=steady, type="STOPPED")
    assert stopped.cause == "priority" and stopped.by_id == urgent.pk
    assert stopped.detail["lost_work"] == 0 and stopped.detail["saved_on_notice"]
    resumed = stopped.detail["resumes_from"]
    assert resumed > 0 and steady.attempt >= 2
    log = (root / f"job-{steady.pk}" / "attempt-2.log").read_text()
    assert f"attempt 2: starting at step {resumed}" in log
