"""Victim choice: which running jobs a reclaim, an in-share preemption or a capacity
cut stops, in victim order and as minimal sets (engine.scheduling's docstring gives the
orders and tie-breaks), and which a reclaim could take now (`reclaimable`).

The victim order is the queue's (engine.ordering): every victim list of the board is
sorted by its key, and a reclaim asks it which share's first candidate goes next.
"""

from __future__ import annotations

from collections.abc import Callable

from .board import Board, Job
from .quota import ShareRule

# -- victims ------------------------------------------------------------------------


def _spare(chosen: list[Job], need_met: Callable[[list[Job], int], bool]) -> list[Job]:
    """Minimal set: from the most recently chosen back (the last is kept), spare a victim
    whenever the need is still met without it. `need_met(chosen, skip)` judges the set
    `chosen` without index `skip`."""
    for index in range(len(chosen) - 2, -1, -1):
        if need_met(chosen, index):
            del chosen[index]
    return chosen


def reclaim_victims(
    board: Board, rule: ShareRule, job: Job, now: int, protect: bool = True
) -> list[Job] | None:
    """Victims letting `job` (within its share's limit) start: jobs of T of shares over
    their limit when chosen, in victim order, never protected ones; None if none suffice.

    STOPPING jobs are no candidates, and a share is over its limit here without them
    (`over'`, spec v2 V7). `protect=False` gives the set the rule would choose if no job
    were protected (V4's protected blocks)."""
    ledger, policy, itype, n = board.ledger, board.policy, job.itype, job.n
    stopping_use = board.stopping_use
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

    choose = policy.victim_order.choose
    chosen: list[Job] = []
    while avail_after() < n:
        firsts: list[Job] = []
        for share, running in candidates.items():
            other = policy.shares[share]
            used = ledger.used(other, itype) - stopping_use[share].get(itype, 0)
            if used - removed[share] <= other.limits.get(itype, 0):
                continue
            position = cursor[share]
            while (
                protect
                and position < len(running)
                and running[position][1].protected_from_reclaim(now)
            ):
                position += 1
            cursor[share] = position
            if position < len(running):
                firsts.append(running[position][1])
        if not firsts:
            return None
        best = choose(board, firsts, removed)
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


def lower_priority_use(board: Board, share: int, job: Job) -> int:
    """Instances of the share's running jobs of `job`'s type with lower priority."""
    by_priority = board.running_by_priority.get((share, job.itype))
    if not by_priority:
        return 0
    priority = job.priority
    return sum(count for p, count in by_priority.items() if p < priority)


def in_share_victims(
    board: Board, rule: ShareRule, job: Job, now: int, at_most: int, protect: bool = True
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
            continue  # the queue's victim order need not put lower priorities first
        if protect and victim.protected_from_preempt(now):
            continue
        chosen.append(victim)
        total += victim.n
        if total >= need:
            return _spare(chosen, _linear_need_met(need))
    return None


def capacity_victims(board: Board, itype: str, excess: int) -> list[Job]:
    """Jobs of T to stop so usage fits capacity: STOPPING jobs first (spec v2, V10.1),
    then jobs of shares over their limit (when chosen), then any, each in victim order;
    protection and notice do not apply."""
    policy, ledger = board.policy, board.ledger
    candidates = {rule.index: board.running.get((rule.index, itype), []) for rule in policy.shares}
    cursor = dict.fromkeys(candidates, 0)
    removed = dict.fromkeys(candidates, 0)
    chosen: list[Job] = []
    total = 0
    for _, victim in board.stopping.get(itype, ()):
        if total >= excess:
            break
        chosen.append(victim)
        removed[victim.share] += victim.n
        total += victim.n
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
    excess = (
        board.ledger.used(rule, itype)
        - board.stopping_use[rule.index].get(itype, 0)
        - rule.limits.get(itype, 0)
    )
    chosen: list[Job] = []
    for _, job in board.running.get((rule.index, itype), []):
        if excess <= 0:
            break
        if not job.protected_from_reclaim(now):
            chosen.append(job)
            excess -= job.n
    return chosen
