"""Why a waiting job waits, where it stands, and when it should start.

Everything here reads the engine's own structures; no rule is written a second time:

- `explain(snapshot, now)` builds a `Board` from the snapshot, runs at `now` what
  `schedule` runs (capacity enforcement, time-limit failures, passes to the fixed
  point), and then reads, for every pending job, its place in its share's queue
  (`Board.queued`), its place in the borrowing phase's order (the heads of
  LEND_AND_BORROW shares beyond their limit, in the queue's borrowing order, as the
  pass's phase 2 would try them: engine.ordering), and
  the figures behind the engine's reason (`Ledger.blocker`, `Ledger.avail`,
  `Ledger.pool`, `reclaimable`): what it needs, what is free, which RESERVE shares hold
  idle capacity, which jobs of other shares borrow the type.
- `forecast(snapshot, now, work)` replays the snapshot forward with the simulator's
  own instant loop pieces (`Replay._record`, `_finish`, `_time_limit`, the same
  `run_passes`), seeding the board with the running and pending jobs and their work
  state, and returns when each pending job would (re)start and whether it would borrow.
  With exact durations and no later submission it gives the starts `simulate` gives.
- `capture(scenario, on_instant)` replays a scenario and hands the observer, at each
  instant with submissions (after them, before the passes), the snapshot and work state
  "as known then": what `bench_eta` estimates from, and what the tests compare with.
- `describe(...)` turns an explanation into one plain sentence, given the names of
  jobs and a way to print an instant (the caller's clock and time zone).

Pure Python, standard library only, like the rest of the engine.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from heapq import heappop

from .board import FAIL, PENDING, PREEMPT, RUNNING, START, Board, Job, board_from_snapshot
from .gc_pause import cyclic_gc_paused
from .ordering import BorrowingRound
from .quota import Ledger, Policy
from .scheduling import enforce_capacity, fail_overdue, run_passes
from .simulator import FINISH, PROTECTION_ENDS, TIME_LIMIT, Replay, SimJob
from .types import (
    BLOCKED_BEHIND_HEAD,
    BORROW_LIMIT_REACHED,
    BORROWABLE_CAPACITY_EXCEEDED,
    QUOTA_MANAGEMENT_LIMIT_EXCEEDED,
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
    SHARE_LIMIT_REACHED,
    WAITING_FOR_CAPACITY,
    JobSpec,
    PendingJob,
    RunningJob,
    Scenario,
    Snapshot,
)
from .victims import reclaimable
from .work import run_length

STARTS_NOW = "STARTS_NOW"


# -- positions and blockers ---------------------------------------------------------


@dataclass(frozen=True)
class Borrower:
    """A running job of another share beyond that share's limit of the type."""

    job: str
    share: str
    instances: int
    reclaimable: bool  # a reclaim could take it now (not protected, share still over)


@dataclass(frozen=True)
class Explanation:
    """Where a pending job stands and what holds it, in figures.

    `position` is 1-based in its share's queue (None when misconfigured: it is parked
    outside the queue); `borrow_position` its place in the borrowing phase's order
    when it is a head that would start beyond its share's limit (1 = tried first).
    `code` is the engine's reason (`STARTS_NOW` when a pass at `now` would start it).
    """

    job: str
    share: str
    instance_type: str
    instances: int
    code: str
    position: int | None
    queue_length: int
    head: str | None  # the share's head when the job is behind it
    borrow_position: int | None
    borrow_queue_length: int
    would_borrow: bool
    limit: int
    used: int  # the share's usage of the type
    borrow_cap: int | None  # most it may borrow beyond its limit (None: no cap)
    capacity: int
    free: int
    avail: int  # free minus the idle capacity other RESERVE shares hold
    pool: int  # lendable idle capacity not yet borrowed
    reserved: tuple[tuple[str, int], ...]  # (RESERVE share, idle it holds)
    borrowers: tuple[Borrower, ...]
    ceiling: int | None  # largest job its quota allows (misconfigured jobs)


