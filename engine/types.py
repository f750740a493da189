"""Frozen values the engine takes and returns.

Policy (`QueueSpec`, `ShareSpec`), work (`JobSpec`, scenario actions), the state
at one instant (`Snapshot` of `RunningJob` and `PendingJob`) and the decisions a
pass returns (`Start`, `Preempt`, `Fail` in a `PassResult`). They are frozen so
that a snapshot handed to `schedule` cannot change under it, and hashable so
callers can cache on them; mappings are stored as `FrozenMap`, and plain dicts
are accepted wherever a mapping is expected.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .strategies import STRATEGIES  # noqa: F401  (re-exported: the names in order)

# The largest whole number a document holds: the largest JSON interoperates exactly
# (I-JSON). engine.validation bounds every whole number by it.
MAX_INTEGER = 2**53 - 1

# A strategy name, one of STRATEGIES (engine.strategies says what each does).
Strategy = str
PreemptCause = Literal["reclaim", "priority", "capacity_change"]
FailCause = Literal["retries_exhausted", "share_disabled", "terminated", "time_limit"]

# Misconfiguration reasons of the spec (rule 7), checked in this order.
SERVICE_ENVIRONMENT_MAX_RESOURCE = "SERVICE_ENVIRONMENT_MAX_RESOURCE"
QUOTA_MANAGEMENT_LIMIT_EXCEEDED = "QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
BORROWABLE_CAPACITY_EXCEEDED = "BORROWABLE_CAPACITY_EXCEEDED"
MISCONFIGURATION_REASONS = (
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
    QUOTA_MANAGEMENT_LIMIT_EXCEEDED,
    BORROWABLE_CAPACITY_EXCEEDED,
)
# Why a well-configured pending job did not start (our vocabulary).
WAITING_FOR_CAPACITY = "WAITING_FOR_CAPACITY"
SHARE_LIMIT_REACHED = "SHARE_LIMIT_REACHED"
BORROW_LIMIT_REACHED = "BORROW_LIMIT_REACHED"
BLOCKED_BEHIND_HEAD = "BLOCKED_BEHIND_HEAD"
# Today's orders (engine.ordering registers them): first-come first-served borrowing
# (rule 3.2) and the v1 victim order (rule 4).
DEFAULT_BORROWING_ORDER = "FIFO"
DEFAULT_VICTIM_ORDER = "V1"


class FrozenMap(Mapping[str, Any]):
    """An immutable, hashable mapping; equal to any mapping with the same items."""

    __slots__ = ("_data", "_hash")

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        self._data = dict(items)
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"


def _freeze(value: Mapping[str, int]) -> FrozenMap:
    return value if isinstance(value, FrozenMap) else FrozenMap(value)


@dataclass(frozen=True)
class QueueSpec:
    """The job queue: what the service environment can run at once, and queue-wide rules.

    `borrowing_order` and `victim_order` name the orders its passes choose by
    (engine.ordering); the scenario format has no field for them: today's are the
    default."""

    capacity: Mapping[str, int]
    default_preemption_retries: int | None = None
    runnable_time_limit: int | None = None
    borrowing_order: str = DEFAULT_BORROWING_ORDER
    victim_order: str = DEFAULT_VICTIM_ORDER

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", _freeze(self.capacity))


@dataclass(frozen=True)
class ShareSpec:
    """One quota share. `borrow_limit` is a percent of each limit; -1 means unlimited."""

    name: str
    capacity_limits: Mapping[str, int]
    strategy: Strategy
    borrow_limit: int = -1
    in_share_preemption: bool = False
    enabled: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity_limits", _freeze(self.capacity_limits))


@dataclass(frozen=True)
class JobSpec:
    """A training job of a scenario, as submitted."""

    id: str
    share: str
    priority: int
    instance_type: str
    instances: int
    submit_at: int
    duration: int
    checkpoint_interval: int | None = None
    restart_overhead: int = 0
    preemption_retries: int | None = None
    protected_until: int | None = None
    # The interruption contract (spec v2, V1); all 0/None is no contract.
    min_runtime_reclaim: int = 0
    min_runtime_preempt: int = 0
    grace: int = 0
    checkpoint_on_notice: int | None = None


@dataclass(frozen=True)
class SetPriority:
    at: int
    job: str
    priority: int


@dataclass(frozen=True)
class UpdateShare:
    """Replaces the named share's policy by `share` (already merged and validated)."""

    at: int
    share: ShareSpec


