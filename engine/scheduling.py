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
ledger's counters: a pass costs O(shares + decisions), not O(pending jobs). A pass
looks again only at shares whose head changed, or whose head's type changed in a way
that could let it act (`Board.need`, `Board._wake`); no pass runs when nothing changed
since the last pass that decided nothing; a policy change re-checks each distinct
(share, type, size) of the pending jobs once. None of this changes a decision: the
property tests check the fixed point against a fresh board after every instant.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence
from heapq import heapify, heappop, heappush
from typing import Protocol

from .quota import Ledger, Policy, ShareRule
from .types import (
    BLOCKED_BEHIND_HEAD,
    Fail,
    PassResult,
    PendingJob,
    Preempt,
    Snapshot,
    Start,
)

PENDING, RUNNING, DONE, FUTURE = "PENDING", "RUNNING", "DONE", "FUTURE"
# A wait key no change reaches; a wait on -_NEVER is woken by any.
_NEVER = float("inf")
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

    What the next pass must look at (see `_one_pass`): `need[phase][share]` is set when
    the share's head changes, and cleared when a check finds its head unable to act in
    that phase. A phase-1 head beyond its share's limit waits in `over_limit` until the
    share's own stops bring its usage low enough. Other checks wait in
    `waiting[phase][type]` with a key, until capacity freed on its head's type (or
    running jobs reordered there, or a protection ended) brings the type within the
    key's reach (`_wake`); a reclaim short of unprotected victims also waits in `strict`
    for any start. `dirty` says whether anything changed since the last pass that
    changed nothing.
    """

    def __init__(
        self, policy: Policy, *, on_misconfigured: Callable[[Job], None] | None = None
    ) -> None:
        self.policy = policy
        self.ledger = Ledger(policy)
        shares = range(len(policy.shares))
        self.queues: list[list[tuple]] = [[] for _ in shares]
        # Misconfigured jobs by (type, size), and how many queued jobs have each (type,
        # size): a policy change re-checks each once and moves only the jobs that flip.
        self.parked: list[dict[tuple[str, int], dict[str, Job]]] = [{} for _ in shares]
        self.sizes: list[dict[tuple[str, int], int]] = [{} for _ in shares]
        self.running: dict[tuple[int, str], list[tuple]] = {}
        self.running_by_priority: dict[tuple[int, str], dict[int, int]] = {}
        self.next_start_seq = 0
        self.on_misconfigured = on_misconfigured
        # Pending jobs whose misconfiguration changed since the last `settle`.
        self.unsettled: list[Job] = []
        self.need: tuple[list[bool], list[bool], list[bool]] = ([], [], [])
        self.waiting: tuple[dict, dict, dict] = ({}, {}, {})
        self.lowest: tuple[dict, dict, dict] = ({}, {}, {})
        self.strict: dict[str, set[int]] = {}
        self.over_limit: dict[int, tuple[str, int]] = {}
        self.dirty = True
        self.invalidate()

    # -- what the next pass must look at ------------------------------------------------

    def invalidate(self) -> None:
        """Forget every check: the next pass looks at every share again.

        Each flag list ends with a True that names no share, so the pass finds the next
        flagged share with `list.index(True, start)` and stops at that sentinel."""
        flags = len(self.policy.shares) + 1
        self.need = ([True] * flags, [True] * flags, [True] * flags)
        self.waiting = ({}, {}, {})
        self.lowest = ({}, {}, {})
        self.strict = {}
        # Phase-1 heads beyond their share's limit: (type, the usage that lets them in).
        self.over_limit = {}
        self.dirty = True

    def _head_changed(self, share: int) -> None:
        entitled, borrow, in_share = self.need
        entitled[share] = borrow[share] = in_share[share] = True
        self.dirty = True

    def wait(self, phase: int, share: int, itype: str, key: float) -> None:
        """A check found the share's head (of `itype`) unable to act in `phase`; look at
        it again once `_wake` finds the type within `key`'s reach."""
        self.need[phase][share] = False
        waiting = self.waiting[phase]
        keys = waiting.get(itype)
        if keys is None:
            waiting[itype] = {share: key}
        else:
            keys[share] = key
        lowest = self.lowest[phase]
        if key < lowest.get(itype, _NEVER):
            lowest[itype] = key

    def wait_for_limit(self, share: int, itype: str, usage: int) -> None:
        """The share's head (of `itype`) is beyond the share's limit: nothing but a stop
        of the share's own jobs, bringing its usage down to `usage`, lets it in."""
        self.need[0][share] = False
        self.over_limit[share] = (itype, usage)

    def _wake(self, itype: str) -> None:
        """Wake the checks waiting on `itype` whose key is now within reach.

        Keys are necessary conditions for acting, read against the type's state: a
        phase-1 head of n can start or reclaim only if `n <= free + over` (avail <= free);
        a phase-2 head only if `n <= free`; a phase-3 head only if `n - u <= free`, where
        u counts its share's running instances of the type with lower priority, all
        that stopping can free (while it waits, u can only fall, which leaves the key
        safe, or change with the share's own starts and priority changes, which set its
        flags)."""
        free = self.ledger.free.get(itype, 0)
        entitled, borrow, in_share = self.lowest
        if entitled.get(itype, _NEVER) <= free + self.ledger.over.get(itype, 0):
            self._wake_phase(0, itype, free + self.ledger.over.get(itype, 0))
        if borrow.get(itype, _NEVER) <= free:
            self._wake_phase(1, itype, free)
        if in_share.get(itype, _NEVER) <= free:
            self._wake_phase(2, itype, free)
        if self.strict:
            self.strict.pop(itype, None)

    def _wake_phase(self, phase: int, itype: str, threshold: int) -> None:
        need, keys = self.need[phase], self.waiting[phase][itype]
        rest = _NEVER
        for share, key in list(keys.items()):
            if key <= threshold:
                need[share] = True
                del keys[share]
            elif key < rest:
                rest = key
        self.lowest[phase][itype] = rest

    def protection_ended(self, job: Job) -> None:
        """`job` (running) may be a victim from now on: its type is to be looked at."""
        self.dirty = True
        self._wake(job.itype)

    # -- queues ---------------------------------------------------------------------

    def enqueue(self, job: Job) -> None:
        """Make `job` RUNNABLE: into its share's queue, or parked if misconfigured."""
        job.state = PENDING
        reason = self.policy.misconfiguration(job.share, job.itype, job.n)
        job.reason = reason
        if reason is None:
            self._queue(job)
        else:
            self._park(job)
        if (reason is None) != (job.misconfigured_since is None):
            self.unsettled.append(job)

    def _queue(self, job: Job) -> None:
        entry = (-job.priority, job.submitted_at, job.id, job)
        job.entry = entry
        heappush(self.queues[job.share], entry)
        sizes = self.sizes[job.share]
        key = (job.itype, job.n)
        sizes[key] = sizes.get(key, 0) + 1
        # The loaded head, without asking a feed for more (see `FedBoard`).
        if Board.head(self, job.share) is job:
            self._head_changed(job.share)

    def _park(self, job: Job) -> None:
        job.entry = None
        self.parked[job.share].setdefault((job.itype, job.n), {})[job.id] = job

    def _unqueue(self, job: Job) -> None:
        """Take a pending job out of its queue, or out of the parked jobs."""
        key = (job.itype, job.n)
        if job.entry is not None:
            job.entry = None
            sizes = self.sizes[job.share]
            sizes[key] -= 1
            if not sizes[key]:
                del sizes[key]
            self._head_changed(job.share)
            return
        parked = self.parked[job.share]
        group = parked.get(key)
        if group is not None and group.pop(job.id, None) is not None and not group:
            del parked[key]

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

    def misconfigured(self, share: int) -> list[Job]:
        """The share's misconfigured pending jobs (parked outside its queue)."""
        return [job for group in self.parked[share].values() for job in group.values()]

    # -- running jobs -----------------------------------------------------------------

    def _run(self, job: Job) -> None:
        key = (job.share, job.itype)
        job.state = RUNNING
        job.vkey = (job.priority, -job.started_at, -job.start_seq, job.id)
        insort(self.running.setdefault(key, []), (job.vkey, job))
        by_priority = self.running_by_priority.setdefault(key, {})
        by_priority[job.priority] = by_priority.get(job.priority, 0) + job.n
        self.ledger.add(self.policy.shares[job.share], job.itype, job.n)
        self.dirty = True
        # A start only takes capacity, which overturns no check but a reclaim short of
        # unprotected victims.
        if self.strict:
            need = self.need[0]
            for share in self.strict.pop(job.itype, ()):
                need[share] = True

    def _release(self, job: Job) -> None:
        key = (job.share, job.itype)
        running = self.running[key]
        del running[bisect_left(running, (job.vkey,))]
        by_priority = self.running_by_priority[key]
        by_priority[job.priority] -= job.n
        if not by_priority[job.priority]:
            del by_priority[job.priority]
        self.ledger.add(self.policy.shares[job.share], job.itype, -job.n)
        blocked = self.over_limit.get(job.share)
        if (
            blocked is not None
            and blocked[0] == job.itype
            and self.ledger.usage[job.share][job.itype] <= blocked[1]
        ):
            del self.over_limit[job.share]
            self.need[0][job.share] = True
        self.dirty = True
        self._wake(job.itype)

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
            # Its share's phase-3 key counted the jobs below its head's priority.
            self._head_changed(job.share)
        elif job.state == PENDING and job.entry is not None:
            job.priority = priority
            job.entry = (-priority, job.submitted_at, job.id, job)
            heappush(self.queues[job.share], job.entry)
            self._head_changed(job.share)
        else:
            job.priority = priority

    # -- policy ---------------------------------------------------------------------

    def set_policy(self, policy: Policy) -> None:
        """Adopt a new policy (same shares, same order) and re-check the pending jobs.

        Misconfiguration depends only on a job's share, type and size, so each distinct
        (share, type, size) is judged once and only the jobs whose status flips move:
        queued jobs that become misconfigured leave in queue order (the order their
        clocks start in), parked jobs that are cured join their queue.
        """
        self.policy = policy
        self.ledger.set_policy(policy)
        self.invalidate()
        misconfiguration = policy.misconfiguration
        for share in range(len(policy.shares)):
            sizes, parked = self.sizes[share], self.parked[share]
            leaving = {}
            for key in sizes:
                reason = misconfiguration(share, *key)
                if reason is not None:
                    leaving[key] = reason
            cured = []
            for key, group in parked.items():
                reason = misconfiguration(share, *key)
                if reason is None:
                    cured.append(key)
                elif next(iter(group.values())).reason != reason:
                    for job in group.values():
                        job.reason = reason
            if leaving:
                self._leave_queue(share, leaving)
            for key in cured:
                for job in parked.pop(key).values():
                    job.reason = None
                    self._queue(job)
                    if job.misconfigured_since is not None:
                        self.unsettled.append(job)

    def _leave_queue(self, share: int, leaving: dict[tuple[str, int], str]) -> None:
        kept, moved = [], []
        for entry in self.queues[share]:
            job = entry[3]
            if job.entry is entry:
                (moved if (job.itype, job.n) in leaving else kept).append(entry)
        heapify(kept)
        self.queues[share] = kept
        sizes = self.sizes[share]
        for key in leaving:
            del sizes[key]
        moved.sort()
        for entry in moved:
            job = entry[3]
            job.reason = leaving[(job.itype, job.n)]
            self._park(job)
            if job.misconfigured_since is None:
                self.unsettled.append(job)

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
            for job in self.misconfigured(rule.index):
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


