"""Writes of the `slurm` executor: a queue's binding to its cluster (its checks and writes:
scheduler.executors.slurm.binding), the submission of
the runs a pass started, their notice, and the reconciliation of what Slurm runs with
what the database believes.

A run (an attempt of a job) on Slurm goes through:
- STARTING: the job is RUNNING in the product (the pass decided and counts its
  capacity), `worker` is "" until a submitter claims the run. The claim (a conditional
  update: `worker` = "slurm:submitting", a fresh `lease_token`) makes one submitter the
  run's; it then looks for a Slurm job of the run's name and adopts it, or submits one,
  and records its id (`placement`, `worker` = "slurm:<id>"). A submitter that died
  between the two leaves its claim, which the reconciliation takes over once it is
  `SLURM_SUBMIT_STALE_SECONDS` old: it finds the Slurm job by its name and adopts it, so
  a run is never submitted twice.
  While Slurm has not run it, each tick records Slurm's state and pending reason on
  its placement (the API and pages show it STARTING); one Slurm has not run
  `SLURM_STARTING_TIMEOUT_SECONDS` after its submission is cancelled and requeued
  (`slurm_pending`: not a preemption), and the pass that follows counts the capacity
  again.
- RUNNING: the reconciliation saw Slurm run it, and records its nodes, GPU indexes and
  start time; the first time, the job's `started_at` becomes Slurm's real start
  (`real_start`) and a RUNNING event says when; each tick it reads the program's
  status file (progress, checkpoints).
- STOPPING (notice): the notice file (what is left of the grace) then `scancel --full
  --signal=TERM` at once (`slurm_notice`, repeated by the reconciliation until sent);
  the launcher kills the program at the end of the grace by itself, the first
  reconciliation after it sends `--batch --signal=USR2` (the same kill, should the
  launcher's timer not have), and Slurm's `--signal=KILL` a kill margin later. The
  capacity stays taken until Slurm reports the job ended.
- The end, as Slurm reports it, through the same services as a runner's
  (scheduler.services.runs): an exit code (`job_process_exited`: 0 SUCCEEDED, else
  FAILED, or stopped when it had notice); a node failure, a cancel by someone else
  or a job Slurm forgot (`job_run_released`: requeued, or stopped when it had notice);
  an attempt whose launcher found the checkpoint held by an older attempt's program
  (`checkpoint_busy`, requeued); Slurm's time limit (`slurm_time_limit`) and a kill for
  memory (`out_of_memory`: Slurm's OUT_OF_MEMORY, or slurmstepd's "exceeded memory
  limit" on the output with signal 9, as without cgroups) FAILED; a submission Slurm
  refused (`job_run_failed`, cause `slurm_refused`).
- Before any of those, the launcher's exit record (the run's `launcher` file, written
  once the program's whole group is gone: scheduler.executors.slurm.launch) is read.
  Exit 0 there is SUCCEEDED, at the record's `ended_at` (bounded by the run's start and
  now), whatever Slurm says (NODE_FAIL, forgotten, cancelled without notice): finished
  work never runs twice. A program its watchdog killed (`fenced`) is requeued
  (`slurm_fenced`) unless Slurm lost the node or the job (their own causes).
- Fencing. Slurm ended the run with NODE_FAIL, or no longer knows it, and there is no
  exit record: the program may still run on its node (Slurm frees the GPUs of a node it
  cannot reach). The run keeps its capacity (RUNNING or STOPPING, so no pass gives its
  GPUs away) and `placement` records `fenced_since` (this reconciliation's time when it
  first saw the end), `fenced_until`, `fenced_cause` and `fenced_reason` ("fenced:
  waiting for the program on node X to be confirmed gone (until HH:MM:SS)"). It is
  released (requeued with its cause, or stopped if it had notice) when the exit record
  appears, or at `fenced_until` = `fenced_since` + `SLURM_FENCE_SECONDS` (or the run's
  spec's fence, if larger) + `JOB_KILL_MARGIN_SECONDS`. The bound: the launcher's
  watchdog kills the program at most the fence after the start of its last ask that
  Slurm answered "running"; that ask came before Slurm ended the job, which came before
  this reconciliation saw the end; so the program is dead by `fenced_until`, and no two
  clocks are compared. The worst-case wait for the capacity after Slurm's end: one
  reconciliation interval to see it, the fence and the margin, and one more interval to
  release it (with the defaults: 1 + 20 + 3 + 1 = 25 s). What the bound does not cover:
  a node frozen whole (watchdog included) for longer than the fence, and a process of
  the program that left its process group (setsid), which the launcher cannot kill.

The reconciliation also cancels the Slurm jobs of our name prefix that the product does
not run (a run that ended, or a duplicate), and logs each; and it records on each queue
what its partition can give the product (`nodes_seen`): the nodes in service, less what
the Slurm jobs the product did not start hold there, nothing while the partition is not
up; those jobs are listed (at most OUTSIDE_LISTED).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import secrets
from collections import defaultdict
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import transaction
from django.db.models import F, Func, JSONField, Q, Value
from django.utils import timezone

from fleet.models import Job, JobEvent, JobQueue, QueueCapacity
from scheduler.executors.run_area import RunArea, RunRefused, job_argv, read_status, write_notice
from scheduler.executors.slurm.binding import (
    SlurmBinding,
    instance_type_resources,
    slurm_executor_queues,
)
from scheduler.executors.slurm.client import (
    ENDED_STATES,
    LOST_STATES,
    RUNNING_STATES,
    Allocation,
    Cluster,
    Ending,
    ExitRecord,
    NodeAllocation,
    SlurmError,
    SlurmJob,
    SlurmNode,
    exit_record,
    expand_hostlist,
    instances_per_node,
    job_account,
    launcher_said,
    memory_kill,
    parse_run_name,
    prepare_area,
    run_name,
    sbatch_arguments,
    slurm_time,
    write_spec,
)
from scheduler.executors.slurm.launch import BUSY_EXIT
from scheduler.services import passes, runs

logger = logging.getLogger(__name__)

SUBMITTING = "slurm:submitting"

# The causes this executor reports (their wording: `SlurmExecutor.causes`).
SLURM_REFUSED = "slurm_refused"  # FAILED: Slurm refused the submission (detail: its answer)
NODE_FAIL = "node_fail"  # REQUEUED: Slurm reports the run's node failed (NODE_FAIL)
SLURM_LOST = "slurm_lost"  # REQUEUED: Slurm no longer knows a run it ran
SLURM_CANCELLED = "slurm_cancelled"  # REQUEUED: cancelled in Slurm by someone, not the product
OUT_OF_MEMORY = "out_of_memory"  # FAILED: Slurm killed it for using more memory than asked
SLURM_TIME_LIMIT = "slurm_time_limit"  # FAILED: Slurm ended it at its time limit (TIMEOUT)
SLURM_FENCED = "slurm_fenced"  # REQUEUED: its launcher's watchdog killed it (Slurm unconfirmed)
# Ends after which the program may still run on its node (Slurm lost the node, or the
# job): without the launcher's exit record the run is fenced before it is released.
UNCONFIRMED_ENDS = frozenset({NODE_FAIL, SLURM_LOST})
# REQUEUED: Slurm did not run it within SLURM_STARTING_TIMEOUT_SECONDS of its submission
# (detail: seconds, reason); not a preemption, its retry bound is kept.
SLURM_PENDING = "slurm_pending"
# The RUNNING event's: Slurm began running it (detail: where, after_start).
SLURM_RUNNING = "slurm_running"

# At most this many jobs the product did not start are listed on a queue's capacity_seen
# (the rest are counted): the page and the API stay small whatever others submit.
OUTSIDE_LISTED = 50

# -- the binding (its checks and writes: scheduler.executors.slurm.binding) ------------


def cluster_of(queue: JobQueue) -> Cluster:
    binding = SlurmBinding.of(queue)
    if not binding.conf or not binding.partition:
        raise SlurmError(f"queue {queue.name} is bound to no Slurm cluster and partition")
    return Cluster(binding.conf)


# -- submission --------------------------------------------------------------------------


def submit_stale_seconds() -> float:
    return float(getattr(settings, "SLURM_SUBMIT_STALE_SECONDS", 30))


def _claim(job_id: int, attempt: int, now: dt.datetime, *, stale: bool) -> str | None:
    """Make this caller the run's submitter: a fresh token, or None when another has it.
    `stale` also takes over a claim older than `SLURM_SUBMIT_STALE_SECONDS`."""
    token = secrets.token_urlsafe(24)
    free = Q(worker="")
    if stale:
        before = now - dt.timedelta(seconds=submit_stale_seconds())
        free |= Q(worker=SUBMITTING, heartbeat_at__lt=before)
    updated = (
        Job.objects.filter(pk=job_id, attempt=attempt, state__in=Job.HOLDING_STATES)
        .filter(free)
        .update(worker=SUBMITTING, lease_token=token, heartbeat_at=now)
    )
    return token if updated else None


def _placement(cluster: Cluster, slurm: SlurmJob, *, adopted: bool, now: dt.datetime) -> dict:
    return {
        "cluster": cluster.conf,
        "job_id": slurm.job_id,
        "state": slurm.state,
        "nodes": slurm.nodes,
        "start_time": slurm.start_time if slurm.running else "",
        "submitted_at": now.isoformat(),
        "adopted": adopted,
    }


def longest_grace(job: Job) -> float:
    """The longest grace a notice of this job can give: its contract's (a reclaim or
    preemption) or its definition's (a termination, or no contract)."""
    revision = job.definition_revision
    return float(max(job.grace or 0, revision.stop_grace_seconds if revision else 0))


