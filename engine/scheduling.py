"""The scheduling pass: the one implementation of the rules of the scenario format.

`schedule(snapshot, now)` builds a `Board` from a frozen `Snapshot` and runs, at instant
`now`, exactly what the spec runs there: capacity enforcement (a capacity below current
use preempts at once, cause `capacity_change`), `runnable_time_limit` failures, then
passes to a fixed point. The simulator keeps one `Board` alive across instants and calls
the same `run_passes` / `enforce_capacity`, so the live scheduler, the simulator, the
what-if replay and the impact preview share every rule.

A pass (spec rule 3): *entitlement* (shares in listed order start heads that fit their
limit, reclaiming borrowed capacity if needed), *borrowing* (heads of LEND_AND_BORROW
shares in the queue's borrowing order), the borrowing order's own phase 2b if it has one
(none today; v3's fair-share preemption is one), *in-share preemption* (listed order).

Orders and tie-breaks:

- a share's queue: priority (higher first), then submission time, then id; a
  misconfigured job is parked outside the queue, so the head is never one;
- the borrowing order and the victim order are the queue's, named strategies of
  engine.ordering (by default rule 3.2's: oldest submission first, then id; and rule
  4's: priority (lower first), then most recent start, then the later start in that
  instant's event order (`start_seq`), then id);
- minimal victim sets: victims are added in victim order until the need is met; then
  each except the last, from the most recently chosen back, is spared if the need is
  still met without it;
- `protected_until` (a job field): a job is never a reclaim or in-share victim while
  `now < protected_until`; `capacity_change` may still preempt it.

Interruption contracts (spec v2): protection by minimum runtime joins `protected_until`
(either protects); a victim with grace is given notice (`Board.notice`: STOPPING, it
keeps its capacity, leaves the victim lists and counts in usage, not in `over'`) and
its starter waits, `held` until its victims have stopped, their freed instances held
for it (`Ledger.hold`, off `avail` for every start); at each victim choice the set the
rule would choose without protection is computed too, for the protected blocks. When
any job has a contract (`Board.v2`) every pass looks at every share: the wake-up keys
below know nothing of notices and holds, and a v1 document keeps its fast path.

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
ledger's counters: a pass costs O(shares + decisions), not O(pending jobs). A pass
looks again only at shares whose head changed, or whose head's type changed in a way
that could let it act (`Board.need`, `Board._wake`); no pass runs when nothing changed
since the last pass that decided nothing; a policy change re-checks each distinct
(share, type, size) of the pending jobs once. None of this changes a decision: the
property tests check the fixed point against a fresh board after every instant.

Where: the board, its queues and what a pass must look at, and the board fed lazily in
engine.board; victim choice in engine.victims; the pass and its entry points here.
"""

from __future__ import annotations

from collections.abc import Mapping

from .board import (
    NEVER,
    NOTICE,
    PENDING,
    PREEMPT,
    START,
    STOPPED,
    Board,
    FedBoard,
    Feed,
    Job,
    board_from_snapshot,
    fill_board,
)
from .quota import Policy
from .types import Fail, PassResult, Preempt, Snapshot, Start
from .victims import capacity_victims, in_share_victims, lower_priority_use, reclaim_victims

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
        for victim in capacity_victims(board, itype, excess):
            if victim.stopping:  # V10.1: stopped at once, its capacity not held
                if board.stop(victim, "capacity_change", out, hold=False):
                    board.enqueue(victim)
            elif board.preempt(victim, "capacity_change", None, out):
                board.enqueue(victim)


def _one_pass(board: Board, now: int, out: list) -> None:
    """Run the three phases once, looking only at the shares `board.need` names for the
    phase: the others were found unable to act, and nothing since could let them (see
    `Board._wake`), so they would not act, and skipping them changes no decision.

    A start by another share only takes capacity: `avail`, the pool and `free` fall or
    stay, so it never lets a head start, borrow or preempt in its share (fewer free
    instances only raise what a preemption needs); it can add a reclaim victim, so a
    reclaim that found too few unprotected victims waits on starts too (`strict`).
    """
    held: list[Job] = []
    _entitlement(board, now, out, held)
    _borrowing(board, now, out)
    rebalance = board.rebalance
    if rebalance is not None:  # phase 2b, the queue's borrowing order's own
        rebalance(PassTools(board, now, out, held))
    _in_share_preemption(board, now, out, held)
    for victim in held:
        victim.held = False