def _lower_priority_use(board: Board, share: int, job: Job) -> int:
    """Instances of the share's running jobs of `job`'s type with lower priority."""
    by_priority = board.running_by_priority.get((share, job.itype))
    if not by_priority:
        return 0
    priority = job.priority
    return sum(count for p, count in by_priority.items() if p < priority)


def _in_share_victims(
    board: Board, rule: ShareRule, job: Job, now: int, at_most: int
) -> list[Job] | None:
    """Lower-priority jobs of the same share and type (`at_most` instances of them) whose
    stop lets `job` start; None when no such set exists, [] when `job` needs no stop
    (phase 3 then does nothing; unlike None, that can change when other shares take
    capacity)."""
    key = (rule.index, job.itype)
    if not at_most:
        return None
    priority = job.priority
    need = board.ledger.in_share_need(rule, job.itype, job.n)
    if need <= 0:
        return []
    if at_most < need:
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


def _one_pass(board: Board, now: int, out: list) -> None:
    """Run the three phases once, looking only at the shares `board.need` names for the
    phase: the others were found unable to act, and nothing since could let them (see
    `Board._wake`), so they would not act, and skipping them changes no decision.

    A start by another share only takes capacity: `avail`, the pool and `free` fall or
    stay, so it never lets a head start, borrow or preempt in its share (fewer free
    instances only raise what a preemption needs); it can add a reclaim victim, so a
    reclaim that found too few unprotected victims waits on starts too (`strict`).
    """
    policy, ledger = board.policy, board.ledger
    rules = policy.shares
    last = len(rules)
    head = board.head
    need_entitled, need_borrow, need_in_share = board.need
    wait = board.wait
    held: list[Job] = []

    # Phase 1: entitlement, shares in listed order (flagged ones; a share flagged during
    # the phase further on in the order is found too, as a full scan would reach it).
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
                if avail + ledger.over.get(itype, 0) < n:
                    wait(0, share, itype, n)
                    break
                victims = _reclaim_victims(board, rule, job, now)
                if victims is None:
                    wait(0, share, itype, -_NEVER)
                    board.strict.setdefault(itype, set()).add(share)
                    break
                for victim in victims:
                    _stop(board, victim, "reclaim", job, out, held)
            board.start(job, now, out)
        share = need_entitled.index(True, share + 1)

    # Phase 2: borrowing, first-in first-out across shares (submission time, then id).
    order = []
    share = need_borrow.index(True)
    while share < last:
        if rules[share].can_borrow:
            job = head(share)
            if job is None:
                need_borrow[share] = False
            elif not job.held:
                order.append((job.submitted_at, job.id, share, job))
        else:
            need_borrow[share] = False
        share = need_borrow.index(True, share + 1)
    heapify(order)
    while order:
        _, _, share, job = heappop(order)
        rule = rules[share]
        itype, n = job.itype, job.n
        if ledger.within_limit(rule, itype, n):
            startable = n <= ledger.avail(rule, itype)
        else:
            startable = ledger.borrow_blocker(rule, itype, n) is None
        if not startable:
            wait(1, share, itype, n)
            continue
        board.start(job, now, out)
        job = head(share)
        if job is None:
            need_borrow[share] = False
        elif not job.held:
            heappush(order, (job.submitted_at, job.id, share, job))

    # Phase 3: in-share preemption, shares in listed order (borrowing was tried first).
    share = need_in_share.index(True)
    while share < last:
        rule = rules[share]
        job = head(share) if rule.in_share_preemption else None
        if job is None:
            need_in_share[share] = False
        elif not job.held:
            at_most = _lower_priority_use(board, share, job)
            victims = _in_share_victims(board, rule, job, now, at_most)
            if victims is None:
                wait(2, share, job.itype, job.n - at_most)
            elif victims:
                for victim in victims:
                    _stop(board, victim, "priority", job, out, held)
                board.start(job, now, out)
        share = need_in_share.index(True, share + 1)

    for victim in held:
        victim.held = False


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
    entitled, borrow, in_share = board.need
    while board.dirty:
        board.dirty = False
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


