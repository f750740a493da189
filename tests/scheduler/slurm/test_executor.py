"""The `slurm` executor on the real test cluster: the product decides, Slurm runs.

The AWS sample queue (3 × ml.g5.xlarge: qs1 LEND_AND_BORROW, qs2 LEND, qs3 RESERVE,
one each) bound to partition `gpu`, one GPU per instance. No Celery worker: each test
runs the pass, the submission, the notice and the reconciliation itself, in the order
the tasks would, so every step is observed. Figures are printed (`pytest -s`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import Job, JobEvent
from scheduler.executors.run_area import RunArea
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.client import Cluster, run_name
from scheduler.services.jobs import job_terminate
from scheduler.services.passes import scheduling_pass
from tests.scheduler.slurm import daemons
from tests.scheduler.slurm.conftest import fresh, settle, submitted, train

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


def job_page(client, job: Job) -> str:
    return client.get(reverse("job-detail", args=[job.pk])).content.decode()


def test_a_started_job_runs_the_example_script_on_slurm_and_succeeds(
    start, slurm_cluster, client, admin
):
    client.force_login(admin)
    decided = time.monotonic()
    job, outcome = start("qs2", "train-on-slurm", train(4, step_seconds=0.2, every=2))
    assert outcome.started == [job.pk]
    assert (job.state, job.worker) == ("RUNNING", "")  # STARTING: not in Slurm yet
    assert "being submitted to its Slurm cluster" in job_page(client, job)
    slurm_id = submitted(job)
    job = fresh(job)
    assert job.worker == f"slurm:{slurm_id}"
    assert job.placement["job_id"] == slurm_id

    running = settle(
        lambda: (fresh(job).placement or {}).get("state") == "RUNNING" and fresh(job),
        what="Slurm runs it",
    )
    seen_running = time.monotonic() - decided
    assert running.state == "RUNNING" and running.placement["nodes"] in {"node1", "node2"}
    assert slurm_cluster.job_field(slurm_id, "JobName") == run_name(job.pk, 1)
    page = job_page(client, running)
    assert f"{slurm_id} (running) on {running.placement['nodes']}" in page
    assert "Running within its share" in page

    done = settle(lambda: fresh(job).state == "SUCCEEDED" and fresh(job), what="it succeeds")
    assert done.exit_code == 0
    assert done.checkpointed == 4  # the status file's last figure (progress: all of it)
    log = RunArea.of(job.pk, 1).log.read_text()
    assert "starting at step 0" in log
    print(f"\nslurm: decision to RUNNING seen by the product: {seen_running:.2f} s")


def test_reclaim_on_slurm_sigterm_checkpoint_capacity_held_until_slurm_ends_it_then_resume(
    start, slurm_cluster
):
    """qs1 borrows qs2's idle instance; qs2's own job reclaims it. The victim gets SIGTERM
    through scancel, saves its step, and its capacity is free only once Slurm reports
    the job ended; its attempt 2 resumes from the saved step."""
    keeper, _ = start("qs1", "keeper", train(600, step_seconds=0.5, every=100), priority=10)
    borrower, _ = start(
        "qs1", "borrower", train(40, step_seconds=0.25, every=1000, on_sigterm=True)
    )
    submitted(keeper)
    borrower_slurm = submitted(borrower)
    settle(
        lambda: (fresh(borrower).placement or {}).get("state") == "RUNNING"
        and fresh(borrower).progress >= 3,
        what="the borrower runs a few steps",
    )
    assert fresh(borrower).borrowed

    lender, outcome = start("qs2", "lender", train(2, step_seconds=0.2, every=1))
    decided = timezone.now()
    assert outcome.noticed == [borrower.pk] and lender.state == "RUNNABLE"
    assert fresh(borrower).state == "STOPPING"
    assert service.slurm_notice(job_ids=[borrower.pk]) == 1

    # Until Slurm reports the end, the victim keeps its capacity: the lender waits.
    stopping = fresh(borrower)
    assert stopping.state == "STOPPING" and stopping.placement.get("term_sent_at")
    scheduling_pass(queue_id=lender.queue_id, now=timezone.now())
    assert fresh(lender).state == "RUNNABLE"

    stopped = settle(lambda: fresh(borrower).state == "RUNNABLE" and fresh(borrower), what="stop")
    event = JobEvent.objects.get(job=borrower, type=JobEvent.Type.STOPPED)
    freed = (event.at - decided).total_seconds()
    assert stopped.exit_code == 143  # the script's own exit on SIGTERM, after saving
    saved = json.loads((RunArea.of(borrower.pk, 1).checkpoint / "checkpoint.json").read_text())
    assert saved["step"] == stopped.checkpointed >= 3 and event.detail["lost_work"] == 0
    assert slurm_cluster.job_field(borrower_slurm, "JobState") == "FAILED"

    scheduling_pass(queue_id=lender.queue_id, now=timezone.now())
    assert fresh(lender).state == "RUNNING"
    submitted(lender)
    settle(lambda: fresh(lender).state == "SUCCEEDED", what="the lender's job succeeds")

    # The lender's instance is idle again: the borrower starts its attempt 2 and resumes.
    outcome = scheduling_pass(queue_id=lender.queue_id, now=timezone.now())
    assert borrower.pk in outcome.started and fresh(borrower).attempt == 2
    submitted(borrower)
    settle(lambda: fresh(borrower).state == "SUCCEEDED", what="attempt 2 succeeds")
    assert f"starting at step {saved['step']}" in RunArea.of(borrower.pk, 2).log.read_text()
    job_terminate(job_id=keeper.pk)
    service.slurm_notice(job_ids=[keeper.pk])
    settle(lambda: fresh(keeper).state == "FAILED", what="the keeper is terminated")
    print(f"\nslurm: reclaim decision to the victim's capacity free: {freed:.2f} s (grace 5 s)")


def test_a_submission_retried_after_a_crash_adopts_the_slurm_job_never_two(start, slurm_cluster):
    job, _ = start("qs2", "crashes-after-sbatch", train(600, step_seconds=0.5, every=100))
    # The submitter claims the run and sbatch answers, then it dies before its write.
    assert service._claim(job.pk, 1, timezone.now(), stale=False)
    first = service.submit_to_slurm(fresh(job), Cluster(slurm_cluster.conf))
    assert fresh(job).worker == service.SUBMITTING

    # A redelivered submission finds the claim taken and does nothing...
    assert service.slurm_submit_run(job_id=job.pk, attempt=1) == "not claimed"
    # ...and once the claim is stale the reconciliation adopts the Slurm job by name.
    time.sleep(1.1)
    report = service.slurm_reconcile()
    adopted = fresh(job)
    assert report.submitted == [job.pk]
    assert adopted.placement["job_id"] == first and adopted.placement["adopted"] is True
    service.slurm_reconcile()
    named = slurm_cluster.run(
        "squeue", "--noheader", "--states=all", f"--name={run_name(job.pk, 1)}"
    )
    assert len(named.splitlines()) == 1

    # A listing that missed it (it was submitted after squeue answered) ends nothing:
    # Slurm is asked about that job, and it has not ended.
    report = service.Reconciliation()
    service._record_end(
        Cluster(slurm_cluster.conf), fresh(job), first, None, None, timezone.now(), report
    )
    assert fresh(job).state == "RUNNING" and not (report.ended or report.lost)


def test_a_slurm_job_of_ours_that_the_product_does_not_run_is_cancelled(slurm_queue, slurm_cluster):
    stray = slurm_cluster.run(
        "sbatch",
        "--parsable",
        "--partition=gpu",
        f"--job-name={run_name(999999, 1)}",
        "--output=/dev/null",
        "--wrap",
        "sleep 60",
    ).strip()
    report = service.slurm_reconcile()
    assert stray in report.cancelled
    assert slurm_cluster.wait_state(stray, {"CANCELLED"}) == "CANCELLED"


STUBBORN = [
    "python3",
    "-c",
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ignoring SIGTERM', flush=True)\n"
    "while True:\n"
    "    time.sleep(0.05)\n",
]


def test_a_program_that_ignores_sigterm_is_killed_at_the_end_of_its_grace(start, slurm_cluster):
    grace = 5  # ample beside the reconciliations below, on a loaded machine too
    job, _ = start("qs2", "stubborn", STUBBORN, grace=grace)
    slurm_id = submitted(job)
    settle(lambda: (fresh(job).placement or {}).get("state") == "RUNNING", what="it runs")
    # Running in Slurm is not yet ignoring SIGTERM: a notice before its handler (a slow
    # start on a loaded machine) would end it at once. Its first line says it is ready.
    log = RunArea.of(job.pk, 1).log
    settle(
        lambda: log.exists() and "ignoring SIGTERM" in log.read_text(errors="replace"),
        what="the program to ignore SIGTERM",
    )
    terminated = timezone.now()
    job_terminate(job_id=job.pk)
    assert service.slurm_notice(job_ids=[job.pk]) == 1
    # Within its grace it runs on, holding its capacity, whatever the ticks see.
    watch = time.monotonic() + 1
    while time.monotonic() < watch:
        service.slurm_reconcile()
        time.sleep(0.1)
    now = fresh(job)
    assert now.state == "STOPPING", (now.reason, now.exit_code, now.placement)
    assert slurm_cluster.job_field(slurm_id, "JobState") == "RUNNING"

    ended = settle(lambda: fresh(job).state == "FAILED" and fresh(job), what="SIGKILL")
    took = (ended.finished_at - terminated).total_seconds()
    assert ended.reason == "terminated" and ended.exit_code == -9
    # Killed by the launcher (its own timer, or the reconciliation's SIGUSR2 if a tick
    # came first: test_limits holds each apart), which says so on the output.
    assert "(killed by signal 9)" in log.read_text(errors="replace")
    # Not before its grace; and by the launcher's SIGKILL at the grace, not by Slurm's
    # own fallback, which holds the job COMPLETING for KillWait (30 s). The figure is
    # printed (and benchmarked by bench_slurm), not bounded tightly on a loaded machine.
    assert grace <= took < grace + 10, took
    print(f"\nslurm: terminate (grace {grace} s) to the capacity free: {took:.2f} s")


def test_a_job_terminated_before_slurm_ran_it_is_cancelled_there(start, slurm_cluster):
    job, _ = start("qs2", "never-ran", STUBBORN, grace=2)
    job_terminate(job_id=job.pk)  # STOPPING before its submission: nothing to signal
    assert service.slurm_submit_run(job_id=job.pk, attempt=1) == "stopped before its submission"
    ended = fresh(job)
    assert (ended.state, ended.reason) == ("FAILED", "terminated")
    named = slurm_cluster.run(
        "squeue", "--noheader", "--states=all", f"--name={run_name(job.pk, 1)}"
    )
    assert named == ""


def test_decision_to_running_in_slurm_within_three_seconds(start, slurm_cluster):
    """Ten starts one after the other: from the pass that decides to Slurm reporting
    the job RUNNING (polled every 20 ms), through the executor's submission."""
    took = []
    for number in range(10):
        decided = time.monotonic()
        job, outcome = start("qs2", f"quick-{number}", ["python3", "-c", "pass"])
        assert outcome.started == [job.pk]
        slurm_id = submitted(job)
        while slurm_cluster.job_field(slurm_id, "JobState") not in {"RUNNING", "COMPLETED"}:
            time.sleep(0.02)
        took.append(time.monotonic() - decided)
        settle(lambda job=job: fresh(job).state == "SUCCEEDED", what=f"quick-{number} succeeds")
    took.sort()
    print(
        f"\nslurm: decision to RUNNING over {len(took)} starts: p50 {took[len(took) // 2]:.2f} s,"
        f" max {took[-1]:.2f} s ({', '.join(f'{t:.2f}' for t in took)})"
    )
    assert took[-1] < 3


