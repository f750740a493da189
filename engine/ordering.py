"""The orders a pass chooses by, as named strategies a queue picks (the seam fair sharing
plugs into, as Kueue picks its classical or its fair-sharing iterator).

A queue names two orders (`QueueSpec.borrowing_order`, `QueueSpec.victim_order`);
`Policy` looks them up here once per policy, so a pass never looks a name up per job.

- A **borrowing order** says in which order phase 2 tries the heads that may borrow.
  For each phase it makes a `BorrowingRound`: the pass offers it every head, takes the
  next head to try with `next()` (which removes it), and after a start offers the
  share's next head. A round may read the board at every `next()`, so an order whose
  keys change with each start (the format's v3 tournament of fair sharing, F2) is
  recomputed there without a change to the pass. An order may also have a phase 2b
  (`rebalance`), run after phase 2 with the pass's tools to stop and start jobs (v3's
  fair-share preemption, F4); today's has none.
- A **victim order** says which running jobs are stopped first. `key(job)` sorts every
  victim list of the board (each (share, type)'s running jobs, and the STOPPING jobs of
  a type): reclaim, in-share preemption and a capacity cut take them in that order.
  `choose(board, candidates, taken)` says which share a reclaim takes its next victim
  from, given each over-limit share's first valid candidate (the format's v3 F3
  descends the tree by weighted share there).

Today's orders are the only ones registered:

- `FIFO` (rule 3.2): oldest submission first, then id;
- `V1` (rule 4): lowest priority first, then the most recent start, then the later
  start in that instant's event order (`start_seq`), then id; a reclaim takes the
  candidate first in that order, whatever its share.

Every key ends with the job id, so it is total and the same input gives the same output.
A new order is a class with these methods and one `register_*` call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from heapq import heappop, heappush
from typing import Any, Protocol

from .types import DEFAULT_BORROWING_ORDER, DEFAULT_VICTIM_ORDER

# engine.board's Board and Job, engine.scheduling's PassTools. Named, not imported: both
# reach this module through engine.quota, and the project keeps its modules free of
# import cycles.
Board = Any
Job = Any
PassTools = Any


class BorrowingRound(Protocol):
    """Phase 2's order for one pass: heads in, the next head to try out. Every head
    offered comes out once (so a lone candidate is tried without a round)."""

    def offer(self, job: Job) -> None: ...

    def next(self) -> Job | None: ...


class BorrowingOrder(Protocol):
    name: str
    # Phase 2b, between borrowing and in-share preemption, or None: given the pass's
    # tools (engine.scheduling.PassTools), what the order does for the heads that could
    # not borrow (v3's fair-share preemption, F4, stops borrowers above their share).
    rebalance: Callable[[PassTools], None] | None

    def round(self, board: Board | None) -> BorrowingRound:
        """A round over `board` (None: the heads alone, as a detached explanation asks)."""
        ...


class VictimOrder(Protocol):
    name: str

    def key(self, job: Job) -> tuple:
        """The job's place as a victim (a running job: its start is known); total."""
        ...

    def choose(self, board: Board, candidates: list[Job], taken: Mapping[int, int]) -> Job:
        """The next reclaim victim among `candidates` (one per share still over its limit,
        each its share's first valid candidate, in listed share order); `taken` counts
        the instances of each share already chosen in this reclaim."""
        ...


# -- today's orders ---------------------------------------------------------------------


class _FifoRound:
    __slots__ = ("heap",)

    def __init__(self) -> None:
        self.heap: list[tuple] = []

    def offer(self, job: Job) -> None:
        heappush(self.heap, (job.submitted_at, job.id, job))

    def next(self) -> Job | None:
        return heappop(self.heap)[2] if self.heap else None


class FirstComeFirstServed:
    """Rule 3.2: oldest submission first, then id (the keys never change in a pass); a
    head that cannot borrow waits (no phase 2b)."""

    name = DEFAULT_BORROWING_ORDER
    rebalance = None

    def round(self, board: Board | None) -> BorrowingRound:
        return _FifoRound()


class VictimOrderV1:
    """Rule 4: lowest priority first, then most recent start, then the later start at
    that instant, then id; a reclaim takes the first candidate in that order."""

    name = DEFAULT_VICTIM_ORDER

    def key(self, job: Job) -> tuple:
        return (job.priority, -job.started_at, -job.start_seq, job.id)

    def choose(self, board: Board, candidates: list[Job], taken: Mapping[int, int]) -> Job:
        return min(candidates, key=_vkey)


def _vkey(job: Job) -> tuple:
    return job.vkey


# -- the registry -------------------------------------------------------------------------

BORROWING_ORDERS: dict[str, BorrowingOrder] = {}
VICTIM_ORDERS: dict[str, VictimOrder] = {}


def register_borrowing_order(order: BorrowingOrder) -> None:
    """Make `order` choosable by its name (a name is registered once)."""
    _register(BORROWING_ORDERS, order, "borrowing order")


def register_victim_order(order: VictimOrder) -> None:
    """Make `order` choosable by its name (a name is registered once)."""
    _register(VICTIM_ORDERS, order, "victim order")


def _register(registry: dict, order, what: str) -> None:
    if order.name in registry:
        raise ValueError(f"{what} '{order.name}' is already registered")
    registry[order.name] = order


def borrowing_order(name: str) -> BorrowingOrder:
    """The borrowing order registered as `name` (ValueError naming it if none is)."""
    return _lookup(BORROWING_ORDERS, name, "borrowing order")


def victim_order(name: str) -> VictimOrder:
    """The victim order registered as `name` (ValueError naming it if none is)."""
    return _lookup(VICTIM_ORDERS, name, "victim order")


def _lookup(registry: dict, name: str, what: str):
    order = registry.get(name)
    if order is None:
        known = ", ".join(sorted(registry))
        raise ValueError(f"unknown {what} '{name}' (known: {known})")
    return order


register_borrowing_order(FirstComeFirstServed())
register_victim_order(VictimOrderV1())
