"""The board: the state of one queue at the current instant, which a pass reads and
changes (engine.scheduling says the rules it serves).

`Board` holds each share's queue (a heap with lazy deletion; misconfigured jobs parked
outside it), the running jobs of each (share, type) in victim order, the ledger's
counters, and what the next pass must look at (`need`, `waiting`, `strict`,
`over_limit`, `dirty`). `board_from_snapshot` fills one from a frozen `Snapshot`.
`FedBoard` holds only the front of each share's queue and asks the share's `Feed` for
more whenever its loaded front might not be the real head.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from heapq import heapify, heappop, heappush
from typing import Protocol

from .quota import Ledger, Policy
from .types import BLOCKED_BEHIND_HEAD, PendingJob, Snapshot

PENDING, RUNNING, DONE, FUTURE = "PENDING", "RUNNING", "DONE", "FUTURE"
# A wait key no change reaches; a wait on -NEVER is woken by any.
NEVER = float("inf")
START, PREEMPT, FAIL = "start", "preempt", "fail"
# Spec v2: a victim given notice (it is STOPPING), and the stop of a STOPPING job.
NOTICE, STOPPED = "notice", "stopped"


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
        "min_reclaim",
        "min_preempt",
        "grace",
        "ckpt_notice",
        "run_from",
        "stopping",
        "stop_at",
        "notice_for",
        "awaiting",
        "held_n",
        "blocked_at",
        "protected_blocks",
        "episode",
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
        min_reclaim: int = 0,
        min_preempt: int = 0,
        grace: int = 0,
        ckpt_notice: int | None = None,
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
        # Also set while the job waits for its victims with notice (spec v2, V8).
        self.held = False
        # The interruption contract (spec v2) and its state: `run_from` is the start of
        # the current run (protection counts from it); a STOPPING job (`stopping`) stops
        # at `stop_at`, and `notice_for` is the starter waiting for it; a waiting
        # starter counts the victims it waits for (`awaiting`) and the instances held
        # for it (`held_n`). `blocked_at` / `protected_blocks` count V4's protected
        # blocks, and `episode` is when the job's current reclaim episode began (V12).
        self.min_reclaim = min_reclaim
        self.min_preempt = min_preempt
        self.grace = grace
        self.ckpt_notice = ckpt_notice
        self.run_from = 0
        self.stopping = False
        self.stop_at = 0
        self.notice_for: Job | None = None
        self.awaiting = 0
        self.held_n = 0
        self.blocked_at = -1
        self.protected_blocks = 0
        self.episode: int | None = None

    def protected(self, now: int) -> bool:
        return self.protected_until is not None and now < self.protected_until

    def protected_from_reclaim(self, now: int) -> bool:
        """Not a reclaim victim now: `protected_until`, or V3's minimum runtime."""
        if self.protected_until is not None and now < self.protected_until:
            return True
        return now - self.run_from < self.min_reclaim

    def protected_from_preempt(self, now: int) -> bool:
        """Not an in-share victim now: `protected_until`, or V3's minimum runtime."""
        if self.protected_until is not None and now < self.protected_until:
            return True
        return now - self.run_from < self.min_preempt


