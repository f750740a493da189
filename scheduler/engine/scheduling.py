"""The scheduling pass: the one implementation of the rules of the scenario format.

`schedule(snapshot, now)` builds a `Board` from a frozen `Snapshot` and runs, at instant
`now`, exactly what the spec runs there: capacity enforcement (a capacity below current
use preempts at once, cause `capacity_change`), `runnable_time_limit` failures, then
passes to a fixed point. The simulator keeps one `Board` alive across instants and calls
the same `run_passes` / `enforce_capacity`, so the live scheduler, the simulator, the
what-if replay and the impact preview share every rule.

A pass (spec rule 3): *entitlement* (shares in listed order start heads that fit their
limit, reclaiming borrowed capacity if needed), *borrowing* (heads of LEND_AND_BORROW
shares, oldest submission first, then id), *in-share preemption* (listed order).

Orders and tie-breaks:

- a share's queue: priority (higher first), then submission time, then id; a
  misconfigured job is parked outside the queue, so the head is never one;
- victim order: priority (lower first), then most recent start, then the later start in
  that instant's event order (`start_seq`), then id;
- minimal victim sets: victims are added in victim order until the need is met; then
  each except the last, from the most recently chosen back, is spared if the need is
  still met without it;
- `protected_until` (a job field): a job is never a reclaim or in-share victim while
  `now < protected_until`; `capacity_change` may still preempt it.

Fixed point: passes repeat at the same instant until one changes nothing. A pass
victim is RUNNABLE again at once, in its place in its share's queue (v1.1); it is
`held` for the rest of that pass: not started, but still its share's head, so it
blocks the jobs behind it. It may start again at that instant in a later pass.

RESERVE idle is held in every phase (v1.1): no start, within a limit or borrowing,
may take `free(T)` below the idle capacity of the other RESERVE shares (`avail`).
In phase 2 a head within its share's limit starts as an entitled start (`n <= avail`,
no reclaim); a head beyond it borrows under rule 1.

Misconfiguration is judged once per instant, after the instant's actions and
submissions (v1.1): `enqueue` only records the reason, and `settle` starts or stops
`runnable_time_limit` clocks, so a cure undone at the same instant keeps the clock.

Speed: per-share heaps with lazy deletion (an entry is live while its job points at it),
per-(share, type) running lists in victim order, per-priority instance sums, and the
ledger's counters. A pass costs O(shares + decisions), not O(pending jobs).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from heapq import heapify, heappop, heappush

from .quota import Ledger, Policy, ShareRule
from .types import (
    BLOCKED_BEHIND_HEAD,
    Fail,
    PassResult,
    Preempt,
    Snapshot,
    Start,
)

PENDING, RUNNING, DONE, FUTURE = "PENDING", "RUNNING", "DONE", "FUTURE"
START, PREEMPT, FAIL = "start", "preempt", "fail"


class Job:
    """The pass's view of one job; the simulator subclasses it with its work model."""

    __slots__ = (
        "id",
        "share",
        "priority",
        "itype",
        "n",
        "submitted_at",
        "state",
        "entry",
        "started_at",
        "start_seq",
        "vkey",
        "protected_until",
        "preemptions",
        "retries",
        "reason",
        "misconfigured_since",
        "held",
    )

    def __init__(
        self,
        *,
        id: str,
        share: int,
        priority: int,
        itype: str,
        n: int,
        submitted_at: int,
        protected_until: int | None = None,
        preemptions: int = 0,
        retries: int | None = None,
    ) -> None:
        self.id = id
        self.share = share
        self.priority = priority
        self.itype = itype
        self.n = n
        self.submitted_at = submitted_at
        self.state = FUTURE
        self.entry: tuple | None = None
        self.started_at = 0
        self.start_seq = 0
        self.vkey: tuple = ()
        self.protected_until = protected_until
        self.preemptions = preemptions
        self.retries = retries
        self.reason: str | None = None
        self.misconfigured_since: int | None = None
        # Preempted by the pass now running: not started again before the pass ends.
        self.held = False

    def protected(self, now: int) -> bool:
        return self.protected_until is not None and now < self.protected_until