class PassTools:
    """What a borrowing order's phase 2b (`BorrowingOrder.rebalance`, engine.ordering)
    may do in a pass: read `board` at `now`, stop victims for a head (`take`) and start a
    head (`start`), with the pass's own rules for both (notice and waiting, v2; a victim
    keeps its place and is held for the rest of the pass, v1.1)."""

    __slots__ = ("board", "now", "_out", "_held")

    def __init__(self, board: Board, now: int, out: list, held: list[Job]) -> None:
        self.board, self.now, self._out, self._held = board, now, out, held

    def take(self, victims: list[Job], cause: str, by: Job) -> bool:
        """Stop `victims` for `by`; whether `by` may start now (else it waits for
        victims given notice, V8)."""
        return _take(self.board, victims, cause, by, self.now, self._out, self._held)

    def start(self, job: Job) -> None:
        self.board.start(job, self.now, self._out)


def _entitlement(board: Board, now: int, out: list, held: list[Job]) -> None:
    """Phase 1: entitlement, shares in listed order (flagged ones; a share flagged during
    the phase further on in the order is found too, as a full scan would reach it)."""
    ledger, rules = board.ledger, board.policy.shares
    last = len(rules)
    head, wait = board.head, board.wait
    need_entitled = board.need[0]
    share = need_entitled.index(True)
    while share < last:
        rule = rules[share]
        used = ledger.usage[share]
        limits = rule.limits
        while True:
            job = head(share)
            if job is None:
                need_entitled[share] = False
                break
            if job.held:
                break
            itype, n = job.itype, job.n
            if used.get(itype, 0) + n > limits.get(itype, 0):
                board.wait_for_limit(share, itype, limits.get(itype, 0) - n)
                break
            avail = ledger.avail(rule, itype)
            if n > avail:
                # Only other shares can be over: this one is within its limit.
                over = ledger.over.get(itype, 0)
                if board.v2:
                    if job.episode is None and avail + over >= n:
                        job.episode = now  # a reclaim episode begins (V12)
                    over = board.over_prime(itype)  # STOPPING jobs are no borrowers (V7)
                if avail + over < n:
                    wait(0, share, itype, n)
                    break
                victims = reclaim_victims(board, rule, job, now)
                if board.v2:
                    _count_blocks(board, reclaim_victims(board, rule, job, now, False), now, 0)
                if victims is None:
                    wait(0, share, itype, -NEVER)
                    board.strict.setdefault(itype, set()).add(share)
                    break
                if not _take(board, victims, "reclaim", job, now, out, held):
                    break  # it waits for its victims with notice (V8)
            board.start(job, now, out)
        share = need_entitled.index(True, share + 1)


def _borrowing(board: Board, now: int, out: list) -> None:
    """Phase 2: borrowing, heads across shares in the queue's borrowing order
    (engine.ordering; by default first-in first-out: submission time, then id)."""
    rules = board.policy.shares
    last = len(rules)
    head = board.head
    need_borrow = board.need[1]
    heads = []
    share = need_borrow.index(True)
    while share < last:
        if rules[share].can_borrow:
            job = head(share)
            if job is None:
                need_borrow[share] = False
            elif not job.held:
                heads.append(job)
        else:
            need_borrow[share] = False
        share = need_borrow.index(True, share + 1)
    if len(heads) == 1:
        # One candidate at a time (after a start, its share's next head is again the
        # only one): every order tries it first, so no round is made (most passes).
        job = heads[0]
        while job is not None:
            job = _borrow(board, job, now, out)
    elif heads:
        order = board.borrowing_round(board)
        offer, next_head = order.offer, order.next
        for job in heads:
            offer(job)
        while (job := next_head()) is not None:
            job = _borrow(board, job, now, out)
            if job is not None:
                offer(job)


