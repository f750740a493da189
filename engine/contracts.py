"""Interruption contracts (spec v2): their one range check (`contract_problems`, V1,
for scenario documents, workload classes and what-if contracts alike) and the figure
derived from them: how long a lender waits to get its capacity back (V13).

`reclaim_bound` reads the borrowers present in a `Snapshot` at one instant;
`policy_reclaim_bound` is its worst case for a policy, from the contracts the borrowing
shares' jobs may carry (workload classes, job definitions), for the policy editor.
Both are a sum of two maxima, not the maximum of per-job sums: a victim set is chosen
all at once (V4), so a victim whose protection ends early waits for the others and then
gets its full grace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .quota import borrow_cap
from .strategies import strategy_capabilities
from .types import MAX_INTEGER, ShareSpec, Snapshot


@dataclass(frozen=True)
class Contract:
    """A job's interruption contract (V1); the defaults are no contract."""

    min_runtime_reclaim: int = 0
    min_runtime_preempt: int = 0
    grace: int = 0
    checkpoint_on_notice: int | None = None


# The contract's fields (V1), in the order every document and message lists them.
CONTRACT_FIELDS = tuple(field.name for field in dataclasses.fields(Contract))
# The least value of each; null (None) is absent: 0, or for checkpoint_on_notice, "it
# does not checkpoint on notice".
_LEAST = {"min_runtime_reclaim": 0, "min_runtime_preempt": 0, "grace": 0, "checkpoint_on_notice": 1}


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def contract_problems(fields: Mapping, *, maximum: int | None = None) -> dict[str, str]:
    """The one range check of a contract (V1): field -> why its value is refused, in
    CONTRACT_FIELDS order; {} when `fields` (any of the four, null meaning absent) is a
    contract. A key that is not a contract field is refused too.

    `maximum` None: the scenario format's open ranges, bounded only by the largest whole
    number a document holds (MAX_INTEGER), in the words every field of a document uses
    ("must be at least 0"). A `maximum` (seconds) is a product's bound: the message then
    gives the whole range ("must be a whole number of seconds from 0 to 604800").

    Whether `checkpoint_on_notice` without a grace is allowed is not a range: the
    format allows it (it has no effect, V1); a product may refuse it on top."""
    problems: dict[str, str] = {}
    for name in CONTRACT_FIELDS:
        value = fields.get(name)
        if value is None:
            continue
        least = _LEAST[name]
        if maximum is not None:
            if not _whole(value) or not least <= value <= maximum:
                problems[name] = f"must be a whole number of seconds from {least} to {maximum}"
        elif not _whole(value):
            problems[name] = "must be a whole number"
        elif value < least:
            problems[name] = f"must be at least {least}"
        elif value > MAX_INTEGER:
            problems[name] = f"must be at most {MAX_INTEGER}"
    for name in fields:
        if name not in _LEAST:
            problems[str(name)] = f"not a contract field ({', '.join(CONTRACT_FIELDS)})"
    return problems


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