class Board:
    """Mutable state of a queue at the current instant: queues, running jobs, ledger.

    Decisions are appended to `out` as tuples `(START, job, borrowed)`,
    `(PREEMPT, job, cause, by_job, fails)` and `(FAIL, job, cause)` in the order they
    happen. `on_misconfigured(job)` (optional) is told, by `settle`, whenever a pending
    job is judged newly misconfigured, so a caller can start its `runnable_time_limit`
    clock.
    """

    def __init__(
        self, policy: Policy, *, on_misconfigured: Callable[[Job], None] | None = None
    ) -> None:
        self.policy = policy
        self.ledger = Ledger(policy)
        self.queues: list[list[tuple]] = [[] for _ in policy.shares]
        self.parked: list[dict[str, Job]] = [{} for _ in policy.shares]
        self.running: dict[tuple[int, str], list[tuple]] = {}
        self.running_by_priority: dict[tuple[int, str], dict[int, int]] = {}
        self.next_start_seq = 0
        self.on_misconfigured = on_misconfigured
        # Pending jobs whose misconfiguration changed since the last `settle`.
        self.unsettled: list[Job] = []

    # -- queues ---------------------------------------------------------------------

    def enqueue(self, job: Job) -> None:
        """Make `job` RUNNABLE: into its share's queue, or parked if misconfigured."""
        job.state = PENDING
        reason = self.policy.misconfiguration(job.share, job.itype, job.n)
        job.reason = reason
        if reason is None:
            entry = (-job.priority, job.submitted_at, job.id, job)
            job.entry = entry
            heappush(self.queues[job.share], entry)
        else:
            job.entry = None
            self.parked[job.share][job.id] = job
        if (reason is None) != (job.misconfigured_since is None):
            self.unsettled.append(job)

    def settle(self, now: int) -> None:
        """Judge misconfiguration: start the clock of pending jobs newly misconfigured,
        stop it for cured ones (spec: once per instant, after actions and submissions)."""
        for job in self.unsettled:
            if job.state != PENDING:
                continue
            if job.reason is None:
                job.misconfigured_since = None
            elif job.misconfigured_since is None:
                job.misconfigured_since = now
                if self.on_misconfigured is not None:
                    self.on_misconfigured(job)
        self.unsettled.clear()

    def head(self, share: int) -> Job | None:
        """The first job of the share's queue (stale entries are dropped on the way)."""
        queue = self.queues[share]
        while queue:
            entry = queue[0]
            job = entry[3]
            if job.entry is entry:
                return job
            heappop(queue)
        return None

    def queued(self, share: int) -> list[Job]:
        """The share's well-configured pending jobs in queue order (O(k log k))."""
        return [entry[3] for entry in sorted(self.queues[share]) if entry[3].entry is entry]

    def _unqueue(self, job: Job) -> None:
        job.entry = None
        self.parked[job.share].pop(job.id, None)

    # -- running jobs -----------------------------------------------------------------

    def _run(self, job: Job) -> None:
        key = (job.share, job.itype)
        job.state = RUNNING
        job.vkey = (job.priority, -job.started_at, -job.start_seq, job.id)
        insort(self.running.setdefault(key, []), (job.vkey, job))
        by_priority = self.running_by_priority.setdefault(key, {})
        by_priority[job.priority] = by_priority.get(job.priority, 0) + job.n
        self.ledger.add(self.policy.shares[job.share], job.itype, job.n)

    def _release(self, job: Job) -> None:
        key = (job.share, job.itype)
        running = self.running[key]
        del running[bisect_left(running, (job.vkey,))]
        by_priority = self.running_by_priority[key]
        by_priority[job.priority] -= job.n
        if not by_priority[job.priority]:
            del by_priority[job.priority]
        self.ledger.add(self.policy.shares[job.share], job.itype, -job.n)

    def place_running(self, job: Job, *, started_at: int, start_seq: int) -> None:
        """Put a job that is already running (from a snapshot) on the board."""
        job.started_at = started_at
        job.start_seq = start_seq
        self.next_start_seq = max(self.next_start_seq, start_seq + 1)
        self._run(job)

    def start(self, job: Job, now: int, out: list) -> None:
        self._unqueue(job)
        job.started_at = now
        job.start_seq = self.next_start_seq
        self.next_start_seq += 1
        self._run(job)
        rule = self.policy.shares[job.share]
        borrowed = self.ledger.used(rule, job.itype) > rule.limits.get(job.itype, 0)
        out.append((START, job, borrowed))

    def preempt(self, job: Job, cause: str, by: Job | None, out: list) -> bool:
        """Stop a running job; return whether it goes back to RUNNABLE (else FAILED)."""
        self._release(job)
        job.preemptions += 1
        fails = job.retries is not None and job.preemptions > job.retries
        job.state = DONE if fails else PENDING
        out.append((PREEMPT, job, cause, by, fails))
        return not fails

    def finish(self, job: Job) -> None:
        self._release(job)
        job.state = DONE

    def fail(self, job: Job, cause: str, out: list) -> None:
        """End a job FAILED (terminated, time limit) whatever its state."""
        if job.state == RUNNING:
            self._release(job)
        else:
            self._unqueue(job)
        job.state = DONE
        out.append((FAIL, job, cause))

    def set_priority(self, job: Job, priority: int) -> None:
        if job.state == RUNNING:
            self._release(job)
            job.priority = priority
            self._run(job)
        elif job.state == PENDING and job.entry is not None:
            job.priority = priority
            job.entry = (-priority, job.submitted_at, job.id, job)
            heappush(self.queues[job.share], job.entry)
        else:
            job.priority = priority

    # -- policy ---------------------------------------------------------------------

    def set_policy(self, policy: Policy) -> None:
        """Adopt a new policy (same shares, same order) and re-check every pending job."""
        self.policy = policy
        self.ledger.set_policy(policy)
        for rule in policy.shares:
            pending = self.queued(rule.index) + list(self.parked[rule.index].values())
            self.queues[rule.index] = []
            self.parked[rule.index] = {}
            for job in pending:
                self.enqueue(job)

    # -- reasons --------------------------------------------------------------------

    def pending_reasons(self) -> dict[str, str]:
        """A machine reason for every pending job (misconfigured, head, or behind it)."""
        reasons: dict[str, str] = {}
        for rule in self.policy.shares:
            for position, job in enumerate(self.queued(rule.index)):
                reasons[job.id] = (
                    self.ledger.blocker(rule, job.itype, job.n)
                    if position == 0
                    else BLOCKED_BEHIND_HEAD
                )
            for job in self.parked[rule.index].values():
                reasons[job.id] = job.reason
        return reasons