def test_slurmctld_restarted_while_a_job_runs_loses_nothing_and_duplicates_nothing(
    start, slurm_cluster
):
    job, _ = start("qs2", "through-a-restart", train(600, step_seconds=0.2, every=10))
    slurm_id = submitted(job)
    settle(lambda: fresh(job).progress >= 2, what="it runs")
    waiting, _ = start("qs3", "submitted-while-down", train(600, step_seconds=0.2, every=10))

    slurm_cluster.run("scontrol", "shutdown", "slurmctld")
    try:
        # No controller: the tick records nothing and says which cluster is silent; a
        # submission is not refused (no FAILED job), it waits for the next tick.
        report = service.slurm_reconcile()
        assert report.unreachable == [slurm_cluster.conf]
        done = service.slurm_submit_run(job_id=waiting.pk, attempt=1)
        assert done.startswith("unanswered"), done
        assert fresh(job).state == fresh(waiting).state == "RUNNING"
    finally:
        slurm_cluster.run("slurmctld", "-f", slurm_cluster.conf)
    settle(lambda: not service.slurm_reconcile().unreachable, what="slurmctld answers again")
    before = fresh(job).progress
    settle(lambda: fresh(job).progress > before, what="it runs on")
    assert fresh(job).placement["job_id"] == slurm_id  # the same Slurm job, not a new one
    # The submission cut short is made by the reconciliation once its claim is stale.
    time.sleep(1.1)
    settle(lambda: (fresh(waiting).placement or {}).get("job_id"), what="the waiting run submitted")
    for run in (job, waiting):
        name = run_name(run.pk, 1)
        listed = slurm_cluster.run("squeue", "--noheader", "--states=all", f"--name={name}")
        assert len(listed.splitlines()) == 1, name