def fence_seconds() -> float:
    """How long a launcher lets its program run without Slurm confirming the job."""
    return float(getattr(settings, "SLURM_FENCE_SECONDS", 20))


def checkpoint_wait_seconds(job: Job) -> float:
    """How long a new attempt waits for an older one to let go of the checkpoint
    before it gives the run back (`checkpoint_busy`): an older attempt being stopped
    is gone within its grace and the kill margin; `SLURM_CHECKPOINT_WAIT_SECONDS` more
    covers Slurm's own kill (KillWait) and a slow node."""
    extra = float(settings.SLURM_CHECKPOINT_WAIT_SECONDS)
    return longest_grace(job) + float(settings.JOB_KILL_MARGIN_SECONDS) + extra


def submit_to_slurm(job: Job, cluster: Cluster) -> str:
    """Write the run's files and sbatch it; the Slurm job id. Nothing is recorded."""
    binding = SlurmBinding.of(job.queue)
    user = job_account()  # refused before anything is written
    files = RunArea.of(job.pk, job.attempt)
    prepare_area(files, user)
    revision = job.definition_revision
    write_spec(
        files,
        job_id=job.pk,
        attempt=job.attempt,
        argv=job_argv(job),
        environment=revision.environment if revision is not None else {},
        account=user,
        lock_wait=checkpoint_wait_seconds(job),
        fence_seconds=fence_seconds(),
        conf=cluster.conf,
    )
    return cluster.submit(
        sbatch_arguments(
            name=run_name(job.pk, job.attempt),
            partition=binding.partition,
            account=binding.account,
            instances=job.instances,
            resources=instance_type_resources(job.instance_type),
            files=files,
            user=user,
            time_limit=revision.wall_clock_limit if revision is not None else None,
        )
    )