# -- victims ------------------------------------------------------------------------


def _spare(chosen: list[Job], need_met: Callable[[list[Job], int], bool]) -> list[Job]:
    """Minimal set: from the most recently chosen back (the last is kept), spare a victim
    whenever the need is still met without it. `need_met(chosen, skip)` judges the set
    `chosen` without index `skip`."""
    for index in range(len(chosen) - 2, -1, -1):
        if need_met(chosen, index):
            del chosen[index]
    return chosen


def _reclaim_victims(board: Board, rule: ShareRule, job: Job, now: int) -> list[Job] | None:
    """Victims letting `job` (within its share's limit) start: jobs of T of shares over
    their limit when chosen, in victim order, never protected ones; None if none suffice."""
    ledger, policy, itype, n = board.ledger, board.policy, job.itype, job.n
    base_avail = ledger.avail(rule, itype)
    candidates = {
        other.index: board.running.get((other.index, itype), [])
        for other in policy.shares
        if other.index != rule.index
    }
    cursor = dict.fromkeys(candidates, 0)
    removed = dict.fromkeys(candidates, 0)

    def avail_after() -> int:
        # Stopping m instances frees m, but a RESERVE share's regained idle is held for it.
        avail = base_avail
        for share, count in removed.items():
            if count:
                avail += count
                other = policy.shares[share]
                if other.reserve:
                    limit = other.limits.get(itype, 0)
                    used = ledger.used(other, itype)
                    avail -= max(0, limit - used + count) - max(0, limit - used)
        return avail

    chosen: list[Job] = []
    while avail_after() < n:
        best: Job | None = None
        for share, running in candidates.items():
            other = policy.shares[share]
            if ledger.used(other, itype) - removed[share] <= other.limits.get(itype, 0):
                continue
            position = cursor[share]
            while position < len(running) and running[position][1].protected(now):
                position += 1
            cursor[share] = position
            if position < len(running) and (best is None or running[position][0] < best.vkey):
                best = running[position][1]
        if best is None:
            return None
        chosen.append(best)
        cursor[best.share] += 1
        removed[best.share] += best.n

    def still_met(victims: list[Job], skip: int) -> bool:
        spared = victims[skip]
        removed[spared.share] -= spared.n
        if avail_after() >= n:
            return True
        removed[spared.share] += spared.n
        return False

    return _spare(chosen, still_met)


def _linear_need_met(need: int) -> Callable[[list[Job], int], bool]:
    def met(victims: list[Job], skip: int) -> bool:
        return sum(v.n for v in victims) - victims[skip].n >= need

    return met