def _blocker_facts(board: Board, share: int, itype: str, now: int):
    policy, ledger = board.policy, board.ledger
    reserved = []
    borrowers = []
    for other in policy.shares:
        if other.index == share:
            continue
        used = ledger.used(other, itype)
        limit = other.limits.get(itype, 0)
        if other.reserve and limit > used:
            reserved.append((other.name, limit - used))
        if used > limit:
            # The share's jobs in victim order until its excess is covered: the ones a
            # reclaim would stop first, so the ones that hold what it borrows.
            takeable = {job.id for job in reclaimable(board, other, itype, now)}
            excess = used - limit
            for _, job in board.running.get((other.index, itype), []):
                if excess <= 0:
                    break
                borrowers.append(Borrower(job.id, other.name, job.n, job.id in takeable))
                excess -= job.n
    return tuple(reserved), tuple(borrowers)


def explain(snapshot: Snapshot, now: int) -> dict[str, Explanation]:
    """An `Explanation` for every pending job of the snapshot (see the module doc)."""
    return Explainer(snapshot, now).explanations


class Explainer:
    """The board of a snapshot after the passes at `now`, and what it says about each
    pending job (`explanations`) or about a job that would be submitted now
    (`if_submitted`, answered by its `standing`, which can be kept without the board)."""

    def __init__(self, snapshot: Snapshot, now: int) -> None:
        board, pending = board_from_snapshot(snapshot)
        out: list = []
        enforce_capacity(board, out)
        board.settle(now)
        fail_overdue(board, pending, now, out)
        run_passes(board, now, out)
        self.board, self.now = board, now
        started = {entry[1].id for entry in out if entry[0] == START}
        policy, ledger = board.policy, board.ledger
        self.queues = {rule.index: board.queued(rule.index) for rule in policy.shares}
        borrow_heads = []
        for rule in policy.shares:
            queued = self.queues[rule.index]
            if queued and rule.can_borrow:
                head = queued[0]
                if not ledger.within_limit(rule, head.itype, head.n):
                    borrow_heads.append(_stand_in(head))
        borrow_heads = _borrowing_sequence(policy.borrowing_order.round(board), borrow_heads)
        self.borrow_heads = borrow_heads
        self.borrow_rank = {head.id: rank for rank, head in enumerate(borrow_heads, 1)}
        self.standing = Standing(board, now, self.queues, borrow_heads, self.borrow_rank)
        explanation = self.standing._explanation
        result: dict[str, Explanation] = {}
        for rule in policy.shares:
            queued = self.queues[rule.index]
            length = len(queued)
            for index, job in enumerate(queued):
                if index == 0:
                    code = ledger.blocker(rule, job.itype, job.n)
                    head = None
                else:
                    code = BLOCKED_BEHIND_HEAD
                    head = queued[0].id
                result[job.id] = explanation(
                    job.id, rule, job.itype, job.n, code, index + 1, length, head
                )
            for job in board.misconfigured(rule.index):
                result[job.id] = explanation(
                    job.id, rule, job.itype, job.n, job.reason, None, length, None
                )
        for job_id in started:
            result.pop(job_id, None)
        self.explanations = result

    def if_submitted(self, job: PendingJob) -> Explanation:
        return self.standing.if_submitted(job)