def slurm_submit_run(
    *, job_id: int, attempt: int, now: dt.datetime | None = None, stale: bool = False
) -> str:
    """Submit (or adopt) one run the product started; returns what happened, for logs."""
    now = now or timezone.now()
    token = _claim(job_id, attempt, now, stale=stale)
    if token is None:
        return "not claimed"
    job = Job.objects.select_related("queue", "instance_type", "definition_revision").get(pk=job_id)
    try:
        cluster = cluster_of(job.queue)
        try:
            job_argv(job)
        except RunRefused as refusal:
            raise SlurmError(str(refusal), refused=True) from None
        # A job of the run's name is this attempt (names carry it), live or already
        # ended: a submission that timed out may have run and ended before anyone
        # looked; adopting it records its end, submitting again would run it twice.
        named = cluster.find(run_name(job_id, attempt))
        found = [slurm for slurm in named if not slurm.ended] or named
        if found:
            slurm, adopted = found[0], True
        elif job.state == Job.State.STOPPING:  # notice before it reached Slurm
            runs.job_run_stopped(job_id=job_id, attempt=attempt, lease_token=token, exit_code=None)
            return "stopped before its submission"
        else:
            slurm_id = submit_to_slurm(job, cluster)
            slurm = SlurmJob(slurm_id, run_name(job_id, attempt), "PENDING", "", "", "")
            adopted = False
    except SlurmError as error:
        if error.refused:
            logger.error("job %s attempt %s: Slurm refused it: %s", job_id, attempt, error)
            runs.job_run_failed(
                job_id=job_id,
                attempt=attempt,
                lease_token=token,
                cause=SLURM_REFUSED,
                detail={"reason": str(error)},
            )
            return f"refused: {error}"
        # No answer: it may have reached Slurm. The claim stays; the reconciliation
        # takes it over when stale and finds the run by its name.
        logger.warning("job %s attempt %s: submission unanswered: %s", job_id, attempt, error)
        return f"unanswered: {error}"
    recorded = Job.objects.filter(pk=job_id, attempt=attempt, lease_token=token).update(
        worker=f"slurm:{slurm.job_id}",
        placement=_placement(cluster, slurm, adopted=adopted, now=now),
        heartbeat_at=now,
    )
    if not recorded:  # the run ended meanwhile: nothing of it may run
        _cancel(cluster, slurm.job_id, why=f"job {job_id} attempt {attempt} ended meanwhile")
        return "ended meanwhile"
    verb = "adopted" if adopted else "submitted"
    logger.info("job %s attempt %s: %s Slurm job %s", job_id, attempt, verb, slurm.job_id)
    return f"{verb} {slurm.job_id}"


def slurm_submit_runs(*, runs_started: list[tuple[int, int]]) -> list[str]:
    return [slurm_submit_run(job_id=job_id, attempt=attempt) for job_id, attempt in runs_started]


def _cancel(cluster: Cluster, slurm_id: str, *, why: str) -> bool:
    try:
        cluster.cancel(slurm_id)
    except SlurmError as error:
        logger.warning("could not cancel Slurm job %s (%s): %s", slurm_id, why, error)
        return False
    logger.warning("cancelled Slurm job %s: %s", slurm_id, why)
    return True


# -- notice ------------------------------------------------------------------------------


def _mark(job: Job, **marks) -> None:
    placement = {**(job.placement or {}), **marks}
    Job.objects.filter(pk=job.pk, attempt=job.attempt, lease_token=job.lease_token).update(
        placement=placement
    )
    job.placement = placement


def _signal(job: Job, cluster: Cluster, signal_name: str, mark: str, now: dt.datetime) -> bool:
    """TERM (the notice), KILL (the end of the grace: the launcher kills the program's
    group) or FULL_KILL (Slurm's own SIGKILL to every process of the job, a kill margin
    after that, should the launcher not have ended it)."""
    slurm_id = (job.placement or {}).get("job_id")
    if not slurm_id:
        return False
    try:
        if signal_name == "TERM" and job.grace_until is not None:
            # The launcher's own timer ends the grace, from this (scheduler.executors.
            # slurm_launch): written before the signal, what is left of it now.
            left = (job.grace_until - now).total_seconds()
            try:
                write_notice(RunArea.of(job.pk, job.attempt).notice, grace_seconds=left)
            except OSError as error:
                # SIGTERM all the same; the launcher then arms no timer of its own and
                # the reconciliation's SIGUSR2 ends the grace (never early, only later).
                logger.warning("job %s: cannot write its notice file: %s", job.pk, error)
        if signal_name == "KILL":
            cluster.kill(slurm_id)
        else:
            cluster.signal(slurm_id, "KILL" if signal_name == "FULL_KILL" else signal_name)
    except SlurmError as error:
        if not error.refused:
            logger.warning(
                "job %s: SIG%s to Slurm job %s: %s", job.pk, signal_name, slurm_id, error
            )
            return False
        # Refused: the job is ending already; the reconciliation records its end.
    _mark(job, **{mark: now.isoformat()})
    logger.info(
        "job %s attempt %s: SIG%s sent to Slurm job %s", job.pk, job.attempt, signal_name, slurm_id
    )
    return True


def slurm_notice(*, job_ids: list[int], now: dt.datetime | None = None) -> int:
    """SIGTERM now to the Slurm jobs of these STOPPING runs; how many were signalled."""
    now = now or timezone.now()
    sent = 0
    for job in Job.objects.select_related("queue").filter(pk__in=job_ids, state=Job.State.STOPPING):
        if (job.placement or {}).get("term_sent_at"):
            continue
        try:
            cluster = cluster_of(job.queue)
        except SlurmError:
            continue
        sent += _signal(job, cluster, "TERM", "term_sent_at", now)
    return sent


# -- reconciliation ----------------------------------------------------------------------


