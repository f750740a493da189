"""The work model of a job (scenario format, rule 8) applied to Job rows.

A started job progresses one compute second per compute second, after its restart
overhead when it is a restart; progress is saved at each multiple of its checkpoint
interval; a preemption loses what was done since the last save. The formulas are the
engine's (engine.work), shared with the simulator, so the live scheduler and
`simulate` agree on every figure.

`speed` is how many compute seconds pass per real second: the simulated executor's
accelerated clock, 1 for real processes. An executor that runs programs reports progress and
checkpoints itself (heartbeats); `progress_at` then takes the last report.

Neither a service nor a selector: arithmetic on Job objects (nothing is saved here),
shared by the services that write jobs, the executors and the selectors that show them.
"""

from __future__ import annotations

import datetime as dt
import math

from engine.work import checkpointed, overhead_spent, run_length, run_progress
from fleet.models import Job


def compute_seconds(start: dt.datetime, end: dt.datetime, speed: float) -> int:
    """Compute seconds between two real instants (never negative)."""
    # The epsilon absorbs float error: 0.1 s at 60x is 6, not 5.999999.
    return max(0, math.floor((end - start).total_seconds() * speed + 1e-6))


def run_elapsed(job: Job, now: dt.datetime, speed: float) -> int:
    return compute_seconds(job.started_at, now, speed)


def modelled_progress(job: Job, now: dt.datetime, speed: float) -> int:
    """Progress of a running job at `now` by the model."""
    return run_progress(
        saved=job.checkpointed,
        elapsed=run_elapsed(job, now, speed),
        overhead=job.run_overhead,
        duration=job.expected_duration,
    )


def finish_at(job: Job, speed: float) -> dt.datetime:
    """When a running job's modelled work is done."""
    remaining = run_length(
        saved=job.checkpointed, overhead=job.run_overhead, duration=job.expected_duration
    )
    return job.started_at + dt.timedelta(seconds=remaining / speed)


def on_start(job: Job, *, now: dt.datetime, speed: float, borrowed: bool, start_seq: int) -> None:
    if job.runnable_since is not None:
        job.waiting_time += compute_seconds(job.runnable_since, now, speed)
    if job.first_started_at is None:
        job.first_started_at = now
        job.run_overhead = 0
    else:
        job.run_overhead = job.restart_overhead
    job.state = Job.State.RUNNING
    job.reason = ""
    job.misconfigured_since = None
    job.runnable_since = None
    job.started_at = now
    job.start_seq = start_seq
    job.borrowed = borrowed
    job.ran_borrowed = job.ran_borrowed or borrowed
    job.attempt += 1
    job.progress = job.checkpointed
    job.heartbeat_at = None
    job.worker = ""
    job.held_instances = 0  # its wait for victims, if any, is over


def _end_run(job: Job, now: dt.datetime, speed: float) -> None:
    job.restart_overhead_spent += overhead_spent(
        elapsed=run_elapsed(job, now, speed), overhead=job.run_overhead
    )


def saved_progress(job: Job, progress: int) -> int:
    """What the model keeps of `progress`: the last multiple of the checkpoint interval."""
    return checkpointed(progress, job.checkpoint_interval)


def on_interrupt(job: Job, *, now: dt.datetime, speed: float, progress: int, saved: int) -> int:
    """Stop a run that reached `progress`, of which `saved` is checkpointed.

    Returns the work lost. The job goes back to RUNNABLE (the caller fails it when its
    retry bound is spent).
    """
    _end_run(job, now, speed)
    saved = min(saved, progress)
    lost = progress - saved
    job.lost_work += lost
    job.checkpointed = saved
    job.progress = saved
    job.state = Job.State.RUNNABLE
    job.runnable_since = now
    job.borrowed = False
    job.heartbeat_at = None
    job.worker = ""
    return lost


def on_finish(job: Job, *, at: dt.datetime, speed: float) -> None:
    _end_run(job, at, speed)
    job.state = Job.State.SUCCEEDED
    job.progress = job.expected_duration
    job.finished_at = at
    job.borrowed = False
    job.reason = ""


def on_fail(job: Job, *, now: dt.datetime, speed: float, cause: str) -> None:
    """End a job FAILED whatever its state (terminated, time limit, exit code, ...)."""
    if job.state in Job.HOLDING_STATES:
        _end_run(job, now, speed)
    elif job.state == Job.State.RUNNABLE and job.runnable_since is not None:
        job.waiting_time += compute_seconds(job.runnable_since, now, speed)
    job.state = Job.State.FAILED
    job.reason = cause
    job.finished_at = now
    job.runnable_since = None
    job.borrowed = False
