"""STARTING is not RUNNING: a job the product started that Slurm has not run shows
STARTING with Slurm's pending reason (API `state` and `placement`, the pages); its run
time counts from Slurm's real start (`started_at` = StartTime, a RUNNING event then);
one Slurm has not run `SLURM_STARTING_TIMEOUT_SECONDS` after its submission is taken
back (scancel, requeued `slurm_pending`, no preemption counted) and its capacity is
counted again. A partition that is not up gives no capacity."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import Job, JobEvent, JobQueue
from scheduler import selectors
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.client import SlurmJob, slurm_time
from scheduler.services.passes import scheduling_pass
from tests.scheduler.slurm.conftest import fresh, settle, submitted, train


def test_slurm_times_are_read_in_utc_and_the_real_start_is_bounded():
    assert slurm_time("2026-12-07T23:27:16") == dt.datetime(2026, 12, 7, 23, 27, 16, tzinfo=dt.UTC)
    assert slurm_time("N/A") is None and slurm_time("Unknown") is None
    decided = dt.datetime(2026, 12, 7, 23, 27, 10, 500000, tzinfo=dt.UTC)
    now = decided + dt.timedelta(seconds=30)
    job = Job(started_at=decided)
    run = SlurmJob("5", "x", "RUNNING", "node1", "2026-12-07T23:27:16", "None")
    assert service.real_start(job, run, now) == dt.datetime(2026, 12, 7, 23, 27, 16, tzinfo=dt.UTC)
    early = SlurmJob("5", "x", "RUNNING", "node1", "2026-12-07T23:27:10", "None")
    assert service.real_start(job, early, now) == decided  # never before the decision
    late = SlurmJob("5", "x", "RUNNING", "node1", "2026-12-08T01:00:00", "None")
    assert service.real_start(job, late, now) == now  # never after now
    unknown = SlurmJob("5", "x", "RUNNING", "node1", "N/A", "None")
    assert service.real_start(job, unknown, now) == now


def test_a_running_job_shows_starting_until_its_executor_runs_it():
    pending = {"job_id": "9", "state": "PENDING", "reason": "PartitionDown"}
    shown = selectors.shown_state
    assert shown(state="RUNNING", placement=pending, executor="slurm") == "STARTING"
    assert shown(state="RUNNING", placement=None, executor="slurm") == "STARTING"
    running = {**pending, "state": "RUNNING"}
    assert shown(state="RUNNING", placement=running, executor="slurm") == "RUNNING"
    assert shown(state="STOPPING", placement=pending, executor="slurm") == "STOPPING"
    # The simulated and the process executors show what they showed.
    assert shown(state="RUNNING", placement=None, executor="simulated") == "RUNNING"
    assert shown(state="RUNNING", placement=None, executor="process") == "RUNNING"


def api_job(client, job: Job) -> dict:
    return client.get(reverse("api-job-detail", args=[job.pk])).json()


def seen(queue) -> dict:
    return JobQueue.objects.get(pk=queue.pk).capacity_seen


def partition(slurm_cluster, state: str) -> None:
    slurm_cluster.run("scontrol", "update", "PartitionName=gpu", f"State={state}")


@pytest.mark.slurm
@pytest.mark.django_db
def test_a_partition_down_gives_nothing_and_a_job_it_holds_is_taken_back(
    slurm_queue, start, slurm_cluster, settings, client, admin
):
    """Partition gpu set DOWN just after a job was started: the job shows STARTING with
    Slurm's reason PartitionDown (API, job page, jobs list), never RUNNING; the usable
    capacity is 0 and nothing new starts; after the (lowered) starting bound it is
    cancelled in Slurm, requeued with cause slurm_pending, RUNNABLE, no preemption
    counted; once the partition is up it starts again and runs."""
    settings.SLURM_STARTING_TIMEOUT_SECONDS = 4
    client.force_login(admin)
    service.slurm_reconcile()
    assert seen(slurm_queue)["types"]["ml.g5.xlarge"]["usable"] == 8
    job, outcome = start("qs2", "held-by-down", train(4, step_seconds=0.2, every=2))
    assert outcome.started == [job.pk]
    assert api_job(client, job)["state"] == "STARTING"  # not even in Slurm yet
    partition(slurm_cluster, "DOWN")
    try:
        slurm_id = submitted(job)
        settle(
            lambda: (fresh(job).placement or {}).get("reason") == "PartitionDown",
            what="the reconciliation records Slurm's reason",
        )
        assert slurm_cluster.job_field(slurm_id, "JobState") == "PENDING"
        assert slurm_cluster.job_field(slurm_id, "Reason") == "PartitionDown"
        shown = api_job(client, job)
        assert (shown["state"], shown["placement"]["reason"]) == ("STARTING", "PartitionDown")
        assert shown["placement"]["job_id"] == slurm_id
        page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
        assert "Starting" in page and "PartitionDown" in page
        listing = client.get(reverse("job-list")).content.decode()
        assert 'chip--neutral">Starting<' in listing
        queue_page = client.get(reverse("queue-detail", args=[slurm_queue.pk])).content.decode()
        assert "1 job started by the product that Slurm has not run yet" in queue_page
        assert "Slurm partition gpu is down" in queue_page
        after = seen(slurm_queue)
        assert after["partition_state"] == "down"
        assert after["types"]["ml.g5.xlarge"]["usable"] == 0
        other, outcome = start("qs1", "nothing-starts", train(2, step_seconds=0.1, every=1))
        assert outcome.started == []
        assert fresh(other).state == "RUNNABLE"

        back = settle(
            lambda: fresh(job).state == "RUNNABLE" and fresh(job),
            timeout=30,
            what="the run is taken back after the starting bound",
        )
        assert slurm_cluster.job_field(slurm_id, "JobState") == "CANCELLED"
        assert (back.preemptions, back.requeues, back.attempt) == (0, 1, 1)
        event = JobEvent.objects.get(job=back, type=JobEvent.Type.REQUEUED)
        assert event.cause == "slurm_pending"
        assert not JobEvent.objects.filter(job=back, type=JobEvent.Type.PREEMPTED).exists()
        page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
        assert "Slurm did not run it within 4 s (PartitionDown)" in page
        outcome = scheduling_pass(queue_id=slurm_queue.pk, now=timezone.now())
        assert outcome.started == []  # the capacity counted again: still none
        ours = slurm_cluster.run("squeue", "--noheader", "--states=PENDING", "--format=%j")
        assert settings.SLURM_JOB_PREFIX not in ours  # nothing of ours waits in Slurm
    finally:
        partition(slurm_cluster, "UP")
    settle(
        lambda: seen(slurm_queue)["types"]["ml.g5.xlarge"]["usable"] == 8,
        what="the partition is up again",
    )
    outcome = scheduling_pass(queue_id=slurm_queue.pk, now=timezone.now())
    assert job.pk in outcome.started
    submitted(job)
    done = settle(lambda: fresh(job).state == "SUCCEEDED" and fresh(job), what="it runs")
    assert (done.attempt, done.preemptions) == (2, 0)


@pytest.mark.slurm
@pytest.mark.django_db
def test_the_run_time_counts_from_slurms_real_start(start, slurm_cluster, client, admin):
    """The submission is held back 3 s after the decision: `started_at` becomes
    Slurm's StartTime (within a second), not the decision; a RUNNING event says when."""
    client.force_login(admin)
    job, outcome = start("qs2", "real-start", train(600, step_seconds=0.5, every=100))
    assert outcome.started == [job.pk]
    decided = fresh(job).started_at
    time.sleep(3)
    slurm_id = submitted(job)
    running = settle(
        lambda: (fresh(job).placement or {}).get("state") == "RUNNING" and fresh(job),
        what="Slurm runs it",
    )
    # Sampled from Slurm, in UTC whatever the zone of this process.
    slurm_cluster.env["TZ"] = "UTC"
    start_time = dt.datetime.fromisoformat(slurm_cluster.job_field(slurm_id, "StartTime"))
    start_time = start_time.replace(tzinfo=dt.UTC)
    assert abs((running.started_at - start_time).total_seconds()) < 1
    # StartTime is in whole seconds (truncated): at least 3 - 1 s after the decision.
    assert (running.started_at - decided).total_seconds() >= 2
    assert running.first_started_at == running.started_at
    event = JobEvent.objects.get(job=job, type=JobEvent.Type.RUNNING)
    assert event.at == running.started_at and event.detail["slurm_job_id"] == slurm_id
    assert api_job(client, job)["state"] == "RUNNING"
    devices = api_job(client, job)["placement"]["devices"]
    held = slurm_cluster.run("scontrol", "-d", "--oneliner", "show", "job", slurm_id)
    assert devices and all(f"IDX:{ids})" in held for ids in devices.values())
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    # The executor's words (its cause), with where and how long after the decision.
    assert event.cause == "slurm_running"
    assert f"Slurm began running it (Slurm job {slurm_id} on " in page
    assert f"{event.detail['after_start']:g} s after it was started" in page
    print(
        f"\nreal start {(running.started_at - decided).total_seconds():.2f} s after the "
        f"decision, Slurm StartTime {start_time:%H:%M:%S}"
    )