@dataclass
class Reconciliation:
    """What one reconciliation did, by job id (and the Slurm ids it cancelled)."""

    submitted: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    signalled: list[int] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    fenced: list[int] = field(default_factory=list)  # ended in Slurm, maybe not on the node
    taken_back: list[int] = field(default_factory=list)  # STARTING too long: slurm_pending
    cancelled: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)  # clusters that did not answer


def slurm_reconcile(*, now: dt.datetime | None = None) -> Reconciliation:
    """Compare what each Slurm cluster runs with what the database believes, and bring
    the database (or Slurm) in line; a cluster that does not answer is left for the next
    tick and the others go on."""
    now = now or timezone.now()
    report = Reconciliation()
    clusters: dict[str, list[JobQueue]] = defaultdict(list)
    for queue in slurm_executor_queues():
        conf = SlurmBinding.of(queue).conf
        if conf:
            clusters[conf].append(queue)
    for conf, queues in sorted(clusters.items()):
        try:
            _reconcile_cluster(Cluster(conf), queues, now, report)
        except SlurmError as error:
            logger.warning("Slurm cluster %s did not answer: %s", conf, error)
            report.unreachable.append(conf)
    return report


def _reconcile_cluster(
    cluster: Cluster, queues: list[JobQueue], now: dt.datetime, report: Reconciliation
) -> None:
    ours: dict[tuple[int, int], list[SlurmJob]] = defaultdict(list)
    listed = cluster.jobs()
    for slurm in listed:
        run = parse_run_name(slurm.name)
        if run is not None:
            ours[run].append(slurm)
    live = list(
        Job.objects.select_related("queue", "instance_type", "definition_revision")
        .filter(queue__in=queues, state__in=Job.HOLDING_STATES)
        .order_by("pk")
    )
    believed = {(job.pk, job.attempt) for job in live}
    waiting: PendingNotes = defaultdict(list)
    for job in live:
        _reconcile_run(
            cluster, job, ours.get((job.pk, job.attempt), []), now, report, waiting=waiting
        )
    _write_pending(waiting)
    _record_nodes(cluster, queues, live, now, outside=_outside(cluster, listed))
    strays = {run for run in ours if run not in believed}
    # A run started after the read above is not a stray: asked again, one query.
    for job_id, attempt in Job.objects.filter(
        pk__in={job_id for job_id, _ in strays}, state__in=Job.HOLDING_STATES
    ).values_list("pk", "attempt"):
        strays.discard((job_id, attempt))
    for job_id, attempt in sorted(strays):
        for slurm in ours[(job_id, attempt)]:
            if not slurm.ended and _cancel(
                cluster, slurm.job_id, why=f"job {job_id} attempt {attempt} is not running"
            ):
                report.cancelled.append(slurm.job_id)


def _reconcile_run(
    cluster: Cluster,
    job: Job,
    slurm_jobs: list[SlurmJob],
    now: dt.datetime,
    report,
    *,
    waiting: PendingNotes | None = None,
) -> None:
    placement = job.placement or {}
    recorded = placement.get("job_id") if job.worker.startswith("slurm:") else None
    if job.worker == SUBMITTING or (not job.worker and not recorded):
        if job.state == Job.State.STOPPING and not slurm_jobs and not job.worker:
            _stop_unsubmitted(job, now)
            report.ended.append(job.pk)
            return
        # Never submitted (a lost message) or a submitter gone: submit, or adopt.
        done = slurm_submit_run(job_id=job.pk, attempt=job.attempt, now=now, stale=True)
        if done.startswith(("submitted", "adopted")):
            report.submitted.append(job.pk)
        return
    if recorded is None:
        return
    mine = [slurm for slurm in slurm_jobs if slurm.job_id == recorded]
    for duplicate in slurm_jobs:
        extra = duplicate.job_id != recorded and not duplicate.ended
        if extra and _cancel(cluster, duplicate.job_id, why=f"a second Slurm job of {job.pk}"):
            report.cancelled.append(duplicate.job_id)
    slurm = mine[0] if mine else None
    figures = read_status(RunArea.of(job.pk, job.attempt).status)
    if slurm is None or slurm.ended:
        _record_end(cluster, job, recorded, slurm, figures, now, report)
        return
    if slurm.running:
        _record_running(cluster, job, slurm, figures, now, report)
    elif job.state == Job.State.RUNNING and _record_pending(
        cluster, job, slurm, now, report, waiting
    ):
        return  # taken back: Slurm did not run it in time
    if job.state == Job.State.STOPPING:
        if slurm.running:
            _deliver_notice(cluster, job, now, report)
        elif _cancel(cluster, slurm.job_id, why=f"job {job.pk} got notice before it ran"):
            report.signalled.append(job.pk)


def starting_timeout() -> float:
    return float(getattr(settings, "SLURM_STARTING_TIMEOUT_SECONDS", 60))


def real_start(job: Job, slurm: SlurmJob, now: dt.datetime) -> dt.datetime:
    """When Slurm really started the run: its StartTime, bounded by the decision (the
    job's `started_at` when the product started it: nothing of it ran before) and
    `now`; `now` when Slurm says no time."""
    start = slurm_time(slurm.start_time) or now
    if job.started_at is not None:
        start = max(start, job.started_at)
    return min(start, now)


def _devices(cluster: Cluster, slurm_id: str) -> dict[str, str]:
    """The GPU indexes the run holds per node ({"node1": "0"}), {} when Slurm does not
    say (no GPU, or no answer: the devices are shown, nothing depends on them)."""
    try:
        allocation = cluster.allocations(slurm_id).get(slurm_id)
    except SlurmError:
        return {}
    if allocation is None:
        return {}
    return {
        node: held.gpu_indexes for node, held in allocation.per_node.items() if held.gpu_indexes
    }