class Standing:
    """What the board at `now` says to a job that would be submitted then: the policy,
    the usage, each share's queue order and the blocker figures. While the board is
    attached it is read as needed; `detached()` keeps only those figures (every (share,
    type) pair's), small enough to store and to answer `if_submitted` without the board."""

    def __init__(self, board: Board, now: int, queues, borrow_heads, borrow_rank) -> None:
        self.board: Board | None = board
        self.now = now
        self.policy, self.ledger = board.policy, board.ledger
        self.keys = {
            index: [(-job.priority, job.submitted_at, job.id) for job in queued]
            for index, queued in queues.items()
        }
        self.borrow_heads = borrow_heads
        self.borrow_rank = borrow_rank
        self._facts: dict[tuple[int, str], tuple] = {}

    def detached(self) -> Standing:
        """A copy without the board: the blocker figures of every (share, type) pair."""
        for rule in self.policy.shares:
            for itype in self.policy.types:
                self._blocker(rule.index, itype)
        copy = object.__new__(Standing)
        copy.__dict__.update(self.__dict__)
        copy.board = None
        copy.ledger = Ledger(self.policy)
        for rule in self.policy.shares:
            for itype, used in self.ledger.usage[rule.index].items():
                if used:
                    copy.ledger.add(rule, itype, used)
        copy.keys = {index: sorted(keys) for index, keys in self.keys.items()}
        copy._facts = dict(self._facts)
        return copy

    def referenced(self) -> set[str]:
        """The jobs an explanation may name: each share's head and the borrowers."""
        return {keys[0][2] for keys in self.keys.values() if keys} | self.borrowers()

    def borrowers(self) -> set[str]:
        """The jobs the blocker figures name as borrowing (a sentence may say their end)."""
        return {b.job for _, borrowers in self._facts.values() for b in borrowers}

    def _blocker(self, share: int, itype: str) -> tuple:
        key = (share, itype)
        if key not in self._facts:
            if self.board is None:
                return (), ()
            self._facts[key] = _blocker_facts(self.board, share, itype, self.now)
        return self._facts[key]

    def _explanation(
        self, job_id, rule, itype, n, code, position, length, head, borrow_position=None
    ) -> Explanation:
        policy, ledger = self.policy, self.ledger
        reserved, borrowers = self._blocker(rule.index, itype)
        used = ledger.used(rule, itype)
        limit = rule.limits.get(itype, 0)
        return Explanation(
            job=job_id,
            share=rule.name,
            instance_type=itype,
            instances=n,
            code=code,
            position=position,
            queue_length=length,
            head=head,
            borrow_position=self.borrow_rank.get(job_id, borrow_position),
            borrow_queue_length=len(self.borrow_heads) + (borrow_position is not None),
            would_borrow=used + n > limit,
            limit=limit,
            used=used,
            borrow_cap=rule.caps.get(itype) if rule.can_borrow else 0,
            capacity=policy.capacity.get(itype, 0),
            free=ledger.free.get(itype, 0),
            avail=ledger.avail(rule, itype),
            pool=ledger.pool(itype),
            reserved=reserved,
            borrowers=borrowers,
            ceiling=None
            if code not in _MISCONFIGURED
            else limit + policy.borrow_ceiling(rule.index, itype),
        )

    def if_submitted(self, job: PendingJob) -> Explanation:
        """What the board says about `job` were it submitted now (it is not added): the
        engine's misconfiguration judgement, its place in its share's queue (the queue's
        own order: priority, submission, id), and the head's reason if it is first."""
        policy, ledger = self.policy, self.ledger
        rule = policy.by_name[job.share]
        itype, n = job.instance_type, job.instances
        keys = self.keys[rule.index]
        reason = policy.misconfiguration(rule.index, itype, n)
        if reason is not None:
            return self._explanation(job.id, rule, itype, n, reason, None, len(keys), None)
        key = (-job.priority, job.submitted_at, job.id)
        ahead = sum(1 for other in keys if other < key)
        if ahead:
            return self._explanation(
                job.id, rule, itype, n, BLOCKED_BEHIND_HEAD, ahead + 1, len(keys) + 1, keys[0][2]
            )
        code = ledger.blocker(rule, itype, n)
        borrow = None
        if rule.can_borrow and not ledger.within_limit(rule, itype, n):
            new = Job(
                id=job.id,
                share=rule.index,
                priority=job.priority,
                itype=itype,
                n=n,
                submitted_at=job.submitted_at,
            )
            heads = [head for head in self.borrow_heads if head.id != job.id]
            order = policy.borrowing_order.round(self.board)
            borrow = 1 + _borrowing_sequence(order, [*heads, new]).index(new)
        return self._explanation(job.id, rule, itype, n, code, 1, len(keys) + 1, None, borrow)


def _stand_in(head: Job) -> Job:
    """A copy of a head with what an order reads of it, free of the board (a detached
    standing is stored)."""
    return Job(
        id=head.id,
        share=head.share,
        priority=head.priority,
        itype=head.itype,
        n=head.n,
        submitted_at=head.submitted_at,
    )


def _borrowing_sequence(order: BorrowingRound, heads: list[Job]) -> list[Job]:
    """The heads in the order phase 2 would try them (the queue's borrowing order, no
    start in between)."""
    for head in heads:
        order.offer(head)
    sequence = []
    while (head := order.next()) is not None:
        sequence.append(head)
    return sequence


_MISCONFIGURED = (
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
    QUOTA_MANAGEMENT_LIMIT_EXCEEDED,
    BORROWABLE_CAPACITY_EXCEEDED,
)


def is_misconfigured(code: str) -> bool:
    return code in _MISCONFIGURED


# -- the forward simulation ---------------------------------------------------------


