"""The `slurm` executor: the queue's Slurm cluster runs the job's definition as a batch
job, submitted when a pass starts it (`client` says why then); notice is the notice
file and `scancel --full --signal=TERM`, a kill at the end of the grace; what Slurm
reports (running, ended, gone) is brought into the database on every reconciliation
tick (`services`), and only an end Slurm reports frees the capacity.

- `client`: the Slurm commands and a run's files (no database);
- `launch`: the batch script of every run (runs on the nodes, no Django);
- `services`: submission, notice, reconciliation and the nodes seen;
- `binding`: a queue's cluster, partition and account, an instance type's resources.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict
from pathlib import Path

from core.celery import task
from fleet.models import Job, JobQueue
from scheduler.executors.base import BaseExecutor, Capabilities, Cause
from scheduler.executors.run_area import area_log
from scheduler.executors.slurm import services
from scheduler.executors.slurm.binding import SlurmBindingSchema
from scheduler.executors.slurm.client import EXECUTOR_NAME

logger = logging.getLogger(__name__)

CAUSES = (
    Cause(services.SLURM_REFUSED, "failed: Slurm refused to run it: {reason}", needs_decision=True),
    Cause(
        services.OUT_OF_MEMORY,
        "failed: out of memory, Slurm killed it for using more memory than its "
        "instance type asks for",
        needs_decision=True,
    ),
    Cause(
        services.SLURM_TIME_LIMIT,
        "failed: Slurm ended it at its time limit (TIMEOUT)",
        needs_decision=True,
    ),
    Cause(
        services.NODE_FAIL,
        "requeued: its Slurm node failed (NODE_FAIL); it resumes from its last checkpoint",
    ),
    Cause(
        services.SLURM_CANCELLED,
        "requeued: someone cancelled it in Slurm, not the product; it resumes from "
        "its last checkpoint",
    ),
    Cause(
        services.SLURM_RUNNING,
        "Slurm began running it ({where}), {after_start:g} s after it was started; its run "
        "time counts from here",
    ),
    Cause(
        services.SLURM_PENDING,
        "requeued: Slurm did not run it within {seconds} s ({reason}); the capacity is "
        "counted again",
    ),
    Cause(
        services.SLURM_LOST,
        "requeued: Slurm no longer knows the run; it resumes from its last checkpoint",
    ),
    Cause(
        services.SLURM_FENCED,
        "requeued: Slurm did not confirm its job for a while, so its launcher stopped the "
        "program (fenced); it resumes from its last checkpoint",
    ),
)


class SlurmExecutor(BaseExecutor):
    """Runs on the queue's Slurm cluster (its binding: conf, partition, account).

    A start is submitted after commit by the generic `scheduler.executor_start` task
    (the reconciliation submits any start whose message was lost); notice is sent by
    `scheduler.executor_stop` (and again by the reconciliation if that was lost). A run
    shows STARTING (RUNNING in the product, not yet in Slurm) with Slurm's reason until
    Slurm reports it running; its run time counts from Slurm's start, and one Slurm has
    not run `SLURM_STARTING_TIMEOUT_SECONDS` after its submission is taken back
    (`slurm_pending`). The capacity it offers is what the partition's nodes in service
    hold less what jobs the product did not start hold there (`capacity_seen`).
    Progress and checkpoints are what the program writes in its status file, read by
    each reconciliation."""

    name = EXECUTOR_NAME
    label = "Slurm cluster"
    capabilities = Capabilities(
        runs_programs=True,
        stops_with_notice=True,
        reports_progress=True,
        reconciles=True,
        confirms_stops=True,
    )
    causes = CAUSES
    binding = SlurmBindingSchema()
    worker_queue = "executor.slurm"

    def started(self, runs: list[tuple[int, int, str]]) -> None:
        started = [[job_id, attempt] for job_id, attempt, _type in runs]
        try:
            task("scheduler.executor_start").apply_async(
                (self.name, started), queue=self.worker_queue, ignore_result=True, retry=False
            )
        except Exception:  # noqa: BLE001 - any broker failure; the reconciliation submits
            logger.warning("could not ask for the submission of runs %s", started, exc_info=True)

    def start(self, runs: list[tuple[int, int]]) -> list[str]:
        return services.slurm_submit_runs(runs_started=runs)

    def notify(self, job_ids: list[int]) -> None:
        try:
            task("scheduler.executor_stop").apply_async(
                (self.name, list(job_ids)),
                queue=self.worker_queue,
                ignore_result=True,
                retry=False,
            )
        except Exception:  # noqa: BLE001 - any broker failure; the reconciliation signals
            logger.warning("could not ask for the notice of jobs %s", job_ids, exc_info=True)

    def stop(self, job_ids: list[int]) -> int:
        return services.slurm_notice(job_ids=job_ids)

    def reconcile(self, now: dt.datetime) -> dict:
        return asdict(services.slurm_reconcile(now=now))

    def capacity_seen(self, queue: JobQueue) -> dict[str, int | None] | None:
        """What the partition's nodes in service hold per type less what jobs the
        product did not start hold there, 0 while the partition is not up, as the last
        reconciliation saw them (None: never seen); the pass takes the smaller of this
        and the configured capacity (fleet.bridge.usable_capacity)."""
        seen = (queue.capacity_seen or {}).get("types")
        if not seen:
            return None
        return {name: figures.get("usable") for name, figures in seen.items()}

    def starting_reason(self, job: Job) -> str:
        """A run Slurm has not started yet: why it does not run; "" once it runs."""
        placement = job.placement or {}
        if not placement.get("job_id"):
            return "started, being submitted to its Slurm cluster"
        if placement.get("state") != "RUNNING":
            state = str(placement.get("state", "")).lower() or "unknown"
            reason = placement.get("reason")
            why = f": {reason}" if reason and reason != "None" else ""
            return (
                f"started, waiting for Slurm to run it (Slurm job {placement['job_id']}, "
                f"{state}{why}); it is taken back if Slurm has not run it "
                f"{services.starting_timeout():g} s after its submission"
            )
        return ""

    def is_starting(self, job: Job) -> bool:
        """Started by the product, not yet run by Slurm (shown STARTING)."""
        return (job.placement or {}).get("state") != "RUNNING"

    def holding_reason(self, job: Job) -> str:
        """A run Slurm ended with no word from its launcher is fenced until its program
        is confirmed gone (`services`): the reason says on which node and until when."""
        return str((job.placement or {}).get("fenced_reason") or "")

    def log_path(self, job_id: int, attempt: int) -> Path | None:
        """sbatch's --output: Slurm writes the job's standard output and, with no
        --error, its standard error there too (`client.sbatch_arguments`)."""
        return area_log(job_id, attempt)