def running_detail(slurm: SlurmJob, devices: dict, after_start: float) -> dict:
    """The RUNNING event's detail: its Slurm job, nodes and GPUs, and `where`, the three
    in words ("Slurm job 12 on node1, GPUs node1:0"), for the cause's wording."""
    where = f"Slurm job {slurm.job_id}" + (f" on {slurm.nodes}" if slurm.nodes else "")
    if devices:
        where += ", GPUs " + ", ".join(f"{node}:{ids}" for node, ids in sorted(devices.items()))
    return {
        "slurm_job_id": slurm.job_id,
        "nodes": slurm.nodes,
        "devices": devices,
        "after_start": after_start,
        "where": where,
    }


def _record_running(
    cluster: Cluster, job: Job, slurm: SlurmJob, figures, now: dt.datetime, report
) -> None:
    """Slurm runs it: its nodes and start, and the program's figures; a row is written
    only when something of it changed (a reconciliation of 1,000 running jobs writes
    the few that moved). The first time: the run's `started_at` becomes Slurm's real
    start (run time, minimum runtimes and the evidence count from then), its devices
    are read, and a RUNNING event says when it began."""
    placement = dict(job.placement or {})
    first = placement.get("state") != "RUNNING"
    placement.update(state="RUNNING", nodes=slurm.nodes, start_time=slurm.start_time)
    placement.setdefault("running_seen_at", now.isoformat())
    placement.pop("reason", None)
    values: dict = {}
    event = None
    if first:
        started = real_start(job, slurm, now)
        placement["devices"] = _devices(cluster, slurm.job_id)
        values["started_at"] = started
        if job.first_started_at is None or job.first_started_at == job.started_at:
            values["first_started_at"] = started
        decided = job.started_at or started
        event = JobEvent(
            job=job,
            at=started,
            type=JobEvent.Type.RUNNING,
            attempt=job.attempt,
            cause=SLURM_RUNNING,
            detail=running_detail(
                slurm, placement["devices"], round((started - decided).total_seconds(), 1)
            ),
        )
    if placement != job.placement:
        values["placement"] = placement
    if figures is not None and (job.progress, job.checkpointed) != figures:
        values.update(progress=max(0, figures[0]), checkpointed=max(0, figures[1]))
    if values:
        with transaction.atomic():
            updated = Job.objects.filter(
                pk=job.pk, attempt=job.attempt, lease_token=job.lease_token
            ).update(heartbeat_at=now, **values)
            if updated and event is not None:
                event.save()
    job.placement = placement
    if first:
        job.started_at = values["started_at"]
        report.running.append(job.pk)


def _record_pending(
    cluster: Cluster,
    job: Job,
    slurm: SlurmJob,
    now: dt.datetime,
    report,
    waiting: PendingNotes | None = None,
) -> bool:
    """Slurm has not run it yet (STARTING): its state and Slurm's reason go on the
    placement when they change (noted in `waiting`, written for all runs at once by
    `_write_pending`; at once without it). Past `SLURM_STARTING_TIMEOUT_SECONDS` from
    its submission it is taken back: cancelled in Slurm and requeued (`slurm_pending`,
    not a preemption), and the pass that follows counts the capacity again (the
    reconciliation's reading of the partition says why it is short). True when taken
    back."""
    placement = dict(job.placement or {})
    placement.update(state=slurm.state, reason=slurm.reason)
    if placement != job.placement:
        if waiting is None:
            _mark(job, state=slurm.state, reason=slurm.reason)
        else:
            waiting[(slurm.state, slurm.reason)].append((job.pk, job.worker))
    submitted = slurm_time_iso(placement.get("submitted_at", ""))
    bound = starting_timeout()
    if submitted is None or (now - submitted).total_seconds() < bound:
        return False
    why = slurm.reason or slurm.state.lower()
    if not _cancel(cluster, slurm.job_id, why=f"job {job.pk} not run by Slurm in {bound:g} s"):
        return False
    done = runs.job_run_released(
        job_id=job.pk,
        attempt=job.attempt,
        lease_token=job.lease_token,
        cause=SLURM_PENDING,
        detail={"seconds": int(bound), "reason": why, "slurm_job_id": slurm.job_id},
        now=now,
    )
    if done:
        report.taken_back.append(job.pk)
    return True


# (Slurm state, reason) -> the runs (job id, worker) to record them on.
PendingNotes = dict[tuple[str, str], list[tuple[int, str]]]


class _PlacementWith(Func):
    """The placement with some keys set and the others kept, computed by the database:
    a write that never undoes another's (a notice's marks)."""

    output_field = JSONField()

    def __init__(self, values: dict):
        super().__init__(F("placement"), Value(json.dumps(values)))

    def _parts(self, compiler, connection):
        placement, before = compiler.compile(self.source_expressions[0])
        values, after = compiler.compile(self.source_expressions[1])
        return placement, values, [*before, *after]

    def as_postgresql(self, compiler, connection, **extra):
        placement, values, params = self._parts(compiler, connection)
        return f"(COALESCE({placement}, '{{}}'::jsonb) || ({values})::jsonb)", params

    def as_sqlite(self, compiler, connection, **extra):
        placement, values, params = self._parts(compiler, connection)
        return f"json_patch(COALESCE({placement}, '{{}}'), {values})", params


def _write_pending(waiting: PendingNotes) -> None:
    """Slurm's state and reason on the runs it has not run, one UPDATE per (state,
    reason): a reconciliation that finds 1,000 runs newly pending (a partition set
    down) writes them in one statement, not 1,000. A run's worker names its Slurm job
    (`slurm:<id>`), so a run taken back or ended meanwhile is not written."""
    for (state, reason), runs_of in sorted(waiting.items()):
        for start in range(0, len(runs_of), 500):
            chunk = runs_of[start : start + 500]
            Job.objects.filter(
                pk__in=[pk for pk, _ in chunk],
                worker__in=[worker for _, worker in chunk],
                state=Job.State.RUNNING,
            ).update(placement=_PlacementWith({"state": state, "reason": reason}))


