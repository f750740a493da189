"""The queue lock, written once: one writer per job queue.

Scheduling passes, submissions, requeues, policy edits (by form, API or policy file),
exceptions taking effect and history loads all change what a queue's engine sees, so
each holds its queue's row lock (`select_for_update`; on SQLite the settings open every
transaction IMMEDIATE, which makes a write transaction exclusive) until its transaction
ends. Locks on several queues are taken in name order, so two writers never deadlock.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleet.models import JobQueue


def lock_queue(queue_id: int) -> JobQueue:
    """The queue row, locked until the end of the current transaction."""
    return JobQueue.objects.select_for_update().get(pk=queue_id)


def lock_queues_named(names: Iterable[str]) -> dict[str, JobQueue]:
    """The queues of these names that exist, locked until the end of the current
    transaction, by name."""
    queues = JobQueue.objects.select_for_update().filter(name__in=set(names)).order_by("name")
    return {queue.name: queue for queue in queues}