class Board:
    """Mutable state of a queue at the current instant: queues, running jobs, ledger.

    Decisions are appended to `out` as tuples `(START, job, borrowed)`,
    `(PREEMPT, job, cause, by_job, fails)` and `(FAIL, job, cause)` in the order they
    happen. `on_misconfigured(job)` (optional) is told, by `settle`, whenever a pending
    job is judged newly misconfigured, so a caller can start its `runnable_time_limit`
    clock.

    What the next pass must look at (see `scheduling._one_pass`): `need[phase][share]` is set when
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
        # The queue's orders (engine.ordering), looked up once: the victim order sorts
        # every victim list; the borrowing order makes phase 2's rounds and may have a
        # phase 2b.
        self.victim_key = policy.victim_order.key
        self._adopt_borrowing_order(policy)
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
        # Spec v2: whether any job has a contract (the passes then look at every share
        # each time: the wake-up keys above know nothing of notices and holds), the
        # STOPPING jobs of each type in victim order, and their instances per share.
        self.v2 = False
        self.stopping: dict[str, list[tuple]] = {}
        self.stopping_use: list[dict[str, int]] = [{} for _ in shares]
        # The jobs whose protection counted a block (V4), each once, in the order of their
        # first.
        self.blocked: list[Job] = []
        self.invalidate()

    def _adopt_borrowing_order(self, policy: Policy) -> None:
        self.borrowing_round = policy.borrowing_order.round
        self.rebalance = policy.borrowing_order.rebalance

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
        if key < lowest.get(itype, NEVER):
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
        if entitled.get(itype, NEVER) <= free + self.ledger.over.get(itype, 0):
            self._wake_phase(0, itype, free + self.ledger.over.get(itype, 0))
        if borrow.get(itype, NEVER) <= free:
            self._wake_phase(1, itype, free)
        if in_share.get(itype, NEVER) <= free:
            self._wake_phase(2, itype, free)
        if self.strict:
            self.strict.pop(itype, None)

    def _wake_phase(self, phase: int, itype: str, threshold: int) -> None:
        need, keys = self.need[phase], self.waiting[phase][itype]
        rest = NEVER
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
        job.vkey = self.victim_key(job)
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

    def _release(self, job: Job, hold: bool = True) -> None:
        if job.stopping:
            self._leave_stopping(job, hold)
        else:
            self._unrun(job)
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

    def _unrun(self, job: Job) -> None:
        """Take a running job off its (share, type)'s victim list and priority sums."""
        key = (job.share, job.itype)
        running = self.running[key]
        del running[bisect_left(running, (job.vkey,))]
        by_priority = self.running_by_priority[key]
        by_priority[job.priority] -= job.n
        if not by_priority[job.priority]:
            del by_priority[job.priority]

    # -- notice (spec v2) -------------------------------------------------------------

    def _make_stopping(self, job: Job, stop_at: int, starter: Job | None) -> None:
        """The running job is STOPPING: off the victim lists (never a reclaim or in-share
        victim again, V7), still in usage, first in line for a capacity cut (V10.1)."""
        self._unrun(job)
        job.stopping = True
        job.stop_at = stop_at
        job.notice_for = starter
        insort(self.stopping.setdefault(job.itype, []), (job.vkey, job))
        use = self.stopping_use[job.share]
        use[job.itype] = use.get(job.itype, 0) + job.n
        self.dirty = True

    def _leave_stopping(self, job: Job, hold: bool) -> None:
        """The STOPPING job frees its capacity (stop, finish, terminate, capacity cut); a
        starter waiting for it holds the instances (`hold`, V8.2) and, when it was the
        last victim it waited for, stops waiting (V8.3)."""
        stopping = self.stopping[job.itype]
        del stopping[bisect_left(stopping, (job.vkey,))]
        self.stopping_use[job.share][job.itype] -= job.n
        job.stopping = False
        starter, job.notice_for = job.notice_for, None
        if starter is not None and starter.awaiting:
            if hold:
                self.hold(starter, job.itype, job.n)
            starter.awaiting -= 1
            if not starter.awaiting:
                self.end_wait(starter)

    def hold(self, starter: Job, itype: str, n: int) -> None:
        """Hold `n` freed instances of `itype` for a waiting starter (V8.2)."""
        starter.held_n += n
        hold = self.ledger.hold
        hold[itype] = hold.get(itype, 0) + n

    def end_wait(self, starter: Job) -> None:
        """The starter no longer waits for victims: its hold ends and it competes as
        any job (V8.3, V8.4)."""
        if starter.held_n:
            hold = self.ledger.hold
            hold[starter.itype] -= starter.held_n
            if not hold[starter.itype]:
                del hold[starter.itype]
            starter.held_n = 0
        starter.awaiting = 0
        starter.held = False
        self.dirty = True
        if starter.state == PENDING and starter.entry is not None:
            self._head_changed(starter.share)

    def notice(self, job: Job, cause: str, by: Job, now: int, out: list) -> None:
        """Give a victim with grace notice (V6.2): it is STOPPING until its stop instant,
        and `by` waits for it (V8). The preemption counts now; the retry bound is judged
        at the stop (V9), so `fails` in the decision says what the stop will do."""
        saves = job.ckpt_notice is not None and job.ckpt_notice <= job.grace
        stop_at = now + (job.ckpt_notice if saves else job.grace)
        self._make_stopping(job, stop_at, by)
        job.preemptions += 1
        fails = job.retries is not None and job.preemptions > job.retries
        out.append((NOTICE, job, cause, by, fails, now + job.grace, stop_at, saves))

    def stop(self, job: Job, cause: str | None, out: list, *, hold: bool = True) -> bool:
        """A STOPPING job stops (V9; `cause` None: at its stop instant, else the cause of a
        capacity cut, V10.1) and frees its capacity; return whether it goes back to
        RUNNABLE (else FAILED, its retry bound spent)."""
        self._release(job, hold)
        fails = job.retries is not None and job.preemptions > job.retries
        job.state = DONE if fails else PENDING
        out.append((STOPPED, job, cause, fails))
        return not fails

    def over_prime(self, itype: str) -> int:
        """Σ over'(B,T): what shares borrow of T without their STOPPING jobs (V7)."""
        total = 0
        usage, use = self.ledger.usage, self.stopping_use
        for rule in self.policy.shares:
            over = (
                usage[rule.index].get(itype, 0)
                - use[rule.index].get(itype, 0)
                - rule.limits.get(itype, 0)
            )
            if over > 0:
                total += over
        return total

    def place_running(self, job: Job, *, started_at: int, start_seq: int) -> None:
        """Put a job that is already running (from a snapshot) on the board."""
        job.started_at = started_at
        job.run_from = started_at
        job.start_seq = start_seq
        self.next_start_seq = max(self.next_start_seq, start_seq + 1)
        self._run(job)

    def start(self, job: Job, now: int, out: list) -> None:
        self._unqueue(job)
        job.started_at = now
        job.run_from = now
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
            if job.awaiting or job.held_n:
                self.end_wait(job)  # V8.4: its victims' notices run on
        job.state = DONE
        out.append((FAIL, job, cause))

    def set_priority(self, job: Job, priority: int) -> None:
        if job.state == RUNNING and job.stopping:
            stopping = self.stopping[job.itype]
            del stopping[bisect_left(stopping, (job.vkey,))]
            job.priority = priority
            job.vkey = self.victim_key(job)
            insort(stopping, (job.vkey, job))
            self.dirty = True
        elif job.state == RUNNING:
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
        if policy.victim_order.key != self.victim_key:
            # Its victim lists are sorted by the old order; no action changes a queue's.
            raise ValueError("a policy change keeps the queue's victim order")
        self.policy = policy
        self.ledger.set_policy(policy)
        self._adopt_borrowing_order(policy)
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


