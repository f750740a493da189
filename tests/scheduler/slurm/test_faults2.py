"""Faults on the real cluster: munged stopped, slurmctld stalled (the commands time
out), and Slurm's own ends (out of memory, time limit, node failure, a cancel by
someone else) recorded with causes of their own. The daemons are those of the
cluster the `slurm_cluster` fixture uses (tests/scheduler/slurm/daemons.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import Job, JobEvent
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.client import Cluster, Ending, SlurmError, run_name
from scheduler.services import runs
from scheduler.services.passes import scheduling_pass
from tests.factories import aws_sample_queue, job_definition
from tests.scheduler.slurm import daemons
from tests.scheduler.slurm.conftest import fresh, settle, submitted, train


def named(slurm_cluster, job: Job) -> list[str]:
    listed = slurm_cluster.run(
        "squeue", "--noheader", "--states=all", "--format=%i", f"--name={run_name(job.pk, 1)}"
    )
    return listed.split()


@pytest.mark.parametrize(
    ("ending", "noticed", "outcome"),
    [
        (Ending("OUT_OF_MEMORY", -125, ""), False, ("failed", service.OUT_OF_MEMORY)),
        (Ending("TIMEOUT", -15, ""), False, ("failed", service.SLURM_TIME_LIMIT)),
        (Ending("TIMEOUT", -15, ""), True, ("exited", None)),  # with notice: it stopped
        (Ending("NODE_FAIL", None, ""), False, ("released", service.NODE_FAIL)),
        (Ending("BOOT_FAIL", None, ""), True, ("released", service.NODE_FAIL)),
        (Ending("CANCELLED", -15, ""), False, ("released", service.SLURM_CANCELLED)),
        (Ending("CANCELLED", -15, ""), True, ("stopped", None)),
        (Ending("FAILED", 3, ""), False, ("exited", None)),
        (None, False, ("released", service.SLURM_LOST)),
    ],
)
def test_each_slurm_end_has_its_outcome_and_cause(ending, noticed, outcome):
    assert service.ending_outcome(ending, noticed=noticed) == outcome


@pytest.mark.parametrize(
    ("ending", "noticed", "said", "outcome"),
    [
        # The launcher found the checkpoint held (its file and its exit both say so).
        (Ending("FAILED", 75, ""), False, "busy", ("released", runs.CHECKPOINT_BUSY)),
        (Ending("FAILED", 75, ""), True, "busy", ("released", runs.CHECKPOINT_BUSY)),
        (Ending("FAILED", 75, ""), False, "", ("exited", None)),  # the program's own 75
        (Ending("FAILED", 3, ""), False, "busy", ("exited", None)),
        # slurmstepd killed it for its memory (no cgroups: FAILED, signal 9).
        (Ending("FAILED", -9, ""), False, "memory", ("failed", service.OUT_OF_MEMORY)),
        (Ending("CANCELLED", -9, ""), False, "memory", ("failed", service.OUT_OF_MEMORY)),
        (Ending("FAILED", -9, ""), True, "memory", ("exited", None)),  # killed at its grace
        (Ending("FAILED", 3, ""), False, "memory", ("exited", None)),  # it only said so
        (Ending("FAILED", -9, ""), False, "", ("exited", None)),
    ],
)
def test_what_the_launcher_and_slurmstepd_said_gives_the_cause(ending, noticed, said, outcome):
    found = service.ending_outcome(
        ending, noticed=noticed, busy=said == "busy", over_memory=said == "memory"
    )
    assert found == outcome


@pytest.mark.parametrize(("seconds", "minutes"), [(1, 1), (59, 1), (60, 1), (61, 2), (3600, 60)])
def test_a_wall_clock_limit_is_rounded_up_to_slurms_minutes(seconds, minutes):
    from scheduler.executors.slurm.client import time_minutes

    assert time_minutes(seconds) == minutes


@pytest.mark.slurm
@pytest.mark.django_db
def test_a_run_cancelled_by_someone_else_in_slurm_is_requeued_with_its_cause(
    start, slurm_cluster, client, admin
):
    job, _ = start("qs2", "cancelled-by-hand", train(600, step_seconds=0.2, every=5))
    slurm_id = submitted(job)
    settle(lambda: fresh(job).progress >= 2, what="it runs")
    slurm_cluster.run("scancel", slurm_id)  # an operator, not the product
    requeued = settle(lambda: fresh(job).state == "RUNNABLE" and fresh(job), what="requeued")
    event = JobEvent.objects.get(job=job, type=JobEvent.Type.REQUEUED)
    assert event.cause == service.SLURM_CANCELLED and requeued.preemptions == 0
    client.force_login(admin)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "Requeued: someone cancelled it in Slurm, not the product" in page


@pytest.mark.slurm
@pytest.mark.django_db
def test_munge_stopped_fails_nothing_and_submits_nothing_twice(start, slurm_cluster):
    """No munged: every command is refused authentication. The reconciliation says the
    cluster is silent and records nothing; a submission is unanswered, not refused (no
    FAILED job); once munged is back the cut-short submission is made once."""
    running, _ = start("qs2", "runs-through", train(600, step_seconds=0.2, every=10))
    submitted(running)
    settle(lambda: fresh(running).progress >= 2, what="it runs")
    waiting, _ = start("qs3", "submitted-without-munge", train(600, step_seconds=0.2, every=10))
    os.kill(daemons.pid(slurm_cluster.conf, "munged"), signal.SIGTERM)
    try:
        time.sleep(0.5)
        report = service.slurm_reconcile()
        assert report.unreachable == [slurm_cluster.conf]
        done = service.slurm_submit_run(job_id=waiting.pk, attempt=1)
        assert done.startswith("unanswered") and "authentication" in done, done
        assert fresh(running).state == fresh(waiting).state == "RUNNING"
        assert not JobEvent.objects.filter(type=JobEvent.Type.FAILED).exists()
    finally:
        daemons.cluster_start(slurm_cluster.conf)
    time.sleep(1.1)  # the claim of the cut-short submission is stale
    settle(lambda: (fresh(waiting).placement or {}).get("job_id"), what="submitted after munge")
    for _ in range(3):
        service.slurm_reconcile()
    assert len(named(slurm_cluster, waiting)) == 1
    assert len(named(slurm_cluster, running)) == 1
    assert fresh(running).state == "RUNNING"
    assert not JobEvent.objects.filter(type=JobEvent.Type.FAILED).exists()


@pytest.mark.slurm
@pytest.mark.django_db
def test_a_stalled_slurmctld_times_the_commands_out_and_other_queues_schedule_on(
    start, slurm_cluster, settings
):
    """slurmctld stopped (SIGSTOP): the commands time out after SLURM_COMMAND_TIMEOUT.
    The tick goes on: the reconciliation gives up on that cluster within one timeout,
    and a simulated queue's pass starts its job in the same tick. The submission's own
    lookup (squeue) times out first; an sbatch that times out itself (made here by
    hand, as a submitter whose lookup had answered) left its request in slurmctld's
    socket, which slurmctld may still act on after SIGCONT: either way the run is made
    once, adopted by its name or submitted by the reconciliation."""
    settings.SLURM_COMMAND_TIMEOUT = 1
    simulated = aws_sample_queue("simulated-beside")
    revision = job_definition(simulated, name="modelled")
    from scheduler.services.jobs import JobData, job_submit

    other = job_submit(
        data=JobData(
            share=simulated.shares.get(name="qs2"),
            name="modelled-work",
            revision=revision,
            instance_type=simulated.capacities.get().instance_type,
            expected_duration=3600,
        ),
        submitted_by=None,
    )
    job, _ = start("qs2", "submitted-to-a-stalled-controller", train(4, step_seconds=0.1, every=1))
    controller = daemons.pid(slurm_cluster.conf, "slurmctld")
    os.kill(controller, signal.SIGSTOP)
    try:
        began = time.monotonic()
        done = service.slurm_submit_run(job_id=job.pk, attempt=1)
        submit_took = time.monotonic() - began
        assert done.startswith("unanswered") and "did not answer within 1 s" in done, done
        with pytest.raises(SlurmError) as unanswered:
            service.submit_to_slurm(fresh(job), Cluster(slurm_cluster.conf))
        assert not unanswered.value.refused and "sbatch did not answer" in str(unanswered.value)
        began = time.monotonic()
        report = service.slurm_reconcile()
        reconcile_took = time.monotonic() - began
        assert report.unreachable == [slurm_cluster.conf]
        outcome = scheduling_pass(queue_id=simulated.pk, now=timezone.now())
        assert outcome.started == [other.pk]
        assert fresh(job).state == "RUNNING" and fresh(job).worker == service.SUBMITTING
    finally:
        os.kill(controller, signal.SIGCONT)
    assert submit_took < 1.5 and reconcile_took < 1.5, (submit_took, reconcile_took)
    # The controller answers again, and has had time to act on the request left in its
    # socket (the product's claim goes stale after SLURM_SUBMIT_STALE_SECONDS, 30 s by
    # default, 1 s here): then the reconciliation looks for the run by name.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            slurm_cluster.run("squeue", "--noheader", timeout=2)
            break
        except (AssertionError, subprocess.TimeoutExpired):
            time.sleep(0.2)
    time.sleep(2)
    done = settle(lambda: fresh(job).state == "SUCCEEDED" and fresh(job), what="it runs once")
    assert len(named(slurm_cluster, job)) == 1
    print(
        f"\nslurm: stalled controller: sbatch gave up in {submit_took:.2f} s, the"
        f" reconciliation in {reconcile_took:.2f} s; adopted: {done.placement['adopted']}"
    )
