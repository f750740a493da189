"""The end of a grace, Slurm's limits and the checkpoint's one attempt at a time, on
the real test cluster:

- the launcher itself kills a program that ignores SIGTERM at the end of its grace,
  with no reconciliation running meanwhile (the tick's SIGUSR2 is only the fallback);
- a definition's wall-clock limit is the Slurm job's `--time`, and Slurm's TIMEOUT
  fails the job with cause `slurm_time_limit`;
- a job over its `--mem` is killed by slurmstepd (jobacct_gather's OverMemoryKill: no
  cgroups here) and fails with cause `out_of_memory`;
- a new attempt never runs while an older attempt's program still holds the job's
  checkpoint: it waits for it, or gives the run back (`checkpoint_busy`).
"""

from __future__ import annotations

import re
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import InstanceType, JobEvent
from scheduler.executors.run_area import RunArea
from scheduler.executors.slurm import binding as slurm_binding
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.launch import BUSY_EXIT, ENDED
from scheduler.services import runs
from scheduler.services.jobs import job_terminate
from scheduler.services.passes import scheduling_pass
from tests.factories import job_definition
from tests.scheduler.slurm import test_executor as on_slurm
from tests.scheduler.slurm.conftest import fresh, settle, submitted, train

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

STUBBORN = on_slurm.STUBBORN
ENDED_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}


@pytest.fixture
def start(slurm_queue, submit):
    """start(share, name, argv, **revision fields) -> the job, submitted and passed."""

    def start(share: str, name: str, argv: list[str], *, grace: int = 5, **fields):
        literal = [arg.replace("{", "{{").replace("}", "}}") for arg in argv]
        fields.setdefault("network", True)  # Slurm runs jobs on its nodes' network
        revision = job_definition(
            slurm_queue, name=name, command=literal, stop_grace_seconds=grace, **fields
        )
        job = submit(share, name, revision=revision, at=None, expected_duration=60)
        scheduling_pass(queue_id=slurm_queue.pk, now=timezone.now())
        return fresh(job)

    return start


def wait_for_line(path, text: str, *, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = path.read_text(errors="replace") if path.exists() else ""
        if text in found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:g} s: {text!r} in {path}")


def ended_at(log: str) -> tuple[float, str]:
    """When the launcher says the program ended, and how."""
    match = re.search(re.escape(ENDED) + r"([\d.]+) \(([^)]*)\)", log)
    assert match, log
    return float(match[1]), match[2]


def test_the_launcher_kills_at_the_end_of_the_grace_without_any_reconciliation(
    start, slurm_cluster
):
    grace = 3
    job = start("qs2", "stubborn-alone", STUBBORN, grace=grace)
    slurm_id = submitted(job)
    settle(lambda: (fresh(job).placement or {}).get("state") == "RUNNING", what="it runs")
    files = RunArea.of(job.pk, 1)
    wait_for_line(files.log, "ignoring SIGTERM")
    job_terminate(job_id=job.pk)
    assert service.slurm_notice(job_ids=[job.pk]) == 1
    grace_until = fresh(job).grace_until.timestamp()
    assert 0 < float(files.notice.read_text().split(":")[1].strip(" }")) <= grace

    # From here on no reconciliation runs: nothing of the product sends SIGUSR2 or
    # SIGKILL; the launcher's own timer must end the program.
    state = slurm_cluster.wait_state(slurm_id, ENDED_STATES, timeout=grace + 30)
    at, how = ended_at(files.log.read_text(errors="replace"))
    late = at - grace_until
    assert how == "killed by signal 9" and state == "FAILED"
    assert 0 <= late < 2, late  # never before the grace; at its end, not KillWait later
    assert not fresh(job).placement.get("kill_sent_at")

    ended = settle(lambda: fresh(job).state == "FAILED" and fresh(job), what="recorded")
    assert (ended.reason, ended.exit_code) == ("terminated", -9)
    assert not ended.placement.get("kill_sent_at")  # the fallback never had to fire
    print(f"\nslurm: launcher's SIGKILL {late:.3f} s after grace_until (grace {grace} s)")