@dataclass(frozen=True)
class Work:
    """A job's work as the forecast models it (compute seconds, the queue's clock).

    `duration` is the expected total work, `saved` the checkpointed progress a (re)start
    resumes from, `overhead` the restart overhead of the current run (running jobs),
    `restarted` whether it ran before (its next start pays `restart_overhead`)."""

    duration: int
    saved: int = 0
    overhead: int = 0
    checkpoint_interval: int | None = None
    restart_overhead: int = 0
    restarted: bool = False


@dataclass(frozen=True)
class Forecast:
    """When each pending job (re)starts in the forward run, whether it borrows then, and
    when each running job is expected to end (first run only, ignoring preemption).
    A job absent from `starts` never starts in the forward run (misconfigured, or held
    forever)."""

    starts: Mapping[str, int]
    borrowed: Mapping[str, bool]
    ends: Mapping[str, int]
    preempted: Mapping[str, int]  # pending job -> how often the forward run preempts it
    # With `record`: the instants of the run and each share's usage per type after each
    # (only when it changed), to answer "when would a new job fit" (`extra_start`).
    times: tuple[int, ...] = ()
    usages: tuple[tuple[int, ...], ...] = ()


class _Forward(Replay):
    """The simulator's replay, seeded with a snapshot instead of a list of submissions."""

    def __init__(self, snapshot: Snapshot, now: int, work: Mapping[str, Work]) -> None:
        scenario = Scenario(
            name="forecast", description="", queue=snapshot.queue, shares=snapshot.shares, jobs=()
        )
        super().__init__(scenario)
        self.now = now
        self.starts: dict[str, int] = {}
        self.borrowed: dict[str, bool] = {}
        self.ends: dict[str, int] = {}
        self.preempted: dict[str, int] = {}
        index = {share.name: i for i, share in enumerate(self.shares)}
        board = self.board
        for running in snapshot.running:
            submitted = running.started_at if running.submitted_at is None else running.submitted_at
            job = self._job(running, index, work, submitted)
            job.preemptions = running.preemptions
            job.first_started_at = running.started_at
            spec_work = work.get(running.id)
            job.overhead = spec_work.overhead if spec_work else 0
            job.run_start = running.started_at
            job.token = 1
            board.place_running(job, started_at=running.started_at, start_seq=running.start_seq)
            end = running.started_at + run_length(
                saved=job.saved, overhead=job.overhead, duration=job.spec.duration
            )
            end = max(end, now)
            self.ends[job.id] = end
            self._push(end, FINISH, job, 1)
            if job.protected(now):
                self._push(job.protected_until, PROTECTION_ENDS, job, 1)
        self.targets: set[str] = set()
        self.waiting: set[str] = set()  # targets not started yet (nor failed)
        self.times: list[int] = []
        self.usages: list[tuple[int, ...]] = []
        for waiting in snapshot.pending:
            self._add_pending(waiting, index, work)

    def _job(self, seen, index, work, submitted_at) -> SimJob:
        w = work.get(seen.id) or Work(duration=1)
        spec = JobSpec(
            id=seen.id,
            share=seen.share,
            priority=seen.priority,
            instance_type=seen.instance_type,
            instances=seen.instances,
            submit_at=submitted_at,
            duration=max(1, w.duration),
            checkpoint_interval=w.checkpoint_interval,
            restart_overhead=w.restart_overhead,
            preemption_retries=seen.preemption_retries,
            protected_until=seen.protected_until,
        )
        job = SimJob(spec, index[seen.share])
        job.saved = min(w.saved, spec.duration)
        self.jobs.append(job)
        self.by_id[job.id] = job
        return job

    def _add_pending(self, waiting: PendingJob, index, work) -> None:
        job = self._job(waiting, index, work, waiting.submitted_at)
        job.preemptions = waiting.preemptions
        w = work.get(waiting.id)
        if w is not None and w.restarted:
            job.first_started_at = waiting.submitted_at
        job.misconfigured_since = waiting.misconfigured_since
        job.runnable_since = self.now
        self.board.enqueue(job)
        self.targets.add(job.id)
        limit = self.queue.runnable_time_limit
        if limit is not None and job.reason is not None and job.misconfigured_since is not None:
            self._push(
                max(self.now, job.misconfigured_since + limit),
                TIME_LIMIT,
                job,
                job.misconfigured_since,
            )

    def _record(self, now: int) -> None:
        targets, starts, waiting = self.targets, self.starts, self.waiting
        for entry in self.out:
            job = entry[1]
            job_id = job.id
            if job_id not in targets:
                continue
            if entry[0] == START:
                if job_id not in starts:
                    starts[job_id] = now
                    self.borrowed[job_id] = entry[2]
                    waiting.discard(job_id)
            elif job_id in starts:
                self.preempted[job_id] = self.preempted.get(job_id, 0) + 1
            elif entry[0] == FAIL or (entry[0] == PREEMPT and entry[4]):
                waiting.discard(job_id)
        super()._record(now)

    def _note(self, now: int) -> None:
        types = self.board.policy.types
        usage = tuple(used.get(t, 0) for used in self.board.ledger.usage for t in types)
        if not self.usages or self.usages[-1] != usage:
            self.times.append(now)
            self.usages.append(usage)

    def forward(
        self, until: Iterable[str] | None, horizon: int | None, record: bool = False
    ) -> None:
        board, heap, out = self.board, self.heap, self.out
        now = self.now
        enforce_capacity(board, out)
        if out:
            self._record(now)
        self.waiting = {
            job_id
            for job_id in (self.targets if until is None else until)
            if self.by_id[job_id].state == PENDING
        }
        board.settle(now)
        self._instant_tail(now)
        if record:
            self._note(now)
        waiting = self.waiting
        while heap and (waiting or record):
            now = heap[0][0]
            if horizon is not None and now > horizon:
                break
            while heap and heap[0][0] == now and heap[0][1] == FINISH:
                _, _, _, job, token = heappop(heap)
                if job.token == token and job.state == RUNNING:
                    self._finish(job, now)
            if board.unsettled:
                board.settle(now)
            self._instant_tail(now)
            if record:
                self._note(now)

    def _instant_tail(self, now: int) -> None:
        """Time limits, protection ends and the passes of the instant (as `Replay.run`)."""
        heap, board = self.heap, self.board
        while heap and heap[0][0] == now and heap[0][1] == TIME_LIMIT:
            _, _, _, job, since = heappop(heap)
            self._time_limit(job, since, now)
        while heap and heap[0][0] == now:
            _, _, _, job, token = heappop(heap)
            if job.token == token and job.state == RUNNING:
                board.protection_ended(job)
        run_passes(board, now, self.out)
        if self.out:
            self._record(now)


