"""The queue's clock: a simulated queue runs `speed` compute seconds per real second, so
a forecast works in compute seconds (epoch seconds x speed); `Clock` turns instants
both ways and `in_clock` puts a snapshot in the queue's clock.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from engine import PendingJob, RunningJob, Snapshot
from fleet.models import JobQueue
from scheduler.executors import executor_for


@dataclass(frozen=True)
class Clock:
    """Real instants <-> the queue's clock (compute seconds; epoch seconds x speed)."""

    speed: float
    simulated: bool

    def to_queue(self, seconds: float | None) -> int | None:
        return None if seconds is None else int(seconds * self.speed)

    def to_real(self, value: int | None) -> dt.datetime | None:
        if value is None:
            return None
        return dt.datetime.fromtimestamp(value / self.speed, tz=dt.UTC)


def queue_clock(queue: JobQueue) -> Clock:
    executor = executor_for(queue)
    simulated = executor.capabilities.modelled_clock
    return Clock(speed=executor.speed if simulated else 1.0, simulated=simulated)


def in_clock(snapshot: Snapshot, clock: Clock) -> Snapshot:
    if clock.speed == 1:
        return snapshot
    speed = clock.speed

    def q(value):
        return None if value is None else int(value * speed)

    # Built field by field: `dataclasses.replace` costs several times more per job.
    running = tuple(
        RunningJob(
            id=job.id,
            share=job.share,
            priority=job.priority,
            instance_type=job.instance_type,
            instances=job.instances,
            started_at=q(job.started_at),
            start_seq=job.start_seq,
            protected_until=q(job.protected_until),
            preemptions=job.preemptions,
            preemption_retries=job.preemption_retries,
            submitted_at=q(job.submitted_at),
        )
        for job in snapshot.running
    )
    pending = tuple(
        PendingJob(
            id=job.id,
            share=job.share,
            priority=job.priority,
            instance_type=job.instance_type,
            instances=job.instances,
            submitted_at=q(job.submitted_at),
            submit_seq=job.submit_seq,
            preemptions=job.preemptions,
            preemption_retries=job.preemption_retries,
            protected_until=q(job.protected_until),
            misconfigured_since=q(job.misconfigured_since),
        )
        for job in snapshot.pending
    )
    return replace(snapshot, running=running, pending=pending)