def test_without_its_notice_file_the_reconciliation_ends_the_grace(start, slurm_cluster):
    """The fallback: a notice file that cannot be written (a directory in its place)
    still sends SIGTERM; the launcher arms no timer, and the first reconciliation after
    the grace sends SIGUSR2 (the same kill). Never before the grace."""
    grace = 2
    job = start("qs2", "stubborn-no-notice", STUBBORN, grace=grace)
    slurm_id = submitted(job)
    settle(lambda: (fresh(job).placement or {}).get("state") == "RUNNING", what="it runs")
    files = RunArea.of(job.pk, 1)
    wait_for_line(files.log, "ignoring SIGTERM")
    files.notice.mkdir()
    job_terminate(job_id=job.pk)
    assert service.slurm_notice(job_ids=[job.pk]) == 1
    grace_until = fresh(job).grace_until.timestamp()
    time.sleep(grace + 1)  # no tick: nothing ends it, the launcher has no timer
    assert slurm_cluster.job_field(slurm_id, "JobState") == "RUNNING"
    ended = settle(lambda: fresh(job).state == "FAILED" and fresh(job), what="SIGUSR2")
    assert ended.placement.get("kill_sent_at") and ended.exit_code == -9
    at, how = ended_at(files.log.read_text(errors="replace"))
    assert how == "killed by signal 9" and at >= grace_until + 1


def test_a_wall_clock_limit_is_slurms_time_limit_and_its_timeout_fails_the_job(
    start, slurm_cluster, client, admin
):
    job = start("qs2", "too-long", train(6000, step_seconds=0.2, every=10), wall_clock_limit=61)
    slurm_id = submitted(job)
    # 61 s is Slurm's 2 minutes: rounded up, never cut before the definition's limit.
    assert slurm_cluster.job_field(slurm_id, "TimeLimit") == "00:02:00"
    settle(lambda: fresh(job).progress >= 2, what="it runs")
    # Its limit passes now rather than in two minutes: Slurm checks limits every 30 s.
    slurm_cluster.run("scontrol", "update", f"JobId={slurm_id}", "TimeLimit=0")
    failed = settle(lambda: fresh(job).state == "FAILED" and fresh(job), timeout=90, what="TIMEOUT")
    assert slurm_cluster.job_field(slurm_id, "JobState") == "TIMEOUT"
    event = JobEvent.objects.get(job=job, type=JobEvent.Type.FAILED)
    assert failed.reason == event.cause == service.SLURM_TIME_LIMIT
    assert event.detail["slurm_state"] == "TIMEOUT"
    assert failed.requeues == failed.preemptions == 0  # a limit is the job's, not retried
    client.force_login(admin)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "time limit" in page


def test_no_wall_clock_limit_means_no_slurm_time_limit(start, slurm_cluster):
    job = start("qs2", "unlimited", ["python3", "-c", "import time; time.sleep(30)"])
    slurm_id = submitted(job)
    assert slurm_cluster.job_field(slurm_id, "TimeLimit") in {"UNLIMITED", "365-00:00:00"}
    job_terminate(job_id=job.pk)
    service.slurm_notice(job_ids=[job.pk])
    settle(lambda: fresh(job).state == "FAILED", what="terminated")


HOG = [
    "python3",
    "-c",
    "import time\n"
    "print('allocating', flush=True)\n"
    "block = bytearray(300 * 1024 * 1024)\n"
    "block[::4096] = b'x' * len(block[::4096])\n"
    "time.sleep(60)\n",
]


def test_a_job_over_its_memory_is_killed_by_slurm_and_fails_out_of_memory(
    start, slurm_cluster, client, admin
):
    itype = InstanceType.objects.get(name="ml.g5.xlarge")
    slurm_binding.instance_type_set_slurm_resources(
        instance_type=itype, resources=["--gres=gpu:1", "--mem=100M"]
    )
    job = start("qs2", "memory-hog", HOG)
    slurm_id = submitted(job)
    failed = settle(lambda: fresh(job).state == "FAILED" and fresh(job), what="killed")
    # Slurm 22.05 without cgroups: FAILED, signal 9; slurmstepd said why on the output.
    assert slurm_cluster.job_field(slurm_id, "JobState") == "FAILED"
    assert "exceeded memory limit" in RunArea.of(job.pk, 1).log.read_text(errors="replace")
    event = JobEvent.objects.get(job=job, type=JobEvent.Type.FAILED)
    assert failed.reason == event.cause == service.OUT_OF_MEMORY and failed.exit_code == -9
    assert event.detail["memory_limit"] == 100 * 1024 * 1024
    assert event.detail["memory_used"] > event.detail["memory_limit"]
    client.force_login(admin)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "memory" in page


