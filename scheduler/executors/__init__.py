"""Executors make the engine's decisions happen to jobs; one is chosen per queue.

- `simulated`: no process runs; a job's work follows the model of
  `scheduler.work` on an accelerated clock, and a pass finishes the jobs
  whose modelled work is done (`due_finishes`).
- `process`: a Celery worker serving the job's instance type (a runner) runs the
  job's definition as a sandboxed subprocess (`scheduler.executors.process`) under a
  lease; it reports progress and checkpoints (heartbeats, which renew the lease) and
  its exit, and stops the subprocess group when the run is over (preempted,
  terminated, requeued) or its lease cannot be renewed in time.

Executors are told after commit, with ids: the database is the truth, a message is
only a nudge.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings

from config.celery import task
from fleet.bridge import epoch_column, fetch_rows, seconds_of
from fleet.models import Job, JobQueue
from scheduler.work import finish_at, modelled_progress, saved_progress


def simulated_speed() -> float:
    return float(getattr(settings, "SIMULATED_SECONDS_PER_SECOND", 60))


def instances_queue(instance_type: str) -> str:
    """The Celery queue whose workers run jobs of an instance type."""
    return f"instances.{instance_type}"


class SimulatedExecutor:
    name = JobQueue.Executor.SIMULATED

    @property
    def speed(self) -> float:
        return simulated_speed()

    def due_finishes(self, queue: JobQueue, now: dt.datetime) -> list[tuple[Job, dt.datetime]]:
        """Running jobs whose work is done by `now`, with when, in finishing order.

        Reads a few numbers per running job and loads only the finished ones.
        """
        speed = self.speed
        rows = Job.objects.filter(queue=queue, state=Job.State.RUNNING).values_list(
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


class ProcessExecutor:
    name = JobQueue.Executor.PROCESS
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


_EXECUTORS = {
    JobQueue.Executor.SIMULATED: SimulatedExecutor(),
    JobQueue.Executor.PROCESS: ProcessExecutor(),
}


def executor_for(queue: JobQueue) -> SimulatedExecutor | ProcessExecutor:
    return _EXECUTORS[queue.executor]