def _in_share_victims(board: Board, rule: ShareRule, job: Job, now: int) -> list[Job] | None:
    """Lower-priority jobs of the same share and type whose stop lets `job` start."""
    key = (rule.index, job.itype)
    by_priority = board.running_by_priority.get(key)
    if not by_priority:
        return None
    priority = job.priority
    at_most = sum(count for p, count in by_priority.items() if p < priority)
    if not at_most:
        return None
    need = board.ledger.in_share_need(rule, job.itype, job.n)
    if need <= 0 or at_most < need:
        return None
    chosen: list[Job] = []
    total = 0
    for _, victim in board.running[key]:
        if victim.priority >= priority:
            return None
        if victim.protected(now):
            continue
        chosen.append(victim)
        total += victim.n
        if total >= need:
            return _spare(chosen, _linear_need_met(need))
    return None


def _capacity_victims(board: Board, itype: str, excess: int) -> list[Job]:
    """Jobs of T to stop so usage fits capacity: jobs of shares over their limit (when
    chosen) first, then any, each in victim order; protection does not apply."""
    policy, ledger = board.policy, board.ledger
    candidates = {rule.index: board.running.get((rule.index, itype), []) for rule in policy.shares}
    cursor = dict.fromkeys(candidates, 0)
    removed = dict.fromkeys(candidates, 0)
    chosen: list[Job] = []
    total = 0
    while total < excess:
        best_over: Job | None = None
        best_any: Job | None = None
        for share, running in candidates.items():
            position = cursor[share]
            if position >= len(running):
                continue
            vkey, victim = running[position]
            rule = policy.shares[share]
            over = ledger.used(rule, itype) - removed[share] > rule.limits.get(itype, 0)
            if over and (best_over is None or vkey < best_over.vkey):
                best_over = victim
            if best_any is None or vkey < best_any.vkey:
                best_any = victim
        best = best_over or best_any
        if best is None:
            break
        chosen.append(best)
        cursor[best.share] += 1
        removed[best.share] += best.n
        total += best.n
    return _spare(chosen, _linear_need_met(excess))


def reclaimable(board: Board, rule: ShareRule, itype: str, now: int) -> list[Job]:
    """The share's running jobs of T a reclaim could take now: in victim order while the
    share would still be over its limit (a reclaim stops choosing from a share at its
    limit), skipping protected jobs."""
    excess = board.ledger.used(rule, itype) - rule.limits.get(itype, 0)
    chosen: list[Job] = []
    for _, job in board.running.get((rule.index, itype), []):
        if excess <= 0:
            break
        if not job.protected(now):
            chosen.append(job)
            excess -= job.n
    return chosen


# -- the pass -----------------------------------------------------------------------


def enforce_capacity(board: Board, out: list) -> None:
    """Preempt (cause capacity_change) until every type's usage fits its capacity.

    Types in name order. Victims rejoin their queues at once: this is an action, not a
    pass, and the passes of the instant come after it.
    """
    for itype in sorted(board.ledger.free):
        excess = -board.ledger.free[itype]
        if excess <= 0:
            continue
        for victim in _capacity_victims(board, itype, excess):
            if board.preempt(victim, "capacity_change", None, out):
                board.enqueue(victim)


def _one_pass(board: Board, now: int, out: list) -> bool:
    """Run the three phases once; return whether it changed anything."""
    policy, ledger = board.policy, board.ledger
    head = board.head
    decided = len(out)
    held: list[Job] = []

    def stop(victim: Job, cause: str, by: Job) -> None:
        if board.preempt(victim, cause, by, out):
            board.enqueue(victim)
            victim.held = True
            held.append(victim)

    # Phase 1: entitlement, shares in listed order.
    for rule in policy.shares:
        share = rule.index
        used = ledger.usage[share]
        while True:
            job = head(share)
            if job is None or job.held:
                break
            itype, n = job.itype, job.n
            if used.get(itype, 0) + n > rule.limits.get(itype, 0):
                break
            avail = ledger.avail(rule, itype)
            if n > avail:
                # Only other shares can be over: this one is within its limit.
                if avail + ledger.over.get(itype, 0) < n:
                    break
                victims = _reclaim_victims(board, rule, job, now)
                if victims is None:
                    break
                for victim in victims:
                    stop(victim, "reclaim", job)
            board.start(job, now, out)

    # Phase 2: borrowing, first-in first-out across shares (submission time, then id).
    order = []
    for rule in policy.shares:
        if rule.can_borrow:
            job = head(rule.index)
            if job is not None and not job.held:
                order.append((job.submitted_at, job.id, rule.index, job))
    heapify(order)
    while order:
        _, _, share, job = heappop(order)
        rule = policy.shares[share]
        itype, n = job.itype, job.n
        if ledger.within_limit(rule, itype, n):
            startable = n <= ledger.avail(rule, itype)
        else:
            startable = ledger.borrow_blocker(rule, itype, n) is None
        if startable:
            board.start(job, now, out)
            job = head(share)
            if job is not None and not job.held:
                heappush(order, (job.submitted_at, job.id, share, job))

    # Phase 3: in-share preemption, shares in listed order (borrowing was tried first).
    for rule in policy.shares:
        if not rule.in_share_preemption:
            continue
        job = head(rule.index)
        if job is None or job.held:
            continue
        victims = _in_share_victims(board, rule, job, now)
        if victims:
            for victim in victims:
                stop(victim, "priority", job)
            board.start(job, now, out)

    for victim in held:
        victim.held = False
    return len(out) > decided