def slurm_time_iso(text: str) -> dt.datetime | None:
    """An ISO time the product wrote (aware), None when absent or unreadable."""
    try:
        return dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None


def _deliver_notice(cluster: Cluster, job: Job, now: dt.datetime, report) -> None:
    placement = job.placement or {}
    if not placement.get("term_sent_at") and _signal(job, cluster, "TERM", "term_sent_at", now):
        report.signalled.append(job.pk)
    over = job.grace_until is not None and job.grace_until <= now
    if over and not placement.get("kill_sent_at"):
        if _signal(job, cluster, "KILL", "kill_sent_at", now):
            report.signalled.append(job.pk)
        return
    margin = dt.timedelta(seconds=settings.JOB_KILL_MARGIN_SECONDS)
    late = over and job.grace_until + margin <= now and not placement.get("full_kill_sent_at")
    if late and _signal(job, cluster, "FULL_KILL", "full_kill_sent_at", now):
        report.signalled.append(job.pk)


# Ends Slurm gives a cause of its own: the program did not end by itself.
FAILED_CAUSES = {"OUT_OF_MEMORY": OUT_OF_MEMORY, "TIMEOUT": SLURM_TIME_LIMIT}


def ending_outcome(
    ending: Ending | None,
    *,
    noticed: bool,
    busy: bool = False,
    over_memory: bool = False,
    record: ExitRecord | None = None,
) -> tuple[str, str | None]:
    """How the product records a Slurm job's end: ("released", cause) requeues it by the
    retry rules (Slurm lost it, its node failed, someone else cancelled it, an older
    attempt still held the checkpoint: `busy`, the launcher said so and exited
    BUSY_EXIT), ("failed", cause) fails it for a cause of Slurm's (out of memory, its
    time limit), ("stopped", None) ends its notice, ("exited", None) is its exit code's
    (0 SUCCEEDED, else FAILED). A run with notice (`noticed`) that ended any way but by
    itself stopped. `over_memory`: slurmstepd wrote on its output that it killed the job
    for its memory (jobacct_gather's OverMemoryKill, without cgroups: Slurm says FAILED
    and signal 9, not OUT_OF_MEMORY); it counts as OUT_OF_MEMORY when Slurm killed it.
    `record`: the launcher's exit record (the program is gone). Exit 0 there is
    ("exited", None), SUCCEEDED, whatever Slurm says (NODE_FAIL, forgotten, cancelled):
    finished work never runs twice; a program its watchdog killed (`fenced`) that Slurm
    did not lose is requeued (`slurm_fenced`); any other end is as without it."""
    if busy and ending is not None and ending.exit_code == BUSY_EXIT:
        return "released", runs.CHECKPOINT_BUSY
    recorded = _recorded_outcome(ending, record)
    if recorded is not None:
        return recorded
    if ending is None:
        return "released", SLURM_LOST
    if ending.state in LOST_STATES:
        return "released", NODE_FAIL
    killed = ending.exit_code == -9 and ending.state in {"FAILED", "CANCELLED"}
    if over_memory and killed and not noticed:
        return "failed", OUT_OF_MEMORY
    if ending.state == "CANCELLED" and not noticed:
        return "released", SLURM_CANCELLED
    if ending.exit_code is None:
        return "released", SLURM_LOST
    if ending.state == "CANCELLED":  # with notice: cancelled before it ran, or by us
        return "stopped", None
    if ending.state in FAILED_CAUSES and not noticed:
        return "failed", FAILED_CAUSES[ending.state]
    return "exited", None


def _recorded_outcome(
    ending: Ending | None, record: ExitRecord | None
) -> tuple[str, str | None] | None:
    """What the exit record alone decides (see `ending_outcome`), None: nothing."""
    if record is None:
        return None
    if record.exit_code == 0:
        return "exited", None
    lost = ending is None or ending.state in LOST_STATES
    if record.fenced and not lost and ending.state != "CANCELLED":
        return "released", SLURM_FENCED
    return None


def _end_time(job: Job, record: ExitRecord | None, now: dt.datetime) -> dt.datetime:
    """When the program ended: its exit record's time (the node's clock), bounded by
    the run's start and now; now without a record."""
    if record is None:
        return now
    ended = dt.datetime.fromtimestamp(record.ended_at, tz=dt.UTC)
    if job.started_at is not None:
        ended = max(ended, job.started_at)
    return min(ended, now)


