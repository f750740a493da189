"""Executors make the engine's decisions happen to jobs; one is chosen per queue.

Each executor is a package of its own behind one protocol (`base.Executor`):
- `simulated`: no process runs; a job's work follows the model of `scheduler.work` on
  an accelerated clock, and a pass finishes the jobs whose modelled work is done;
- `process`: a runner worker runs the job's definition as a sandboxed subprocess under
  a lease;
- the cluster executors: the cluster runs the job's definition as a batch job,
  submitted when a pass starts it; what the cluster reports is brought into the
  database by the executor's reconciliation.

What they share (the run area, the job's account, its argument vector and environment,
the notice and status files) is `run_area`. Executors are told after commit, with ids:
the database is the truth, a message is only a nudge.

This module is the registry: callers ask an executor what it can do
(`executor_for(queue).capabilities.runs_programs`, `executor_names(runs_programs=True)`
for a query), never its name. The product's executors are registered when the
scheduler app is ready (`scheduler.apps`); adding one is its package and one
`register` call. No executor package imports another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from django.conf import settings

from fleet.executors import register_executor_name
from fleet.models import JobQueue
from scheduler.executors.base import Capabilities, Cause, Executor

__all__ = [
    "Capabilities",
    "Cause",
    "Executor",
    "cause_described",
    "executor_for",
    "executor_named",
    "executor_names",
    "instances_queue",
    "register",
    "registered",
    "simulated_speed",
    "worker_queues_in_use",
]


def simulated_speed() -> float:
    return float(getattr(settings, "SIMULATED_SECONDS_PER_SECOND", 60))


def instances_queue(instance_type: str) -> str:
    """The Celery queue whose workers run jobs of an instance type."""
    return f"instances.{instance_type}"


_EXECUTORS: dict[str, Executor] = {}


def register(executor: Executor) -> Executor:
    """Add `executor` to the registry (its name to the queues' choices, and the causes
    it reports that need a decision to the "needs a decision" list)."""
    _EXECUTORS[executor.name] = executor
    register_executor_name(
        executor.name,
        executor.label,
        decision_causes=[cause.code for cause in executor.causes if cause.needs_decision],
    )
    return executor


def registered() -> list[Executor]:
    """Every registered executor, in registration order."""
    return list(_EXECUTORS.values())


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


def cause_described(code: str, detail: Mapping[str, Any] | None) -> str | None:
    """What a job's page says of a cause an executor reports; None for a cause no
    executor declares (the scheduler's own)."""
    for executor in _EXECUTORS.values():
        for cause in executor.causes:
            if cause.code == code:
                return cause.describe(detail)
    return None


def worker_queues_in_use() -> list[str]:
    """The Celery queues of the executors' own commands (`worker_queue`) that some job
    queue needs, for whoever starts the workers (the demo)."""
    used = set(JobQueue.objects.values_list("executor", flat=True).distinct())
    return sorted(
        {
            executor.worker_queue
            for name, executor in _EXECUTORS.items()
            if executor.worker_queue and name in used
        }
    )


def queue_runs_on(queue: JobQueue, name: str | None) -> bool:
    """Whether `queue` runs on the executor named `name` (a binding proposed for one
    executor is stale once its queue moved to another)."""
    return queue.executor == name