def _borrow(board: Board, job: Job, now: int, out: list) -> Job | None:
    """Start the head `job` if it can start (within its limit with `n <= avail`, else
    borrowing under rule 1) and return its share's next head to offer, if any."""
    ledger = board.ledger
    share = job.share
    rule = board.policy.shares[share]
    itype, n = job.itype, job.n
    if ledger.within_limit(rule, itype, n):
        startable = n <= ledger.avail(rule, itype)
    else:
        startable = ledger.borrow_blocker(rule, itype, n) is None
    if not startable:
        board.wait(1, share, itype, n)
        return None
    board.start(job, now, out)
    job = board.head(share)
    if job is None:
        board.need[1][share] = False
        return None
    return None if job.held else job


def _in_share_preemption(board: Board, now: int, out: list, held: list[Job]) -> None:
    """Phase 3: in-share preemption, shares in listed order (borrowing was tried first)."""
    rules = board.policy.shares
    last = len(rules)
    head, wait = board.head, board.wait
    need_in_share = board.need[2]
    share = need_in_share.index(True)
    while share < last:
        rule = rules[share]
        job = head(share) if rule.in_share_preemption else None
        if job is None:
            need_in_share[share] = False
        elif not job.held:
            at_most = lower_priority_use(board, share, job)
            victims = in_share_victims(board, rule, job, now, at_most)
            if board.v2:
                alike = in_share_victims(board, rule, job, now, at_most, False)
                _count_blocks(board, alike, now, 1)
            if victims is None:
                wait(2, share, job.itype, job.n - at_most)
            elif victims and _take(board, victims, "priority", job, now, out, held):
                board.start(job, now, out)
        share = need_in_share.index(True, share + 1)


def _count_blocks(board: Board, alike: list[Job] | None, now: int, cause: int) -> None:
    """V4: each protected job (from reclaim, cause 0, or in-share preemption, 1) in the set
    the rule would choose if no job were protected counts one block, once per instant."""
    for victim in alike or ():
        if victim.blocked_at != now and (
            victim.protected_from_preempt(now) if cause else victim.protected_from_reclaim(now)
        ):
            victim.blocked_at = now
            victim.protected_blocks += 1
            if victim.protected_blocks == 1:
                board.blocked.append(victim)


def _take(
    board: Board, victims: list[Job], cause: str, by: Job, now: int, out: list, held: list
) -> bool:
    """Stop the victims chosen for `by`; return whether `by` starts now.

    Victims with grace get notice and `by` waits for them (V6, V8); those without stop
    at once, their instances held for `by` while it waits (V8.2)."""
    if not board.v2 or not any(victim.grace for victim in victims):
        for victim in victims:
            _stop(board, victim, cause, by, out, held)
        return True
    by.held = True
    by.awaiting = sum(1 for victim in victims if victim.grace)
    for victim in victims:
        if victim.grace:
            board.notice(victim, cause, by, now, out)
        else:
            _stop(board, victim, cause, by, out, held)
            board.hold(by, victim.itype, victim.n)
    return False


def _stop(board: Board, victim: Job, cause: str, by: Job, out: list, held: list) -> None:
    """Preempt a pass victim: RUNNABLE again at once in its place, held for the pass."""
    if board.preempt(victim, cause, by, out):
        board.enqueue(victim)
        victim.held = True
        held.append(victim)