def _spec_fence_seconds(job: Job) -> float:
    """The fence the run's launcher was given (its spec), 0 if it cannot be read."""
    try:
        fd = os.open(RunArea.of(job.pk, job.attempt).spec, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 0.0
    try:
        with os.fdopen(fd) as handle:
            return max(0.0, float(json.load(handle).get("fence_seconds") or 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0.0


def fence_until(job: Job, since: dt.datetime) -> dt.datetime:
    """When a run fenced at `since` is certainly gone: its launcher's fence (the larger of
    its spec's and the setting) plus the kill margin after the reconciliation first saw
    Slurm's end. The launcher counts its fence from the start of its last ask Slurm
    answered "running", which came before Slurm ended the job, which came before the
    reconciliation saw it: no two clocks are compared."""
    seconds = max(fence_seconds(), _spec_fence_seconds(job))
    return since + dt.timedelta(seconds=seconds + float(settings.JOB_KILL_MARGIN_SECONDS))


def fence_reason(job: Job, until: dt.datetime) -> str:
    nodes = (job.placement or {}).get("nodes") or ""
    names = expand_hostlist(nodes)
    where = f"node {names[0]}" if len(names) == 1 else f"nodes {nodes}" if nodes else "its node"
    return (
        f"fenced: waiting for the program on {where} to be confirmed gone "
        f"(until {timezone.localtime(until):%H:%M:%S})"
    )


def _fenced(job: Job, cause: str, now: dt.datetime, report) -> bool:
    """Slurm ended the run (its node failed, or it lost the job) and no exit record says
    the program is gone: it may still run on its node. The run keeps its capacity
    (RUNNING or STOPPING) until `fence_until` from when this reconciliation first saw
    the end (`placement.fenced_since`); True while it must wait, False once released."""
    placement = job.placement or {}
    if not placement.get("fenced_since"):
        until = fence_until(job, now)
        _mark(
            job,
            fenced_since=now.isoformat(),
            fenced_until=until.isoformat(),
            fenced_cause=cause,
            fenced_reason=fence_reason(job, until),
        )
        logger.warning(
            "job %s attempt %s: Slurm ended it (%s) with no word from its launcher; its "
            "capacity stays held until %s",
            job.pk,
            job.attempt,
            cause,
            until.isoformat(),
        )
        report.fenced.append(job.pk)
        return True
    if now < dt.datetime.fromisoformat(placement["fenced_until"]):
        report.fenced.append(job.pk)
        return True
    return False


def _record_end(
    cluster: Cluster, job: Job, slurm_id: str, slurm: SlurmJob | None, figures, now, report
) -> None:
    ending = cluster.ending(slurm_id)
    if ending is not None and ending.state not in ENDED_STATES:
        return  # submitted after squeue answered: it has not ended, the next tick sees it
    state = ending.state if ending is not None else (slurm.state if slurm else "")
    record_ending(job, slurm_id, ending, state=state, figures=figures, now=now, report=report)


def record_ending(
    job: Job, slurm_id: str, ending: Ending | None, *, state: str, figures, now, report
) -> None:
    """Record how Slurm says the run ended (`ending`, None: Slurm forgot it), read with
    the launcher's exit record first: a run whose program may still run is fenced."""
    files = RunArea.of(job.pk, job.attempt)
    record = exit_record(files.launcher)
    busy = bool(launcher_said(files.launcher).get("checkpoint_busy"))
    memory = memory_kill(files.log) if ending is not None and ending.exit_code == -9 else None
    outcome, cause = ending_outcome(
        ending,
        noticed=job.state == Job.State.STOPPING,
        busy=busy,
        over_memory=bool(memory),
        record=record,
    )
    unconfirmed = outcome == "released" and record is None and cause in UNCONFIRMED_ENDS
    if unconfirmed and _fenced(job, cause, now, report):
        return
    progress, checkpointed = figures if figures is not None else (None, None)
    common = {
        "job_id": job.pk,
        "attempt": job.attempt,
        "lease_token": job.lease_token,
        "progress": progress,
        "checkpointed": checkpointed,
        "now": now,
    }
    exit_code = ending.exit_code if ending is not None else None
    if outcome == "exited" and record is not None and record.exit_code is not None:
        exit_code = record.exit_code
        common["now"] = _end_time(job, record, now)
    _conclude(job, slurm_id, outcome, cause, exit_code, state, ending, memory, common, report)


def _conclude(
    job: Job, slurm_id: str, outcome, cause, exit_code, state, ending, memory, common, report
) -> None:
    """Record the end `ending_outcome` decided, through the runs' services."""
    if outcome == "released":
        done = runs.job_run_released(cause=cause, **common)
        logger.warning(
            "job %s attempt %s: Slurm job %s %s (%s)",
            job.pk,
            job.attempt,
            slurm_id,
            state or "is unknown to Slurm",
            cause,
        )
        if done:
            report.lost.append(job.pk)
        return
    if outcome == "failed":
        detail = {"slurm_state": state, "exit_code": exit_code, "reason": ending.reason}
        if memory is not None:
            detail.update(memory_used=memory[0], memory_limit=memory[1])
        done = runs.job_run_failed(cause=cause, detail=detail, exit_code=exit_code, **common)
    elif outcome == "stopped":
        done = runs.job_run_stopped(exit_code=exit_code, **common)
    else:
        done = runs.job_process_exited(exit_code=exit_code, **common)
    if done:
        report.ended.append(job.pk)


def _stop_unsubmitted(job: Job, now: dt.datetime) -> None:
    """A STOPPING run that never reached Slurm: nothing runs, it stops now."""
    token = _claim(job.pk, job.attempt, now, stale=False)
    if token is not None:
        runs.job_run_stopped(
            job_id=job.pk, attempt=job.attempt, lease_token=token, exit_code=None, now=now
        )


# -- nodes -------------------------------------------------------------------------------


def _outside(cluster: Cluster, listed: list[SlurmJob]) -> list[Allocation]:
    """What the jobs the product did not start (not of our name prefix) hold now: one
    `scontrol -d show job` when squeue lists any of them running, nothing asked
    otherwise. Pending ones hold nothing; running, completing, suspended ones hold their
    allocation, per node (`client.Allocation`)."""
    if not any(job.running and parse_run_name(job.name) is None for job in listed):
        return []
    return [
        allocation
        for _id, allocation in sorted(cluster.allocations().items(), key=lambda item: item[0])
        if allocation.per_node
        and allocation.state in RUNNING_STATES
        and parse_run_name(allocation.name) is None
    ]


def _left_on(node: SlurmNode, held: list[NodeAllocation]) -> SlurmNode:
    """The node less what others hold on it: CPUs, memory, GRES (an untyped GPU held
    counts against every type of GPU the node has, the safe side)."""
    if not held:
        return node
    gres = {}
    for name, count in node.gres.items():
        kind = name.split(":")[0]
        used = sum(h.gres.get(name, 0) if name in h.gres else h.gres.get(kind, 0) for h in held)
        gres[name] = max(0, count - used)
    return replace(
        node,
        cpus=max(0, node.cpus - sum(h.cpus for h in held)),
        memory_mb=max(0, node.memory_mb - sum(h.memory_mb for h in held)),
        gres=gres,
    )


def _node_instances(options: list[str], node: SlurmNode, held: list[NodeAllocation]) -> int:
    """Instances of a type that fit on what others leave of the node (none for an
    exclusive type on a node anyone else uses)."""
    if held and "--exclusive" in options:
        return 0
    return instances_per_node(options, _left_on(node, held))


def _outside_listed(outside: list[Allocation], names: set[str]) -> tuple[list[dict], int]:
    """The jobs of others on these nodes, oldest first, at most OUTSIDE_LISTED; how many
    more there are."""
    here = [allocation for allocation in outside if names & set(allocation.per_node)]
    here.sort(key=lambda a: (a.start_time, int(a.job_id) if a.job_id.isdigit() else 0))
    listed = []
    for allocation in here[:OUTSIDE_LISTED]:
        since = slurm_time(allocation.start_time)
        listed.append(
            {
                "job_id": allocation.job_id,
                "user": allocation.user,
                "name": allocation.name,
                "gpus": allocation.gpus,
                "nodes": sorted(names & set(allocation.per_node)),
                "since": since.isoformat() if since else "",
            }
        )
    return listed, max(0, len(here) - OUTSIDE_LISTED)


def nodes_seen(
    nodes: list[SlurmNode],
    resources: dict[str, list[str]],
    ours: dict[tuple[str, str], int],
    outside: list[Allocation] = (),
) -> dict:
    """What a queue can use of its partition's nodes, per instance type: `total`, what
    every node holds (by its resources), and `usable`, what the nodes that take
    jobs hold less what jobs the product did not start hold there (`outside`: their
    CPUs, memory and GPUs per node; `held_outside`, the instances they cost), plus, on
    a draining node, the instances the queue's own jobs use there (they run on; the
    rest of it takes nothing). A partition that is not up (down, drain, inactive)
    gives nothing. `ours[(type, node)]` counts the queue's jobs per node. A type whose
    resources cannot be read has `usable` None (the pass keeps its configured
    capacity). The jobs of others are listed (`outside`, at most OUTSIDE_LISTED, and
    `outside_more`) with their Slurm id, user, GPUs and start."""
    state = nodes[0].partition_state if nodes else "up"
    held: dict[str, list[NodeAllocation]] = defaultdict(list)
    for allocation in outside:
        for node_name, allocated in allocation.per_node.items():
            held[node_name].append(allocated)
    types: dict[str, dict] = {}
    for type_name, options in sorted(resources.items()):
        try:
            per_node = {node.name: instances_per_node(options, node) for node in nodes}
            left = {node.name: _node_instances(options, node, held[node.name]) for node in nodes}
        except ValueError as error:
            types[type_name] = {"total": None, "usable": None, "problem": str(error)}
            continue
        usable = held_outside = 0
        for node in nodes:
            if node.usable:
                usable += left[node.name]
                held_outside += per_node[node.name] - left[node.name]
            elif node.draining:
                usable += min(left[node.name], ours.get((type_name, node.name), 0))
        types[type_name] = {
            "total": sum(per_node.values()),
            "usable": usable if state == "up" else 0,
            "per_node": per_node,
        }
        if held_outside:
            types[type_name]["held_outside"] = held_outside
    listed, more = _outside_listed(list(outside), {node.name for node in nodes})
    seen = {
        "nodes": [
            {
                "name": node.name,
                "state": node.state,
                "usable": node.usable,
                "draining": node.draining,
                "reason": node.reason,
                "described": node.describe(),
            }
            for node in nodes
        ],
        "types": types,
    }
    if state != "up":
        seen["partition_state"] = state
    if listed:
        seen.update(outside=listed, outside_more=more)
    return seen


def _record_nodes(
    cluster: Cluster,
    queues: list[JobQueue],
    live: list[Job],
    now,
    *,
    outside: list[Allocation] = (),
) -> None:
    """Record, on each queue, what its partition's nodes can hold now (less what others
    hold there, nothing while the partition is not up); a queue whose figures changed
    gets a pass (capacity came back, or went)."""
    resources: dict[int, dict[str, list[str]]] = defaultdict(dict)
    for capacity in QueueCapacity.objects.filter(queue__in=queues).select_related("instance_type"):
        itype = capacity.instance_type
        resources[capacity.queue_id][itype.name] = instance_type_resources(itype)
    ours: dict[int, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for job in live:
        for node in expand_hostlist((job.placement or {}).get("nodes", "")):
            ours[job.queue_id][(job.instance_type.name, node)] += 1
    listed: dict[str, list[SlurmNode]] = {}
    for queue in queues:
        partition = SlurmBinding.of(queue).partition
        if partition not in listed:
            listed[partition] = cluster.nodes(partition)
        seen = nodes_seen(listed[partition], resources[queue.pk], ours[queue.pk], outside)
        seen["partition"] = partition
        before = dict(queue.capacity_seen or {})
        before.pop("seen_at", None)
        if before == seen:
            continue
        seen["seen_at"] = now.isoformat()
        JobQueue.objects.filter(pk=queue.pk).update(capacity_seen=seen)
        queue.capacity_seen = seen
        logger.info("queue %s: Slurm nodes now %s", queue.name, _usable_summary(seen))
        passes.request_pass(queue.pk)


def _usable_summary(seen: dict) -> str:
    return ", ".join(
        f"{name} {figures.get('usable')} of {figures.get('total')}"
        for name, figures in sorted(seen["types"].items())
    )