def test_a_killed_slurmd_ends_its_job_as_a_node_failure_and_the_job_is_requeued(
    start, slurm_cluster
):
    """Slurm marks the node DOWN after SlurmdTimeout (20 s on the test cluster) and the
    job NODE_FAIL; the product requeues the run (the retry rules: a lost run, not a
    preemption) and its next attempt is a new Slurm job. On this one host the old
    program outlives its slurmd until that slurmd returns and kills it, so the test
    brings the node back before the new attempt starts."""
    job, _ = start("qs2", "on-a-failing-node", train(600, step_seconds=0.2, every=5))
    submitted(job)
    running = settle(lambda: fresh(job).progress >= 5 and fresh(job), what="it runs")
    node = running.placement["nodes"]
    test_dir = Path(slurm_cluster.conf).parent.parent
    pidfile = test_dir / "run" / f"slurmd-{node}.pid"
    slurm_cluster.run("kill", pidfile.read_text().strip())
    try:
        requeued = settle(
            lambda: fresh(job).state == "RUNNABLE" and fresh(job), timeout=90, what="NODE_FAIL"
        )
    finally:
        # That cluster's directory and port: cluster.sh rewrites slurm.conf from them.
        daemons.cluster_start(slurm_cluster.conf)
    event = JobEvent.objects.get(job=job, type=JobEvent.Type.REQUEUED)
    assert event.cause == "node_fail" and requeued.requeues == 1 and requeued.preemptions == 0
    outcome = scheduling_pass(queue_id=job.queue_id, now=timezone.now())
    assert job.pk in outcome.started and fresh(job).attempt == 2
    submitted(job)
    settle(lambda: fresh(job).progress > requeued.checkpointed, what="attempt 2 runs")
    # It resumes from the checkpoint: the one recorded, or a later one the old program
    # saved before its slurmd came back (on one host it outlives the "failed" node).
    log = RunArea.of(job.pk, 2).log.read_text()
    resumed = int(log.split("starting at step ")[1].split()[0])
    assert resumed >= requeued.checkpointed > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="what a root submitter does (CI runs as root)")
def test_a_root_submitter_runs_the_job_as_its_unprivileged_account(start, slurm_cluster):
    """As the process executor's runner: the program runs as SLURM_JOB_USER (nobody),
    never as the root that submitted it."""
    import pwd

    from scheduler.executors.run_area import RunArea

    code = "import os; print('uid', os.getuid(), 'gid', os.getgid(), flush=True)"
    job, _ = start("qs2", "whoami", ["python3", "-c", code])
    submitted(job)
    settle(lambda: fresh(job).state == "SUCCEEDED", what="the job succeeds")
    nobody = pwd.getpwnam("nobody")
    log = RunArea.of(job.pk, 1).log.read_text()
    assert f"uid {nobody.pw_uid} gid {nobody.pw_gid}" in log
