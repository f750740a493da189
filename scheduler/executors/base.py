"""The executor protocol: what the product asks of every executor, and nothing more.

An executor makes the engine's decisions happen to jobs. The database is the truth for
what was decided; the executor is the truth for what really runs. The rest of the
product talks to an executor only through these members (the registry,
`scheduler.executors`, finds it by the queue's `executor`):

- `capabilities`: what it does with a decision (`Capabilities`);
- `started(runs)` / `start(runs)`: after commit, ask for the runs a pass started to be
  launched (a nudge: a lost one is repaired by `reconcile`); `start` launches them, in
  the generic `scheduler.executor_start` task for executors that launch from a worker;
- `notify(job_ids)` / `stop(job_ids)`: the same for notice (stop with notice: SIGTERM,
  the grace, then SIGKILL);
- `reconcile(now)`: what really runs, what ended and how, brought into the database
  (the generic `scheduler.executor_reconcile_one` task, one per executor on its worker
  queue, asked for by `scheduler.executor_reconcile` on one beat entry);
- `capacity_seen(queue)`: instances per type the executor can really use now, when it
  knows better than the queue's configured capacity (None: it does not);
- `starting_reason(job)`: why a run it was told to start does not run yet;
- `holding_reason(job)`: why a run it reported ended still holds its capacity (its
  program may still run: fenced until it is confirmed gone), "" when none;
- `causes`: the causes it reports on jobs' events, their wording and whether each
  needs a person's decision;
- `log_path(job_id, attempt)`: where a run's standard output and error are;
- `binding`: the schema of its settings on queues and instance types (validation, a
  live check, the impact of a change), None when it has none;
- `speed`, `due_finishes`, `interrupted`, `progress`: its clock and how it counts work;
- `worker_queue`: the Celery queue its commands run on (`start`, `stop`, `reconcile`),
  when they talk to something that may not answer (a cluster's controller): a worker
  queue of its own, so an outage of that system holds only its own workers' slots and
  never another queue's pass; None: the generic tasks' routes (config/celery.py).

`BaseExecutor` gives the members an executor without that part needs (nothing to
launch, nothing to reconcile, no settings); an executor subclasses it and registers an
instance with `scheduler.executors.register`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fleet.models import InstanceType, Job, JobQueue


@dataclass(frozen=True)
class Capabilities:
    """What an executor does with a decision, as the rest of the product asks it; an
    executor states what it does (everything else is False)."""

    # Start launches the job definition's argument vector as a real program, so a job
    # of its queues needs a definition with a command.
    runs_programs: bool = False
    # A stop sends the program SIGTERM and, at the end of its grace, SIGKILL.
    stops_with_notice: bool = False
    # Progress and checkpoints are what the running program reports (heartbeats), not
    # the model of scheduler.work.
    reports_progress: bool = False
    # What really runs is compared with the database (leases, the recovery sweep, or
    # the executor's own reconciliation), and runs lost are put back in the queue.
    reconciles: bool = False
    # A runner worker serving the job's instance type takes each run: without one, a
    # started job waits for it.
    needs_runner: bool = False
    # The work follows the model on an accelerated clock (`speed` compute seconds a
    # second); the queue's pages say its durations are in that clock. A pass finishes
    # the jobs whose modelled work is done (`due_finishes`).
    modelled_clock: bool = False
    # A STOPPING job's capacity is free only when the executor confirms its program
    # ended: no deadline (the grace plus the kill margin) frees it, and no lease
    # requeues its runs (it has no runner).
    confirms_stops: bool = False
    # A definition's `network: false` is enforced: its program runs in an empty network
    # namespace. An executor without it refuses such definitions (registered for its
    # queues, or submitted to them) rather than run them on the network unsaid.
    isolates_network: bool = False
    # A definition's `max_address_space_mb` is enforced (setrlimit RLIMIT_AS on its
    # program); without it such definitions are refused the same way.
    limits_address_space: bool = False


@dataclass(frozen=True)
class Cause:
    """A cause an executor reports on a job's event (`JobEvent.cause`, `Job.reason`).

    `wording` is what the job's page says, formatted with the event's detail
    (`{reason}`, ...); `needs_decision`: a job FAILED with it waits for a person to
    decide what happens next (the "needs a decision" list)."""

    code: str
    wording: str
    needs_decision: bool = False

    def describe(self, detail: Mapping[str, Any] | None) -> str:
        try:
            return self.wording.format(**(detail or {}))
        except (KeyError, IndexError, ValueError):
            return self.wording


@dataclass(frozen=True)
class BindingField:
    """One setting of a binding, as a page shows it: its label and help, and whether it
    is a list of words (`many`: one a line) or one text of at most `max_length`."""

    name: str
    label: str
    help: str = ""
    many: bool = False
    max_length: int = 500


@runtime_checkable
class BindingSchema(Protocol):
    """An executor's settings on queues and instance types (their `executor_settings`).

    Documents are keyed as the policy history and the API show them (`queue_fields`,
    `instance_type_fields`); how they are stored is the executor's."""

    queue_fields: tuple[str, ...]
    instance_type_fields: tuple[str, ...]
    # Each field of both, described for the pages that edit them (the generic binding
    # page builds its form from these).
    field_descriptions: Mapping[str, BindingField]

    def queue_document(self, queue: JobQueue) -> dict[str, Any]: ...

    def queue_validate(
        self, *, queue: JobQueue, binding: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The binding as it would be stored, and the errors by field (a live check of
        what changed included)."""

    def queue_apply(self, *, queue: JobQueue, binding: Mapping[str, Any]) -> None:
        """Store a checked binding; the queue takes its next version."""

    def queue_impact(self, *, queue: JobQueue, binding: Mapping[str, Any]) -> list[str]:
        """What a change of the queue's binding would do, in sentences."""

    def describe(self, binding: Mapping[str, Any]) -> str: ...

    def instance_type_document(self, instance_type: InstanceType) -> dict[str, Any]: ...

    def instance_type_validate(self, binding: Mapping[str, Any]) -> dict[str, Any]:
        """The instance type's settings as they would be stored; ValidationError by field."""

    def instance_type_apply(
        self, *, instance_type: InstanceType, binding: Mapping[str, Any]
    ) -> None: ...


@runtime_checkable
class Executor(Protocol):
    name: str
    label: str
    capabilities: Capabilities
    causes: tuple[Cause, ...]
    binding: BindingSchema | None
    worker_queue: str | None

    @property
    def speed(self) -> float: ...

    def due_finishes(self, queue: JobQueue, now: dt.datetime) -> list[tuple[Job, dt.datetime]]: ...

    def interrupted(self, job: Job, now: dt.datetime) -> tuple[int, int]: ...

    def progress(self, job: Job, now: dt.datetime) -> int: ...

    def started(self, runs: list[tuple[int, int, str]]) -> None: ...

    def start(self, runs: list[tuple[int, int]]) -> list[str]: ...

    def notify(self, job_ids: list[int]) -> None: ...

    def stop(self, job_ids: list[int]) -> int: ...

    def reconcile(self, now: dt.datetime) -> dict | None: ...

    def capacity_seen(self, queue: JobQueue) -> dict[str, int | None] | None: ...

    def starting_reason(self, job: Job) -> str: ...

    def holding_reason(self, job: Job) -> str: ...

    def log_path(self, job_id: int, attempt: int) -> Path | None: ...


class BaseExecutor:
    """The members an executor without launches, reconciliation or settings needs: a
    real clock, progress as the program reported it, nothing to tell anyone."""

    name: ClassVar[str]
    label: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    causes: tuple[Cause, ...] = ()
    binding: BindingSchema | None = None
    worker_queue: str | None = None
    speed = 1.0

    def due_finishes(self, queue: JobQueue, now: dt.datetime) -> list[tuple[Job, dt.datetime]]:
        # The executor reports each end (an exit, its reconciliation).
        return []

    def interrupted(self, job: Job, now: dt.datetime) -> tuple[int, int]:
        # The last report's figures: what the program itself said it had saved.
        return job.progress, job.checkpointed

    def progress(self, job: Job, now: dt.datetime) -> int:
        return job.progress

    def started(self, runs: list[tuple[int, int, str]]) -> None:
        """Nothing to launch."""

    def start(self, runs: list[tuple[int, int]]) -> list[str]:
        return []

    def notify(self, job_ids: list[int]) -> None:
        """Nothing to tell."""

    def stop(self, job_ids: list[int]) -> int:
        return 0

    def reconcile(self, now: dt.datetime) -> dict | None:
        """None: nothing is reconciled on the executors' tick."""
        return None

    def capacity_seen(self, queue: JobQueue) -> dict[str, int | None] | None:
        return None

    def starting_reason(self, job: Job) -> str:
        """Why a run the executor was told to start does not run yet ("" once it does)."""
        return ""

    def holding_reason(self, job: Job) -> str:
        """Why a run that ended in the executor's view still holds its capacity ("")."""
        return ""

    def log_path(self, job_id: int, attempt: int) -> Path | None:
        return None