def forecast(
    snapshot: Snapshot,
    now: int,
    work: Mapping[str, Work],
    *,
    extra: Iterable[tuple[PendingJob, Work]] = (),
    until: Iterable[str] | None = None,
    horizon: int | None = None,
    record: bool = False,
) -> Forecast:
    """Replay the snapshot forward from `now` with the given work of each job (see `Work`;
    a job without one is taken as 1 s of work) and no further submission.

    `extra` adds pending jobs submitted at `now` (a what-if submission); `until` stops
    the run once those pending jobs started (default: every pending job); `horizon`
    stops it at that instant; `record` runs on until nothing is left to happen and keeps
    every share's usage after each instant (see `extra_start`). Times are the snapshot's
    clock.
    """
    with cyclic_gc_paused():
        replay = _Forward(snapshot, now, work)
        if extra:
            index = {share.name: i for i, share in enumerate(replay.shares)}
            extra_work = {}
            for pending, w in extra:
                extra_work[pending.id] = w
            for pending, _ in extra:
                replay._add_pending(pending, index, extra_work)
        replay.forward(until, horizon, record)
        return Forecast(
            starts=replay.starts,
            borrowed=replay.borrowed,
            ends=replay.ends,
            preempted=replay.preempted,
            times=tuple(replay.times),
            usages=tuple(replay.usages),
        )