# -- a board from a snapshot ------------------------------------------------------


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


def fill_board(board: Board, snapshot: Snapshot) -> list[Job]:
    """Put the snapshot's running and pending jobs on `board`; the pending, in order."""
    policy = board.policy
    stopping: dict[str, tuple[Job, str | None]] = {}
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
            min_reclaim=running.min_runtime_reclaim or 0,
            min_preempt=running.min_runtime_preempt or 0,
            grace=running.grace or 0,
            ckpt_notice=running.checkpoint_on_notice,
        )
        board.place_running(job, started_at=running.started_at, start_seq=running.start_seq)
        if running.run_started_at is not None:
            job.run_from = running.run_started_at
        if job.min_reclaim or job.min_preempt or job.grace:
            board.v2 = True
        if running.stopping_until is not None:
            board.v2 = True
            board._make_stopping(job, running.stopping_until, None)
            stopping[job.id] = (job, running.notice_for)
    pending = []
    for waiting in snapshot.pending:
        job = _pending_job(policy, waiting)
        board.enqueue(job)
        pending.append(job)
        victims = [stopping[v][0] for v in waiting.awaiting_victims if v in stopping]
        if victims:  # V8: it waits for its STOPPING victims, its freed instances held
            board.v2 = True
            job.held = True
            job.awaiting = len(victims)
            for victim in victims:
                victim.notice_for = job
            if waiting.held_instances:
                board.hold(job, job.itype, waiting.held_instances)
    return pending


def board_from_snapshot(snapshot: Snapshot) -> tuple[Board, list[Job]]:
    """A board holding the snapshot's jobs; also returns the pending jobs in snapshot order."""
    board = Board(Policy(snapshot.queue, snapshot.shares))
    return board, fill_board(board, snapshot)


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