def run_passes(board: Board, now: int, out: list) -> None:
    """Passes at `now` until one changes nothing (see the module docstring), then judge
    the misconfiguration of the pass victims that came back misconfigured.

    Every decision marks the board `dirty`, so a pass that decides nothing ends the
    loop, and no pass runs when nothing changed since the last one that decided
    nothing: it would decide nothing either."""
    last = len(board.policy.shares)
    while board.dirty:
        if board.v2:
            # Spec v2: every pass looks at every share (notices, holds and protection
            # ends are not in the wake-up keys); still to a fixed point.
            board.invalidate()
            board.dirty = False
            _one_pass(board, now, out)
            continue
        board.dirty = False
        entitled, borrow, in_share = board.need
        if (
            entitled.index(True) == last
            and borrow.index(True) == last
            and in_share.index(True) == last
        ):
            break  # no share to look at: the pass would decide nothing
        _one_pass(board, now, out)
    if board.unsettled:
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


def schedule_fed(snapshot: Snapshot, now: int, feeds: Mapping[str, Feed]) -> PassResult:
    """`schedule` on a queue whose pending jobs are not all loaded.

    `snapshot.pending` holds the pending jobs the caller has to hand (misconfigured
    ones due for `runnable_time_limit`, jobs whose reason may be stale, or every one);
    `feeds[share]` supplies the share's other well-configured pending jobs in queue
    order (a share without a feed has none). The decisions are those of `schedule` on
    the snapshot with every pending job in it, provided the jobs left out are
    well-configured under this policy (the caller re-checks them when the policy
    changes) and none of them is due to fail; `reasons` covers the jobs loaded.
    """
    policy = Policy(snapshot.queue, snapshot.shares)
    unknown = set(feeds) - set(policy.by_name)
    if unknown:
        raise ValueError(f"feeds name shares the snapshot lacks: {sorted(unknown)}")
    board = FedBoard(policy, [feeds.get(rule.name) for rule in policy.shares])
    pending = fill_board(board, snapshot)
    board.v2 = board.v2 or snapshot.contracts
    out: list = []
    enforce_capacity(board, out)
    board.settle(now)
    fail_overdue(board, pending, now, out)
    run_passes(board, now, out)
    reasons = board.pending_reasons()
    if board.unsettled:  # jobs the reasons' look at the heads brought in
        board.settle(now)
    return PassResult(
        decisions=decisions_to_values(out),
        reasons=reasons,
        reclaim_episodes=_episodes([*pending, *board.fetched]),
        protected_blocks=_blocks(board),
    )


def _blocks(board: Board) -> dict[str, int]:
    """The protected blocks this pass counted (a snapshot's jobs begin with none)."""
    return {job.id: job.protected_blocks for job in board.blocked}


def _episodes(jobs: list[Job]) -> dict[str, int]:
    """The reclaim episodes this pass found (a snapshot's jobs begin with none)."""
    return {job.id: job.episode for job in jobs if job.episode is not None}


def decisions_to_values(out: list) -> tuple[Start | Preempt | Fail, ...]:
    values: list[Start | Preempt | Fail] = []
    for entry in out:
        if entry[0] == START:
            values.append(Start(job=entry[1].id, borrowed=entry[2]))
        elif entry[0] == PREEMPT:
            by = entry[3].id if entry[3] is not None else None
            values.append(Preempt(job=entry[1].id, cause=entry[2], by=by, fails=entry[4]))
        elif entry[0] == NOTICE:
            _, job, cause, by, fails, grace_until, stop_at, saves = entry
            values.append(
                Preempt(
                    job=job.id,
                    cause=cause,
                    by=by.id,
                    fails=fails,
                    grace_until=grace_until,
                    stop_at=stop_at,
                    saves=saves,
                )
            )
        elif entry[0] == STOPPED:
            # A capacity cut stops a STOPPING job at once (V10.1): no new notice.
            values.append(Preempt(job=entry[1].id, cause=entry[2], by=None, fails=entry[3]))
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
    board.v2 = board.v2 or snapshot.contracts
    out: list = []
    enforce_capacity(board, out)
    board.settle(now)
    fail_overdue(board, pending, now, out)
    run_passes(board, now, out)
    return PassResult(
        decisions=decisions_to_values(out),
        reasons=board.pending_reasons(),
        reclaim_episodes=_episodes(pending),
        protected_blocks=_blocks(board),
    )
