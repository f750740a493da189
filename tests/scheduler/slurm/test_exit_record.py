"""The launcher's exit record decides before any requeue (issue 34, point 4), and a run
Slurm ended without one is fenced until its program is certainly gone (point 3):

- `ending_outcome` with the exit record, every way Slurm can say a run ended (no Slurm);
- a run Slurm says failed (NODE_FAIL) or forgot, with no exit record, keeps its
  capacity (RUNNING, `placement.fenced_*`) until the fence deadline, then is requeued;
  with an exit record of 0 it SUCCEEDED at its real end (the database only);
- on the real cluster, a job that exited 0 while no reconciliation ran for longer than
  Slurm's MinJobAge (Slurm forgot it) is SUCCEEDED with its real end time, not lost,
  and never runs again.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import time

import pytest
from django.utils import timezone

from fleet.models import Job, JobEvent
from scheduler import selectors
from scheduler.executors.run_area import RunArea
from scheduler.executors.slurm import launch
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.client import Ending, ExitRecord, exit_record, run_name
from scheduler.services.passes import scheduling_pass
from tests.factories import job_definition
from tests.scheduler.slurm.conftest import fresh, submitted

EXITED_0 = ExitRecord(ended_at=1.0, exit_code=0, fenced=False)
EXITED_3 = ExitRecord(ended_at=1.0, exit_code=3, fenced=False)
FENCED = ExitRecord(ended_at=1.0, exit_code=-9, fenced=True)


@pytest.mark.parametrize(
    ("ending", "noticed", "record", "outcome"),
    [
        # Exit 0 is SUCCEEDED whatever Slurm says, or forgot: finished work never reruns.
        (Ending("NODE_FAIL", None, ""), False, EXITED_0, ("exited", None)),
        (None, False, EXITED_0, ("exited", None)),
        (Ending("CANCELLED", -15, ""), False, EXITED_0, ("exited", None)),
        (Ending("CANCELLED", -15, ""), True, EXITED_0, ("exited", None)),
        (Ending("COMPLETED", 0, ""), False, EXITED_0, ("exited", None)),
        # Killed by its own watchdog: the node's loss is said as such, else fenced.
        (Ending("NODE_FAIL", None, ""), False, FENCED, ("released", service.NODE_FAIL)),
        (None, False, FENCED, ("released", service.SLURM_LOST)),
        (Ending("FAILED", -9, ""), False, FENCED, ("released", service.SLURM_FENCED)),
        (Ending("FAILED", -9, ""), True, FENCED, ("released", service.SLURM_FENCED)),
        (Ending("CANCELLED", -9, ""), False, FENCED, ("released", service.SLURM_CANCELLED)),
        (Ending("CANCELLED", -9, ""), True, FENCED, ("stopped", None)),
        # Any other exit: as without the record.
        (Ending("FAILED", 3, ""), False, EXITED_3, ("exited", None)),
        (Ending("NODE_FAIL", None, ""), False, EXITED_3, ("released", service.NODE_FAIL)),
        (None, False, EXITED_3, ("released", service.SLURM_LOST)),
        # No record: as before (the caller fences the unconfirmed ones).
        (Ending("NODE_FAIL", None, ""), False, None, ("released", service.NODE_FAIL)),
        (None, False, None, ("released", service.SLURM_LOST)),
    ],
)
def test_the_exit_record_decides_before_any_requeue(ending, noticed, record, outcome):
    assert service.ending_outcome(ending, noticed=noticed, record=record) == outcome


def test_the_product_reads_what_the_launcher_writes(tmp_path):
    """The launcher's own writer and the product's reader agree; a checkpoint_busy word,
    a symlink or garbage is no exit record."""
    path = tmp_path / "launcher.json"
    launch.exit_record(str(path), 0, fenced=False, at=1234.5)
    assert exit_record(path) == ExitRecord(ended_at=1234.5, exit_code=0, fenced=False)
    launch.exit_record(str(path), -9, fenced=True, at=1.0)
    assert exit_record(path) == ExitRecord(ended_at=1.0, exit_code=-9, fenced=True)
    launch.exit_record(str(path), None, fenced=True, at=2.0)  # the watchdog's: killed
    assert exit_record(path) == ExitRecord(ended_at=2.0, exit_code=-9, fenced=True)
    assert not list(tmp_path.glob("*.tmp"))  # written whole, through a renamed file
    launch.write_launcher(str(path), checkpoint_busy=3.0)
    assert exit_record(path) is None
    path.write_text("not json")
    assert exit_record(path) is None
    target = tmp_path / "elsewhere.json"
    launch.exit_record(str(target), 0, fenced=False)
    path.unlink()
    path.symlink_to(target)
    assert exit_record(path) is None  # never followed


@pytest.fixture
def slurm_run(db, queue, submit, settings, tmp_path):
    """A run the product started on a Slurm queue and recorded as Slurm job 4242
    (the database only: what `record_ending` is given stands for Slurm's answer)."""
    settings.JOB_CHECKPOINT_ROOT = tmp_path / "checkpoints"
    settings.SLURM_FENCE_SECONDS = 5
    settings.JOB_KILL_MARGIN_SECONDS = 3
    queue.executor = "slurm"
    queue.save()
    revision = job_definition(queue, name="fenced-work", command=["true"])
    job = submit("qs2", "fenced-work", revision=revision, at=None)
    scheduling_pass(queue_id=queue.pk, now=timezone.now())
    token = service._claim(job.pk, 1, timezone.now(), stale=False)
    placement = {"job_id": "4242", "state": "RUNNING", "nodes": "node2"}
    Job.objects.filter(pk=job.pk).update(worker="slurm:4242", placement=placement)
    assert token and fresh(job).state == "RUNNING"
    RunArea.of(job.pk, 1).prepare()
    return fresh(job)


def ended(job: Job, ending: Ending | None, now: dt.datetime) -> service.Reconciliation:
    report = service.Reconciliation()
    state = ending.state if ending else ""
    service.record_ending(
        fresh(job), "4242", ending, state=state, figures=None, now=now, report=report
    )
    return report


@pytest.mark.django_db
@pytest.mark.parametrize("ending", [Ending("NODE_FAIL", None, ""), None])
def test_an_unconfirmed_end_keeps_the_capacity_until_the_fence_deadline(slurm_run, ending):
    """No exit record: the program may run on its node. The run stays RUNNING (its
    capacity held) from the first reconciliation that saw the end until that time plus
    the fence and the kill margin (5 + 3 s), then it is requeued with its cause."""
    seen = timezone.now()
    report = ended(slurm_run, ending, seen)
    held = fresh(slurm_run)
    assert held.state == "RUNNING" and report.fenced == [held.pk] and not report.lost
    assert dt.datetime.fromisoformat(held.placement["fenced_since"]) == seen
    until = dt.datetime.fromisoformat(held.placement["fenced_until"])
    assert until == seen + dt.timedelta(seconds=8)
    reason = held.placement["fenced_reason"]
    assert reason.startswith("fenced: waiting for the program on node node2 to be confirmed")
    assert f"(until {timezone.localtime(until):%H:%M:%S})" in reason
    # The job's page and the API say why it holds its capacity, and it is not STARTING.
    held = Job.objects.select_related("queue").get(pk=held.pk)
    assert selectors.current_reason(held) == reason
    shown = selectors.shown_state(
        state=held.state, placement=held.placement, executor=held.queue.executor, worker=held.worker
    )
    assert shown == "RUNNING"
    # Later ticks keep it (the first sighting counts, not each tick's).
    ended(slurm_run, ending, seen + dt.timedelta(seconds=7.9))
    assert fresh(slurm_run).state == "RUNNING"
    assert not JobEvent.objects.filter(job=slurm_run, type=JobEvent.Type.REQUEUED).exists()
    report = ended(slurm_run, ending, seen + dt.timedelta(seconds=8))
    assert fresh(slurm_run).state == "RUNNABLE" and report.lost == [slurm_run.pk]
    cause = service.NODE_FAIL if ending else service.SLURM_LOST
    assert JobEvent.objects.get(job=slurm_run, type=JobEvent.Type.REQUEUED).cause == cause


@pytest.mark.django_db
@pytest.mark.parametrize("ending", [Ending("NODE_FAIL", None, ""), None])
def test_an_exit_record_releases_at_once_and_exit_0_succeeds_at_its_real_end(slurm_run, ending):
    started = fresh(slurm_run).started_at
    real_end = started + dt.timedelta(seconds=0.25)
    launch.exit_record(
        str(RunArea.of(slurm_run.pk, 1).launcher), 0, fenced=False, at=real_end.timestamp()
    )
    now = timezone.now() + dt.timedelta(seconds=30)  # seen long after
    ended(slurm_run, ending, now)
    done = fresh(slurm_run)
    assert (done.state, done.exit_code, done.attempt) == ("SUCCEEDED", 0, 1)
    assert abs((done.finished_at - real_end).total_seconds()) < 0.002
    assert JobEvent.objects.get(job=done, type=JobEvent.Type.SUCCEEDED).at == done.finished_at
    assert not JobEvent.objects.filter(job=done, type=JobEvent.Type.REQUEUED).exists()


@pytest.mark.django_db
def test_a_killed_programs_record_releases_without_waiting(slurm_run):
    launch.exit_record(str(RunArea.of(slurm_run.pk, 1).launcher), -9, fenced=True)
    report = ended(slurm_run, Ending("NODE_FAIL", None, ""), timezone.now())
    assert fresh(slurm_run).state == "RUNNABLE" and not report.fenced
    assert JobEvent.objects.get(job=slurm_run, type=JobEvent.Type.REQUEUED).cause == (
        service.NODE_FAIL
    )


def known(slurm_cluster, slurm_id: str) -> bool:
    done = subprocess.run(
        ["scontrol", "--oneliner", "show", "job", slurm_id],
        env=slurm_cluster.env,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    if done.returncode != 0 and "Invalid job id" in done.stderr:
        return False
    assert done.returncode == 0, done.stderr
    return True


@pytest.mark.slurm
@pytest.mark.django_db
def test_a_job_that_exited_0_while_no_reconciliation_ran_past_min_job_age_succeeded(
    start, slurm_cluster
):
    """The reconciler is down (no tick at all) while the job runs, exits 0 and Slurm
    forgets it (MinJobAge, 20 s on the test cluster, then its purge). The first tick
    after finds no Slurm job: the exit record says it succeeded, when it ended."""
    job, _ = start("qs2", "ends-while-nobody-looks", ["python3", "-c", "print('done')"])
    slurm_id = submitted(job)
    deadline = time.monotonic() + 90
    while known(slurm_cluster, slurm_id):
        assert time.monotonic() < deadline, "Slurm still knows the job after 90 s"
        time.sleep(0.5)
    log = RunArea.of(job.pk, 1).log.read_text()
    said = float(re.search(re.escape(launch.ENDED) + r"([\d.]+) \(exit status 0\)", log)[1])
    report = service.slurm_reconcile()
    done = fresh(job)
    assert report.ended == [job.pk] and not report.lost and not report.fenced
    assert (done.state, done.exit_code, done.attempt) == ("SUCCEEDED", 0, 1)
    assert abs(done.finished_at.timestamp() - said) < 0.002  # its real end, not the tick's
    assert not JobEvent.objects.filter(job=job, type=JobEvent.Type.REQUEUED).exists()
    # Never again: passes and ticks start nothing of it, Slurm has no other run of it.
    scheduling_pass(queue_id=job.queue_id, now=timezone.now())
    service.slurm_reconcile()
    assert fresh(job).attempt == 1
    listed = slurm_cluster.run("squeue", "--noheader", "--states=all", "--format=%j")
    assert run_name(job.pk, 2) not in listed.split()
    late = timezone.now().timestamp() - said
    print(f"\nslurm: forgotten, first tick {late:.1f} s after its end: SUCCEEDED at its end")