def test_a_program_that_prints_slurms_words_but_exits_by_itself_is_not_out_of_memory(
    start, slurm_cluster
):
    """The cause is Slurm's kill (signal 9) together with slurmstepd's line, not a line."""
    fake = "slurmstepd-node1: error: StepId=1.batch exceeded memory limit (9 > 1), being killed"
    job = start("qs2", "says-oom", ["python3", "-c", f"print({fake!r}); raise SystemExit(3)"])
    submitted(job)
    failed = settle(lambda: fresh(job).state == "FAILED" and fresh(job), what="it fails")
    assert (failed.reason, failed.exit_code) == ("exit_code", 3)


# Holds the checkpoint: says when it started, and on SIGTERM takes 3 s to save and exit
# (a slow checkpoint), saying when it ended.
HOLDER = [
    "python3",
    "-c",
    "import signal, sys, time\n"
    "def bye(signum, frame):\n"
    "    time.sleep(3)\n"
    "    print('holder ended', time.time(), flush=True)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "print('holder started', time.time(), flush=True)\n"
    "while True:\n"
    "    time.sleep(0.05)\n",
]


def test_a_new_attempt_never_runs_while_an_older_one_holds_the_checkpoint(
    start, slurm_cluster, slurm_settings
):
    slurm_settings.JOB_KILL_MARGIN_SECONDS = 0.5
    slurm_settings.SLURM_CHECKPOINT_WAIT_SECONDS = 0  # attempt 2 waits 1 + 0.5 s only
    job = start("qs2", "one-at-a-time", HOLDER, grace=1)
    first = submitted(job)
    settle(lambda: (fresh(job).placement or {}).get("state") == "RUNNING", what="it runs")
    wait_for_line(RunArea.of(job.pk, 1).log, "holder started")

    # The product loses track of attempt 1 (as when Slurm forgets a job it ran), while
    # its program runs on: the retry rules start attempt 2.
    running = fresh(job)
    assert runs.job_run_released(
        job_id=job.pk, attempt=1, lease_token=running.lease_token, cause=service.SLURM_LOST
    )
    outcome = scheduling_pass(queue_id=job.queue_id, now=timezone.now())
    assert job.pk in outcome.started and fresh(job).attempt == 2
    second = submitted(job)
    # Slurm runs attempt 2 (another GPU), but its launcher never starts the program.
    slurm_cluster.wait_state(second, ENDED_STATES, timeout=60)
    assert slurm_cluster.job_field(second, "ExitCode") == f"{BUSY_EXIT}:0"
    assert slurm_cluster.job_field(first, "JobState") == "RUNNING"
    log2 = RunArea.of(job.pk, 2).log.read_text(errors="replace")
    assert "still holds its checkpoint" in log2 and "holder started" not in log2

    # The reconciliation gives attempt 2 back (checkpoint_busy) and cancels attempt 1,
    # a Slurm job of ours the product does not run; attempt 1 takes 3 s to exit.
    settle(lambda: fresh(job).state == "RUNNABLE", what="attempt 2 given back")
    event = JobEvent.objects.get(job=job, type=JobEvent.Type.REQUEUED, attempt=2)
    assert event.cause == runs.CHECKPOINT_BUSY
    slurm_settings.SLURM_CHECKPOINT_WAIT_SECONDS = 60
    outcome = scheduling_pass(queue_id=job.queue_id, now=timezone.now())
    assert job.pk in outcome.started and fresh(job).attempt == 3
    submitted(job)
    log3 = wait_for_line(RunArea.of(job.pk, 3).log, "holder started", timeout=60)
    log1 = wait_for_line(RunArea.of(job.pk, 1).log, "holder ended")
    # Attempt 3 waited for attempt 1's program to be gone, then ran.
    assert "still holds its checkpoint" in log3 and "the previous attempt is gone" in log3
    first_end = float(log1.split("holder ended ")[1].split()[0])
    third_start = float(log3.split("holder started ")[1].split()[0])
    assert third_start > first_end, (first_end, third_start)
    assert slurm_cluster.job_field(first, "JobState") in ENDED_STATES | {"COMPLETING"}
    job_terminate(job_id=job.pk)
    service.slurm_notice(job_ids=[job.pk])
    settle(lambda: fresh(job).state == "FAILED", what="terminated")
