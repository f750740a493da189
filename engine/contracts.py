"""Interruption contracts (spec v2) and the figure derived from them: how long a lender
waits to get its capacity back (V13).

`reclaim_bound` reads the borrowers present in a `Snapshot` at one instant;
`policy_reclaim_bound` is its worst case for a policy, from the contracts the borrowing
shares' jobs may carry (workload classes, job definitions), for the policy editor.
Both are a sum of two maxima, not the maximum of per-job sums: a victim set is chosen
all at once (V4), so a victim whose protection ends early waits for the others and then
gets its full grace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .quota import borrow_cap
from .strategies import strategy_capabilities
from .types import ShareSpec, Snapshot


@dataclass(frozen=True)
class Contract:
    """A job's interruption contract (V1); the defaults are no contract."""

    min_runtime_reclaim: int = 0
    min_runtime_preempt: int = 0
    grace: int = 0
    checkpoint_on_notice: int | None = None


def reclaim_bound(snapshot: Snapshot, share: str, instance_type: str, now: int) -> int:
    """V13: the most a reclaim for `share` of `instance_type` can wait at `now` on the
    borrowers present: the largest remaining protection from reclaim plus the largest
    grace over the running jobs of the type of the other shares over their limit. A
    STOPPING job counts its remaining notice as grace and no protection; the engine's
    `protected_until` counts as protection. 0 when no other share is over its limit."""
    limits = {rule.name: rule.capacity_limits.get(instance_type, 0) for rule in snapshot.shares}
    if share not in limits:
        raise ValueError(f"share '{share}' is not in the snapshot")
    jobs = [
        job for job in snapshot.running if job.instance_type == instance_type and job.share != share
    ]
    usage: dict[str, int] = {}
    for job in jobs:
        usage[job.share] = usage.get(job.share, 0) + job.instances
    protection = grace = 0
    for job in jobs:
        if usage[job.share] <= limits.get(job.share, 0):
            continue
        if job.stopping_until is not None:
            grace = max(grace, job.stopping_until - now)
            continue
        run_from = job.started_at if job.run_started_at is None else job.run_started_at
        remaining = run_from + (job.min_runtime_reclaim or 0) - now
        if job.protected_until is not None:
            remaining = max(remaining, job.protected_until - now)
        protection = max(protection, remaining)
        grace = max(grace, job.grace or 0)
    return protection + grace


def policy_reclaim_bound(
    shares: Sequence[ShareSpec],
    share: str,
    instance_type: str,
    contracts: Mapping[str, Iterable[Contract]],
) -> int:
    """V13's policy-level worst case for `share`'s capacity of `instance_type`: the
    largest `min_runtime_reclaim` plus the largest `grace` over the contracts
    (`contracts[name]`: those the share's jobs may carry) of the shares that may borrow
    the type: the other enabled LEND_AND_BORROW shares whose borrow limit lets them
    borrow it. With one contract for all borrowers, `min_runtime_reclaim + grace`."""
    if not any(rule.name == share for rule in shares):
        raise ValueError(f"share '{share}' is not in the policy")
    protection = grace = 0
    for rule in shares:
        if rule.name == share or not rule.enabled:
            continue
        if not strategy_capabilities(rule.strategy).borrows:
            continue
        cap = borrow_cap(rule.capacity_limits.get(instance_type, 0), rule.borrow_limit)
        if cap == 0:
            continue
        for contract in contracts.get(rule.name, ()):
            protection = max(protection, contract.min_runtime_reclaim)
            grace = max(grace, contract.grace)
    return protection + grace