def run_passes(board: Board, now: int, out: list) -> None:
    """Passes at `now` until one changes nothing (see the module docstring), then judge
    the misconfiguration of the pass victims that came back misconfigured."""
    while _one_pass(board, now, out):
        pass
    board.settle(now)


def fail_overdue(board: Board, jobs: list[Job], now: int, out: list) -> None:
    """End FAILED (cause time_limit) the misconfigured jobs RUNNABLE too long."""
    limit = board.policy.queue.runnable_time_limit
    if limit is None:
        return
    for job in jobs:
        if (
            job.state == PENDING
            and job.reason is not None
            and job.misconfigured_since is not None
            and job.misconfigured_since + limit <= now
        ):
            board.fail(job, "time_limit", out)


# -- the public entry point -----------------------------------------------------------


def board_from_snapshot(snapshot: Snapshot) -> tuple[Board, list[Job]]:
    """A board holding the snapshot's jobs; also returns the pending jobs in snapshot order."""
    policy = Policy(snapshot.queue, snapshot.shares)
    board = Board(policy)

    def share_index(job_id: str, name: str) -> int:
        rule = policy.by_name.get(name)
        if rule is None:
            raise ValueError(f"job '{job_id}' names share '{name}', which the snapshot lacks")
        return rule.index

    for running in snapshot.running:
        job = Job(
            id=running.id,
            share=share_index(running.id, running.share),
            priority=running.priority,
            itype=running.instance_type,
            n=running.instances,
            submitted_at=(
                running.started_at if running.submitted_at is None else running.submitted_at
            ),
            protected_until=running.protected_until,
            preemptions=running.preemptions,
            retries=running.preemption_retries,
        )
        board.place_running(job, started_at=running.started_at, start_seq=running.start_seq)
    pending = []
    for waiting in snapshot.pending:
        job = Job(
            id=waiting.id,
            share=share_index(waiting.id, waiting.share),
            priority=waiting.priority,
            itype=waiting.instance_type,
            n=waiting.instances,
            submitted_at=waiting.submitted_at,
            protected_until=waiting.protected_until,
            preemptions=waiting.preemptions,
            retries=waiting.preemption_retries,
        )
        job.misconfigured_since = waiting.misconfigured_since
        board.enqueue(job)
        pending.append(job)
    return board, pending


def decisions_to_values(out: list) -> tuple[Start | Preempt | Fail, ...]:
    values: list[Start | Preempt | Fail] = []
    for entry in out:
        if entry[0] == START:
            values.append(Start(job=entry[1].id, borrowed=entry[2]))
        elif entry[0] == PREEMPT:
            by = entry[3].id if entry[3] is not None else None
            values.append(Preempt(job=entry[1].id, cause=entry[2], by=by, fails=entry[4]))
        else:
            values.append(Fail(job=entry[1].id, cause=entry[2]))
    return tuple(values)


def schedule(snapshot: Snapshot, now: int) -> PassResult:
    """Decide what happens at `now`: capacity enforcement, time-limit failures, passes.

    Returns the decisions in the order they apply and a reason for every pending job
    that does not start (misconfiguration reasons of the spec, or WAITING_FOR_CAPACITY,
    SHARE_LIMIT_REACHED, BORROW_LIMIT_REACHED, BLOCKED_BEHIND_HEAD).
    """
    board, pending = board_from_snapshot(snapshot)
    out: list = []
    enforce_capacity(board, out)
    board.settle(now)
    fail_overdue(board, pending, now, out)
    run_passes(board, now, out)
    return PassResult(decisions=decisions_to_values(out), reasons=board.pending_reasons())