@dataclass(frozen=True)
class SetCapacity:
    at: int
    capacity: Mapping[str, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", _freeze(self.capacity))


@dataclass(frozen=True)
class Terminate:
    at: int
    job: str


Action = SetPriority | UpdateShare | SetCapacity | Terminate


@dataclass(frozen=True)
class Scenario:
    """A validated scenario document. `actions` are in the order they apply (time, then listed)."""

    name: str
    description: str
    queue: QueueSpec
    shares: tuple[ShareSpec, ...]
    jobs: tuple[JobSpec, ...]
    actions: tuple[Action, ...] = ()
    # A v2 document (some job names a contract field, whatever its value): the result
    # gains the v2 fields (spec V2, V12).
    contracts: bool = False


@dataclass(frozen=True)
class RunningJob:
    """A started job. `start_seq` orders jobs started at the same instant (victim tie-break).

    `submitted_at` places the job back in its share's queue if a pass preempts it (None:
    taken as `started_at`).

    Interruption contract (spec v2): `min_runtime_reclaim` / `min_runtime_preempt`
    protect the job from reclaim / in-share preemption for that many seconds from
    `run_started_at`, the start of its current run (None: taken as `started_at`);
    `grace` is the notice a victim gets, `checkpoint_on_notice` the seconds it needs to
    save and exit after notice. `stopping_until` (not None) says the job is STOPPING: it
    got notice and stops at that instant; it keeps its capacity, is never a victim of
    reclaim or in-share preemption again, and a `capacity_change` stops it first (V7,
    V10). `notice_for` names the starter waiting for it, if any (V8)."""

    id: str
    share: str
    priority: int
    instance_type: str
    instances: int
    started_at: int
    start_seq: int
    protected_until: int | None = None
    preemptions: int = 0
    preemption_retries: int | None = None
    submitted_at: int | None = None
    min_runtime_reclaim: int = 0
    min_runtime_preempt: int = 0
    grace: int = 0
    checkpoint_on_notice: int | None = None
    run_started_at: int | None = None
    stopping_until: int | None = None
    notice_for: str | None = None


@dataclass(frozen=True)
class PendingJob:
    """A RUNNABLE job.

    Queues are ordered by priority, submission time and then id (the spec's tie-break), so
    `submit_seq` is carried for the caller's records and does not order anything.
    `misconfigured_since` is when the job's current misconfiguration began (None: not
    known, taken as now); it only matters for the queue's `runnable_time_limit`.

    Spec v2 (V8): `awaiting_victims` names the STOPPING victims this job waits for (it
    chose them and does not start until they have stopped; while it waits it blocks its
    share as a head that cannot start), and `held_instances` the instances its victims
    have already freed, held for it (taken off `free(T)` for every start). The contract
    fields only matter once the job runs; they are carried for the caller.
    """

    id: str
    share: str
    priority: int
    instance_type: str
    instances: int
    submitted_at: int
    submit_seq: int = 0
    preemptions: int = 0
    preemption_retries: int | None = None
    protected_until: int | None = None
    misconfigured_since: int | None = None
    awaiting_victims: tuple[str, ...] = ()
    held_instances: int = 0


@dataclass(frozen=True)
class Snapshot:
    """The queue, its shares and its jobs at one instant: what `schedule` decides on.

    `contracts` says the caller's jobs have interruption contracts (spec v2) even when
    none in the snapshot shows one (a pending job's contract is not carried): the pass
    then applies the v2 rules, the reclaim episodes (V12) included, as the simulator
    does for a v2 document."""

    queue: QueueSpec
    shares: tuple[ShareSpec, ...]
    running: tuple[RunningJob, ...] = ()
    pending: tuple[PendingJob, ...] = ()
    contracts: bool = False

    def __post_init__(self) -> None:
        for name in ("shares", "running", "pending"):
            object.__setattr__(self, name, tuple(getattr(self, name)))


@dataclass(frozen=True)
class Start:
    """Dispatch `job`; `borrowed` when its share's usage of the type exceeds its limit with it."""

    job: str
    borrowed: bool


@dataclass(frozen=True)
class Preempt:
    """Stop `job`. `by` is the job whose start caused it; `fails` when its retry bound is spent.

    `grace_until` (spec v2, V6): not None when the victim gets notice instead: it is
    STOPPING until `stop_at` (its stop instant, at most `grace_until`), keeps its
    capacity meanwhile, and `saves` says whether it saves its progress on notice;
    `fails` then says whether it ends FAILED at its stop (V9). `by` waits for it (V8)."""

    job: str
    cause: PreemptCause
    by: str | None
    fails: bool
    grace_until: int | None = None
    stop_at: int | None = None
    saves: bool = False


@dataclass(frozen=True)
class Fail:
    job: str
    cause: FailCause


Decision = Start | Preempt | Fail


@dataclass(frozen=True)
class PassResult:
    """Decisions in the order they apply, and why each pending job that did not start waits.

    `reclaim_episodes` (spec v2, V12): the pending jobs (started in this pass or not)
    for which this pass found a reclaim episode's condition (its share's head, within
    its limit, `n > avail`, `avail + Σ over ≥ n`), with the instant; a caller that keeps
    the first such instant of a job's RUNNABLE period has the episode's begin.

    `protected_blocks` (spec v2, V4): the running jobs whose protection kept them out of
    a victim choice of this pass, each with its count (one: a pass is one instant); a
    caller that runs passes at instants of its own (a periodic tick) decides how often
    one counts."""

    decisions: tuple[Decision, ...]
    reasons: Mapping[str, str] = field(default_factory=FrozenMap)
    reclaim_episodes: Mapping[str, int] = field(default_factory=FrozenMap)
    protected_blocks: Mapping[str, int] = field(default_factory=FrozenMap)

    def __post_init__(self) -> None:
        object.__setattr__(self, "decisions", tuple(self.decisions))
        for name in ("reasons", "reclaim_episodes", "protected_blocks"):
            if not isinstance(getattr(self, name), FrozenMap):
                object.__setattr__(self, name, FrozenMap(getattr(self, name)))


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a document, at a field path such as `shares[2].borrow_limit`."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ScenarioError(ValueError):
    """A document breaks the scenario format; `problems` lists every problem found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__(str(self.problems[0]) if self.problems else "invalid scenario")