def extra_start(
    snapshot: Snapshot, run: Forecast, job: PendingJob, ready_at: int
) -> tuple[int | None, bool | None]:
    """When `job`, submitted at the snapshot's instant, would start in a recorded run
    (`forecast(..., record=True)`) of the snapshot without it, and whether it would
    borrow; (None, None) if never.

    `ready_at` is when it would be its share's head (the last job ahead of it started).
    From then on it starts at the first instant whose usage lets it in, read with the
    engine's own ledger: within its share's limit when the free capacity, less the idle
    other RESERVE shares hold, plus what shares hold beyond their limits (a reclaim)
    covers it; else borrowing when `Ledger.borrow_blocker` finds nothing in the way.
    Until it starts, a waiting head changes no other decision, so the run without it is
    the run with it; it is tried after the other heads of its instant (newest
    submission), and a reclaim is taken as possible whenever enough is borrowed (a
    protected borrower can make it later)."""
    policy = Policy(snapshot.queue, snapshot.shares)
    rule = policy.by_name[job.share]
    itype, n = job.instance_type, job.instances
    if policy.misconfiguration(rule.index, itype, n) is not None:
        return None, None
    types = policy.types
    width = len(types)
    times, usages = run.times, run.usages
    first = max(0, bisect_right(times, ready_at) - 1)
    for index in range(first, len(times)):
        ledger = Ledger(policy)
        usage = usages[index]
        for share in policy.shares:
            base = share.index * width
            for offset, t in enumerate(types):
                if usage[base + offset]:
                    ledger.add(share, t, usage[base + offset])
        at = max(times[index], ready_at)
        avail = ledger.avail(rule, itype)
        if ledger.within_limit(rule, itype, n):
            if n <= avail + ledger.over.get(itype, 0):
                return at, False
        elif ledger.borrow_blocker(rule, itype, n) is None:
            return at, True
    return None, None


def ready_at(
    snapshot: Snapshot, starts: Mapping[str, int], job: PendingJob, now: int
) -> int | None:
    """When the last job ahead of `job` in its share's queue starts in a run (None: one
    of them never does, so neither does `job`). Misconfigured jobs are parked outside
    the queue: they are ahead of nobody."""
    policy = Policy(snapshot.queue, snapshot.shares)
    share = policy.by_name[job.share].index
    key = (-job.priority, job.submitted_at, job.id)
    latest = now
    for other in snapshot.pending:
        if other.share != job.share or (-other.priority, other.submitted_at, other.id) >= key:
            continue
        if policy.misconfiguration(share, other.instance_type, other.instances) is not None:
            continue
        start = starts.get(other.id)
        if start is None:
            return None
        latest = max(latest, start)
    return latest


def dispatch_order(
    explanations: Mapping[str, Explanation],
    starts: Mapping[str, int],
    share_order: Mapping[str, int],
) -> list[str]:
    """Pending job ids in the order they are expected to start: forecast start, then
    the share's listed order and the place in its queue; jobs that never start last."""
    never = float("inf")

    def key(job_id: str):
        e = explanations[job_id]
        return (
            starts.get(job_id, never),
            share_order.get(e.share, 0),
            e.position if e.position is not None else never,
            job_id,
        )

    return sorted(explanations, key=key)


# -- capture: the state of a replay as known at each submission ----------------------


class _Observed(Replay):
    def __init__(self, scenario: Scenario, on_instant, durations: Mapping[str, int] | None):
        super().__init__(scenario)
        self.on_instant = on_instant
        self.durations = durations

    def state(self, now: int) -> tuple[Snapshot, dict[str, Work]]:
        """The board as a Snapshot, and each job's work as known (declared durations)."""
        board = self.board
        names = self._share_name
        declared = self.durations
        running = []
        pending = []
        work: dict[str, Work] = {}
        for (share, _), entries in board.running.items():
            for _, job in entries:
                running.append(
                    RunningJob(
                        id=job.id,
                        share=names[share],
                        priority=job.priority,
                        instance_type=job.itype,
                        instances=job.n,
                        started_at=job.started_at,
                        start_seq=job.start_seq,
                        protected_until=job.protected_until,
                        preemptions=job.preemptions,
                        preemption_retries=job.retries,
                        submitted_at=job.submitted_at,
                    )
                )
                work[job.id] = self._work(job, declared)
        for rule in board.policy.shares:
            for job in board.queued(rule.index) + board.misconfigured(rule.index):
                pending.append(
                    PendingJob(
                        id=job.id,
                        share=names[rule.index],
                        priority=job.priority,
                        instance_type=job.itype,
                        instances=job.n,
                        submitted_at=job.submitted_at,
                        preemptions=job.preemptions,
                        preemption_retries=job.retries,
                        protected_until=job.protected_until,
                        misconfigured_since=job.misconfigured_since,
                    )
                )
                work[job.id] = self._work(job, declared)
        snapshot = Snapshot(
            queue=self.queue, shares=tuple(self.shares), running=running, pending=pending
        )
        return snapshot, work

    @staticmethod
    def _work(job: SimJob, declared) -> Work:
        spec = job.spec
        return Work(
            duration=spec.duration if declared is None else declared.get(job.id, spec.duration),
            saved=job.saved,
            overhead=job.overhead if job.state == RUNNING else 0,
            checkpoint_interval=spec.checkpoint_interval,
            restart_overhead=spec.restart_overhead,
            restarted=job.first_started_at is not None,
        )


