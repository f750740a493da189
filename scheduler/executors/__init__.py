"""Executors make the engine's decisions happen to jobs; one is chosen per queue.

- `simulated`: no process runs; a job's work follows the model of
  `scheduler.work` on an accelerated clock, and a pass finishes the jobs
  whose modelled work is done (`due_finishes`).
- `process`: a Celery worker serving the job's instance type (a runner) runs the
  job's definition as a sandboxed subprocess (`scheduler.executors.process`) under a
  lease; it reports progress and checkpoints (heartbeats, which renew the lease) and
  its exit, and stops the subprocess group when the run is over (preempted,
  terminated, requeued) or its lease cannot be renewed in time.
- `slurm`: the queue's Slurm cluster runs the job's definition as a batch job,
  submitted when a pass starts it (`scheduler.executors.slurm` says why then); notice is
  `scancel --full --signal=TERM`, KILL at the end of the grace; what Slurm reports
  (running, ended, gone) is brought into the database on every reconciliation tick
  (`scheduler.services.slurm`), and only an end Slurm reports frees the capacity.

Executors are told after commit, with ids: the database is the truth, a message is
only a nudge.

Each executor also says where a run's output is (`log_path`: standard output and error,
in one file), which the job page shows (`scheduler.logs`).

This module is the registry: each executor declares what it can do (`Capabilities`),
and callers ask that (`executor_for(queue).capabilities.runs_programs`,
`executor_names(runs_programs=True)` for a query), never an executor's name. Adding one is a
new class registered here with `register`, and its tests.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, fields
from pathlib import Path

from django.conf import settings

from core.celery import task
from fleet.bridge import epoch_column, fetch_rows, seconds_of
from fleet.executors import register_executor_name
from fleet.models import Job, JobQueue
from scheduler.work import finish_at, modelled_progress, saved_progress

logger = logging.getLogger(__name__)


def simulated_speed() -> float:
    return float(getattr(settings, "SIMULATED_SECONDS_PER_SECOND", 60))


def instances_queue(instance_type: str) -> str:
    """The Celery queue whose workers run jobs of an instance type."""
    return f"instances.{instance_type}"


def area_log(job_id: int, attempt: int) -> Path:
    """`attempt-<n>.log` in the job's area: where the process runner (`RunPaths.log`)
    and Slurm (`RunFiles.log`, sbatch's --output) write a run's output, the two laid
    out alike (tests/scheduler/test_job_logs.py holds them to it). Computed here: the
    executors' modules import the services, which import this registry."""
    root = Path(getattr(settings, "JOB_CHECKPOINT_ROOT", settings.VAR_DIR / "checkpoints"))
    return root / f"job-{job_id}" / f"attempt-{attempt}.log"


@dataclass(frozen=True)
class Capabilities:
    """What an executor does with a decision, as the rest of the product asks it."""

    # Start launches the job definition's argument vector as a real program, so a job
    # of its queues needs a definition with a command.
    runs_programs: bool
    # A stop sends the program SIGTERM and, at the end of its grace, SIGKILL.
    stops_with_notice: bool
    # Progress and checkpoints are what the running program reports (heartbeats), not
    # the model of scheduler.work.
    reports_progress: bool
    # What really runs is compared with the database (leases, the recovery sweep), and
    # runs lost with their worker are put back in the queue.
    reconciles: bool
    # A runner worker serving the job's instance type takes each run: without one, a
    # started job waits for it.
    needs_runner: bool
    # The work follows the model on an accelerated clock (`speed` compute seconds a
    # second); the queue's pages say its durations are in that clock. A pass finishes
    # the jobs whose modelled work is done (`due_finishes`).
    modelled_clock: bool
    # A STOPPING job's capacity is free only when the executor confirms its program
    # ended (Slurm reports the job's end): no deadline (the grace plus the kill margin)
    # frees it, and no lease requeues its runs (it has no runner).
    confirms_stops: bool = False
    # The queue's capacity is also what its cluster's nodes in service hold, as the
    # executor's reconciliation records it (JobQueue.slurm_nodes): a pass uses the lower.
    reports_nodes: bool = False


class SimulatedExecutor:
    name = "simulated"
    label = "Simulated (accelerated clock)"
    capabilities = Capabilities(
        runs_programs=False,
        stops_with_notice=False,
        reports_progress=False,
        reconciles=False,
        needs_runner=False,
        modelled_clock=True,
    )

    @property
    def speed(self) -> float:
        return simulated_speed()

    def due_finishes(self, queue: JobQueue, now: dt.datetime) -> list[tuple[Job, dt.datetime]]:
        """Running jobs whose work is done by `now`, with when, in finishing order.

        Reads a few numbers per running job and loads only the finished ones.
        """
        speed = self.speed
        rows = Job.objects.filter(queue=queue, state__in=Job.HOLDING_STATES).values_list(
            "pk",
            epoch_column("started_at"),
            "run_overhead",
            "expected_duration",
            "checkpointed",
        )
        # A little slack: the exact (datetime) check below decides.
        horizon = now.timestamp() + 1e-3
        candidates = [
            pk
            for pk, started, overhead, expected, saved in fetch_rows(rows)
            if seconds_of(started) + (overhead + max(0, expected - saved)) / speed <= horizon
        ]
        if not candidates:
            return []
        running = Job.objects.filter(pk__in=candidates)
        due = [(finish_at(job, speed), job) for job in running]
        due = [(at, job) for at, job in due if at <= now]
        due.sort(key=lambda item: (item[0], item[1].started_at, item[1].start_seq, item[1].pk))
        return [(job, at) for at, job in due]

    def interrupted(self, job: Job, now: dt.datetime) -> tuple[int, int]:
        """(progress, checkpointed) of a run stopped at `now`."""
        progress = modelled_progress(job, now, self.speed)
        return progress, max(job.checkpointed, saved_progress(job, progress))

    def progress(self, job: Job, now: dt.datetime) -> int:
        return modelled_progress(job, now, self.speed)

    def started(self, jobs: list[tuple[int, int, str]]) -> None:
        """Nothing to launch: the next pass (or tick) finishes the work."""

    def notify(self, job_ids: list[int]) -> None:
        """Nothing to tell: a pass stops a STOPPING job at its modelled stop instant."""

    def log_path(self, job_id: int, attempt: int) -> Path | None:
        """No program runs, so no run writes an output."""
        return None


class ProcessExecutor:
    name = "process"
    label = "Process (real subprocess)"
    capabilities = Capabilities(
        runs_programs=True,
        stops_with_notice=True,
        reports_progress=True,
        reconciles=True,
        needs_runner=True,
        modelled_clock=False,
    )
    speed = 1.0

    def due_finishes(self, queue, now):
        # A process reports its own exit (scheduler.services.runs.job_process_exited).
        return []

    def interrupted(self, job: Job, now: dt.datetime) -> tuple[int, int]:
        # The last heartbeat's figures: what the process itself said it had saved.
        return job.progress, job.checkpointed

    def progress(self, job: Job, now: dt.datetime) -> int:
        return job.progress

    def started(self, jobs: list[tuple[int, int, str]]) -> None:
        for job_id, attempt, instance_type in jobs:
            task("scheduler.run_job").apply_async(
                args=(job_id, attempt), queue=instances_queue(instance_type)
            )

    def notify(self, job_ids: list[int]) -> None:
        """Tell the runners at once that these runs got notice (a broadcast control
        command, `scheduler.executors.runner.job_notice`): the run renews its lease
        now, learns its grace and sends SIGTERM. A broker that cannot broadcast (the
        local filesystem one) or is down loses nothing: the run's next heartbeat, at
        most `JOB_HEARTBEAT_SECONDS` later, learns it all the same."""
        from core.celery import app

        try:
            app.control.broadcast("job_notice", arguments={"job_ids": list(job_ids)})
        except Exception:  # noqa: BLE001 - any broker failure; the heartbeat repairs it
            logger.warning("could not broadcast the notice of jobs %s", job_ids, exc_info=True)

    def log_path(self, job_id: int, attempt: int) -> Path | None:
        """The run's standard output and error, as the runner opened them."""
        return area_log(job_id, attempt)


class SlurmExecutor:
    """Runs on the queue's Slurm cluster (JobQueue.slurm_conf, slurm_partition).

    A start is submitted after commit by the `scheduler.slurm_submit` task (the
    reconciliation submits any start whose message was lost); notice is sent by
    `scheduler.slurm_notice` (and again by the reconciliation if that was lost). A run
    shows STARTING (RUNNING in the product, not yet in Slurm) until Slurm reports it
    running. Progress and checkpoints are what the program writes in its status file,
    read by each reconciliation."""

    name = "slurm"
    label = "Slurm cluster"
    capabilities = Capabilities(
        runs_programs=True,
        stops_with_notice=True,
        reports_progress=True,
        reconciles=True,
        needs_runner=False,
        modelled_clock=False,
        confirms_stops=True,
        reports_nodes=True,
    )
    speed = 1.0

    def due_finishes(self, queue, now):
        # Slurm reports the end (scheduler.services.slurm.slurm_reconcile).
        return []

    def interrupted(self, job: Job, now: dt.datetime) -> tuple[int, int]:
        return job.progress, job.checkpointed

    def progress(self, job: Job, now: dt.datetime) -> int:
        return job.progress

    def started(self, jobs: list[tuple[int, int, str]]) -> None:
        runs = [[job_id, attempt] for job_id, attempt, _type in jobs]
        try:
            task("scheduler.slurm_submit").apply_async((runs,), ignore_result=True, retry=False)
        except Exception:  # noqa: BLE001 - any broker failure; the reconciliation submits
            logger.warning("could not ask for the submission of runs %s", runs, exc_info=True)

    def notify(self, job_ids: list[int]) -> None:
        try:
            task("scheduler.slurm_notice").apply_async(
                (list(job_ids),), ignore_result=True, retry=False
            )
        except Exception:  # noqa: BLE001 - any broker failure; the reconciliation signals
            logger.warning("could not ask for the notice of jobs %s", job_ids, exc_info=True)

    def log_path(self, job_id: int, attempt: int) -> Path | None:
        """sbatch's --output: Slurm writes the job's standard output and, with no
        --error, its standard error there too (`slurm.sbatch_arguments`)."""
        return area_log(job_id, attempt)


Executor = SimulatedExecutor | ProcessExecutor | SlurmExecutor

_EXECUTORS: dict[str, Executor] = {}


def register(executor: Executor) -> Executor:
    """Add `executor` to the registry (and its name to the queues' choices)."""
    _EXECUTORS[executor.name] = executor
    register_executor_name(executor.name, executor.label)
    return executor


register(SimulatedExecutor())
register(ProcessExecutor())
register(SlurmExecutor())


def executor_named(name: str) -> Executor:
    return _EXECUTORS[name]


def executor_for(queue: JobQueue) -> Executor:
    return _EXECUTORS[queue.executor]


def executor_names(**capabilities: bool) -> list[str]:
    """The names of the executors with these capabilities (all of them when none is
    given), for a query over queues: `queue__executor__in=executor_names(...)`."""
    known = {field.name for field in fields(Capabilities)}
    unknown = capabilities.keys() - known
    if unknown:
        raise TypeError(f"no such capability: {', '.join(sorted(unknown))}")
    return [
        name
        for name, executor in _EXECUTORS.items()
        if all(getattr(executor.capabilities, key) == value for key, value in capabilities.items())
    ]
