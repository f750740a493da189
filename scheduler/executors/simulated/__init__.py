"""The `simulated` executor: no process runs; a job's work follows the model of
`scheduler.work` on an accelerated clock, and a pass finishes the jobs whose modelled
work is done (`due_finishes`)."""

from __future__ import annotations

import datetime as dt

from fleet.bridge import epoch_column, fetch_rows, seconds_of
from fleet.models import Job, JobQueue
from scheduler.executors import simulated_speed
from scheduler.executors.base import BaseExecutor, Capabilities
from scheduler.work import finish_at, modelled_progress, saved_progress


class SimulatedExecutor(BaseExecutor):
    name = "simulated"
    label = "Simulated (accelerated clock)"
    capabilities = Capabilities(modelled_clock=True)

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

    # Nothing to launch or tell: the next pass (or tick) finishes the work, and a pass
    # stops a STOPPING job at its modelled stop instant. No program writes an output.