def capture(
    scenario: Scenario,
    on_instant: Callable[[_Observed, int, list[SimJob]], None],
    *,
    durations: Mapping[str, int] | None = None,
):
    """Replay `scenario` as `simulate` does; at each instant with submissions, after them
    and before that instant's passes, call `on_instant(replay, now, submitted)`;
    `replay.state(now)` is then the snapshot and the work as known (with `durations`
    as the declared durations when given). Returns the replay's result."""
    with cyclic_gc_paused():
        replay = _Observed(scenario, on_instant, durations)
        replay.run(None)
        return replay.result()


# -- plain words ----------------------------------------------------------------------


def _n(count: int, word: str) -> str:
    return f"{count} {word}"


def describe(
    e: Explanation,
    *,
    name: Callable[[str], str],
    when: Callable[[int], str],
    ends: Mapping[str, int] | None = None,
    starts_at: int | None = None,
) -> str:
    """One plain sentence: what the job needs and what holds it, with names and numbers.

    `name(job_id)` names a job ("job 4711 (bert)"), `when(t)` prints an instant of the
    snapshot's clock, `ends` (from a forecast) says until when running jobs are expected
    to hold capacity.
    """
    ends = ends or {}
    itype = e.instance_type
    need = f"needs {_n(e.instances, itype)}"
    if e.code == STARTS_NOW:
        return f"{need}; it starts at the next scheduling pass"
    if e.code == SERVICE_ENVIRONMENT_MAX_RESOURCE:
        return (
            f"{need} but the whole queue has {e.capacity}: it cannot start as configured; "
            "lower its instances or ask for more capacity"
        )
    if e.code in (QUOTA_MANAGEMENT_LIMIT_EXCEEDED, BORROWABLE_CAPACITY_EXCEEDED):
        return (
            f"{need} but share {e.share} can never hold more than {e.ceiling} "
            f"(limit {e.limit}{'' if e.ceiling == e.limit else ' plus what it may borrow'}): "
            "it cannot start as configured"
        )
    if e.code == BLOCKED_BEHIND_HEAD:
        ahead = (e.position or 1) - 1
        return (
            f"{need}; it is number {e.position} of {e.queue_length} in share {e.share}'s queue: "
            f"{'1 job' if ahead == 1 else f'{ahead} jobs'} must start first, the first being "
            f"{name(e.head) if e.head else 'the head'}"
        )
    parts = [need]
    if e.code == SHARE_LIMIT_REACHED:
        parts.append(f"share {e.share} uses {e.used} of its limit of {e.limit} and may not borrow")
    elif e.code == BORROW_LIMIT_REACHED:
        parts.append(
            f"share {e.share} uses {e.used} against a limit of {e.limit} and may borrow at "
            f"most {e.borrow_cap} beyond it"
        )
    else:
        parts.append(f"{e.free} {'is' if e.free == 1 else 'are'} free")
        if e.would_borrow:
            parts.append(
                f"share {e.share} already uses {e.used} with a limit of {e.limit}, so it must "
                "borrow; "
                f"{e.pool} idle {'is' if e.pool == 1 else 'are'} lendable"
            )
    for share, idle in e.reserved:
        parts.append(f"{share} (RESERVE) holds {idle} idle for its own jobs")
    if e.code in (WAITING_FOR_CAPACITY, SHARE_LIMIT_REACHED, BORROW_LIMIT_REACHED):
        for b in e.borrowers[:3]:
            until = ends.get(b.job)
            tail = f" until about {when(until)}" if until is not None else ""
            parts.append(f"{b.share}'s {name(b.job)} borrows {b.instances}{tail}")
        if len(e.borrowers) > 3:
            parts.append(f"and {len(e.borrowers) - 3} more borrowing jobs")
    if e.borrow_position is not None:
        parts.append(
            f"it is number {e.borrow_position} of {e.borrow_queue_length} in the queue's "
            "borrowing order (oldest submission first)"
        )
    return "; ".join(parts)
