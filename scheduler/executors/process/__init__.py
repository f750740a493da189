"""The `process` executor: a Celery worker serving the job's instance type (a runner,
`worker`) runs the job's definition as a sandboxed subprocess (`run`) under a lease; it
reports progress and checkpoints (heartbeats, which renew the lease) and its exit, and
stops the subprocess group when the run is over (preempted, terminated, requeued) or
its lease cannot be renewed in time. What really runs is reconciled by the leases (the
recovery sweep, scheduler.services.runs), not on the executors' tick."""

from __future__ import annotations

import logging
from pathlib import Path

from core.celery import task
from scheduler.executors import instances_queue
from scheduler.executors.base import BaseExecutor, Capabilities, Cause
from scheduler.executors.run_area import area_log

logger = logging.getLogger(__name__)


class ProcessExecutor(BaseExecutor):
    name = "process"
    label = "Process (real subprocess)"
    capabilities = Capabilities(
        runs_programs=True,
        stops_with_notice=True,
        reports_progress=True,
        reconciles=True,
        needs_runner=True,
        isolates_network=True,
        limits_address_space=True,
    )
    causes = (
        Cause(
            "runner_refused",
            "failed: the runner refused to run it: {reason}",
            needs_decision=True,
        ),
        Cause(
            "checkpoint_disk_full",
            "failed: checkpoint disk full: {reason}",
            needs_decision=True,
        ),
        Cause("not_claimed", "requeued: no runner took it in time; it starts again"),
        Cause(
            "runner_stopped",
            "requeued: its runner shut down and stopped it; it resumes from its last checkpoint",
        ),
    )

    def started(self, runs: list[tuple[int, int, str]]) -> None:
        for job_id, attempt, instance_type in runs:
            task("scheduler.run_job").apply_async(
                args=(job_id, attempt), queue=instances_queue(instance_type)
            )

    def notify(self, job_ids: list[int]) -> None:
        """Tell the runners at once that these runs got notice (a broadcast control
        command, `worker.job_notice`): the run renews its lease now, learns its grace
        and sends SIGTERM. A broker that cannot broadcast (the local filesystem one) or
        is down loses nothing: the run's next heartbeat, at most
        `JOB_HEARTBEAT_SECONDS` later, learns it all the same."""
        from core.celery import app

        try:
            app.control.broadcast("job_notice", arguments={"job_ids": list(job_ids)})
        except Exception:  # noqa: BLE001 - any broker failure; the heartbeat repairs it
            logger.warning("could not broadcast the notice of jobs %s", job_ids, exc_info=True)

    def log_path(self, job_id: int, attempt: int) -> Path | None:
        """The run's standard output and error, as the runner opened them."""
        return area_log(job_id, attempt)