def _share_index(policy: Policy, job_id: str, name: str) -> int:
    rule = policy.by_name.get(name)
    if rule is None:
        raise ValueError(f"job '{job_id}' names share '{name}', which the snapshot lacks")
    return rule.index


def _pending_job(policy: Policy, waiting: PendingJob) -> Job:
    job = Job(
        id=waiting.id,
        share=_share_index(policy, waiting.id, waiting.share),
        priority=waiting.priority,
        itype=waiting.instance_type,
        n=waiting.instances,
        submitted_at=waiting.submitted_at,
        protected_until=waiting.protected_until,
        preemptions=waiting.preemptions,
        retries=waiting.preemption_retries,
    )
    job.misconfigured_since = waiting.misconfigured_since
    return job


def _fill_board(board: Board, snapshot: Snapshot) -> list[Job]:
    """Put the snapshot's running and pending jobs on `board`; the pending, in order."""
    policy = board.policy
    for running in snapshot.running:
        job = Job(
            id=running.id,
            share=_share_index(policy, running.id, running.share),
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
        job = _pending_job(policy, waiting)
        board.enqueue(job)
        pending.append(job)
    return pending


def board_from_snapshot(snapshot: Snapshot) -> tuple[Board, list[Job]]:
    """A board holding the snapshot's jobs; also returns the pending jobs in snapshot order."""
    board = Board(Policy(snapshot.queue, snapshot.shares))
    return board, _fill_board(board, snapshot)


# -- a board fed lazily ---------------------------------------------------------------


# The largest id: a frontier `(-priority, second, LAST_ID)` takes in every job of that
# priority and second.
LAST_ID = "\U0010ffff"


class Feed(Protocol):
    """The rest of one share's well-configured pending jobs, page by page, in queue order.

    `frontier` is a queue key `(-priority, submitted_at, id)` such that every such job
    of the share whose key is at most `frontier` is on the board already; None once
    every job is. `more()` returns the next page (jobs already on the board left out)
    and moves the frontier on; a call that moves nothing on ends the feed.
    """

    frontier: tuple[int, int, str] | None

    def more(self) -> Sequence[PendingJob]: ...


class FedBoard(Board):
    """A board that holds only the front of each share's queue and asks the share's
    `Feed` for more whenever the loaded front might not be the real head: the queue is
    empty or its first job lies beyond the feed's frontier. Every decision reads only
    heads, so it decides exactly what a board holding every pending job decides (the
    property tests compare both); reasons come for the jobs it holds, and every job it
    does not hold is behind its share's head."""

    def __init__(self, policy: Policy, feeds: Sequence[Feed | None]) -> None:
        super().__init__(policy)
        self.feeds = list(feeds)
        self.fetched: list[Job] = []

    def head(self, share: int) -> Job | None:
        queue = self.queues[share]
        feed = self.feeds[share]
        while True:
            while queue and queue[0][3].entry is not queue[0]:
                heappop(queue)
            if feed is None:
                return queue[0][3] if queue else None
            frontier = feed.frontier
            if frontier is None:
                self.feeds[share] = feed = None
                continue
            if queue and queue[0][:3] <= frontier:
                return queue[0][3]
            page = feed.more()
            for waiting in page:
                job = _pending_job(self.policy, waiting)
                if job.share != share:
                    raise ValueError(f"the feed of share {share} returned job '{job.id}'")
                self.enqueue(job)
                self.fetched.append(job)
            if not page and feed.frontier == frontier:
                self.feeds[share] = feed = None  # a page that moves nothing on ends the feed

    def pending_reasons(self) -> dict[str, str]:
        for share in range(len(self.policy.shares)):
            self.head(share)  # the real head: its reason is the share's blocker
        return super().pending_reasons()


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
    pending = _fill_board(board, snapshot)
    out: list = []
    enforce_capacity(board, out)
    board.settle(now)
    fail_overdue(board, pending, now, out)
    run_passes(board, now, out)
    reasons = board.pending_reasons()
    if board.unsettled:  # jobs the reasons' look at the heads brought in
        board.settle(now)
    return PassResult(decisions=decisions_to_values(out), reasons=reasons)


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
