"""Quota math: the policy compiled for lookups, and the usage ledger with its counters.

Definitions (spec, per share S and instance type T): `usage(S,T)`, `limit(S,T)` (0 if
absent), `over = max(0, usage - limit)`, `idle = max(0, limit - usage)`,
`free(T) = capacity(T) - sum usage(., T)`.

The ledger keeps, per type, the sums a pass needs so that every check is O(1) whatever
the number of jobs: free capacity, the idle capacity RESERVE shares hold, the
lendable pool and the total borrowed. The pool uses the identity
`idle - over = limit - usage`: `pool(T) = sum idle(L) over lenders - sum over(B) over all
shares = sum (limit - usage) over lenders - sum over(R) over the non-lending (RESERVE)
shares`, so one start or stop changes it by a known amount.

Everything here is the single implementation of the quota rules: the pass, the
simulator, the reasons and the impact preview all call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import inf

from .ordering import borrowing_order, victim_order
from .strategies import strategy_capabilities
from .types import (
    BORROW_LIMIT_REACHED,
    BORROWABLE_CAPACITY_EXCEEDED,
    QUOTA_MANAGEMENT_LIMIT_EXCEEDED,
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
    SHARE_LIMIT_REACHED,
    WAITING_FOR_CAPACITY,
    QueueSpec,
    ShareSpec,
)


def borrow_cap(limit: int, borrow_limit: int) -> int | None:
    """The most a LEND_AND_BORROW share may borrow of a type beyond its `limit`:
    `floor(limit * borrow_limit / 100)`, `borrow_limit` a percent; None when it is -1
    (unlimited)."""
    return None if borrow_limit == -1 else limit * borrow_limit // 100


def quota_max(limit: int, strategy: str, borrow_limit: int | None) -> float:
    """The largest job of a type a share's quota allows (rule 7): its `limit` for a
    strategy that does not borrow; for one that does, its limit plus its borrow cap (inf
    when unlimited). `borrow_limit` is only read for those (it is None for the others)."""
    if not strategy_capabilities(strategy).borrows:
        return limit
    cap = borrow_cap(limit, borrow_limit)
    return inf if cap is None else limit + cap


def misconfiguration(
    instances: int, capacity: int, quota_allows: float, borrowing_allows: float = inf
) -> str | None:
    """Why a job of `instances` can never start as things are configured (rule 7, in its
    order), or None: more than the queue's `capacity` of its type; more than its share's
    quota allows (`quota_max`); more than its share could ever borrow (LEND_AND_BORROW:
    its limit plus the other lenders' limits)."""
    if instances > capacity:
        return SERVICE_ENVIRONMENT_MAX_RESOURCE
    if instances > quota_allows:
        return QUOTA_MANAGEMENT_LIMIT_EXCEEDED
    if instances > borrowing_allows:
        return BORROWABLE_CAPACITY_EXCEEDED
    return None


@dataclass(frozen=True, eq=False)
class ShareRule:
    """A share's policy in the form the pass reads it.

    `limits` is a plain dict (the pass reads it millions of times; a `FrozenMap` lookup
    goes through `Mapping.get` in Python). `caps[T]` is the borrow cap
    `floor(limit * borrow_limit / 100)` for every type of the queue (None: unlimited);
    only a share that `can_borrow` ever uses it.
    """

    index: int
    name: str
    limits: dict[str, int]
    reserve: bool
    lender: bool
    can_borrow: bool
    caps: Mapping[str, int | None]
    in_share_preemption: bool
    spec: ShareSpec


class Policy:
    """A queue and its shares, compiled once per policy change (the queue's orders
    looked up here, once: an unknown name is refused, named)."""

    def __init__(self, queue: QueueSpec, shares: Sequence[ShareSpec]) -> None:
        self.queue = queue
        self.capacity: Mapping[str, int] = queue.capacity
        self.borrowing_order = borrowing_order(queue.borrowing_order)
        self.victim_order = victim_order(queue.victim_order)
        types = set(queue.capacity)
        for share in shares:
            types.update(share.capacity_limits)
        # Sorted so that anything iterating over types is deterministic.
        self.types: tuple[str, ...] = tuple(sorted(types))
        rules = []
        for index, share in enumerate(shares):
            does = strategy_capabilities(share.strategy)
            caps = {}
            for instance_type in self.types:
                limit = share.capacity_limits.get(instance_type, 0)
                caps[instance_type] = borrow_cap(limit, share.borrow_limit)
            rules.append(
                ShareRule(
                    index=index,
                    name=share.name,
                    limits=dict(share.capacity_limits),
                    reserve=does.holds_idle,
                    lender=does.lends,
                    can_borrow=does.borrows and share.enabled,
                    caps=caps,
                    in_share_preemption=share.in_share_preemption,
                    spec=share,
                )
            )
        self.shares: tuple[ShareRule, ...] = tuple(rules)
        self.by_name: dict[str, ShareRule] = {rule.name: rule for rule in rules}
        self._fit_cache: dict[tuple[int, str], tuple[int, float, float]] = {}

    def limit_sum(self, instance_type: str) -> int:
        return sum(rule.limits.get(instance_type, 0) for rule in self.shares)

    def _fit(self, share: int, instance_type: str) -> tuple[int, float, float]:
        """(capacity, largest job the quota allows, largest job borrowing allows) for S, T."""
        key = (share, instance_type)
        fit = self._fit_cache.get(key)
        if fit is None:
            rule = self.shares[share]
            limit = rule.limits.get(instance_type, 0)
            borrowable_max: float = inf
            if strategy_capabilities(rule.spec.strategy).borrows:
                borrowable_max = limit + sum(
                    other.limits.get(instance_type, 0)
                    for other in self.shares
                    if other.lender and other.index != share
                )
            largest = quota_max(limit, rule.spec.strategy, rule.spec.borrow_limit)
            fit = (self.capacity.get(instance_type, 0), largest, borrowable_max)
            self._fit_cache[key] = fit
        return fit

    def misconfiguration(self, share: int, instance_type: str, instances: int) -> str | None:
        """The spec's misconfiguration reason (rule 7, in its order) or None."""
        return misconfiguration(instances, *self._fit(share, instance_type))

    def borrow_ceiling(self, share: int, instance_type: str) -> int:
        """How far beyond its limit the share could ever go for T (0 if it cannot borrow)."""
        rule = self.shares[share]
        if not rule.can_borrow:
            return 0
        _, largest, borrowable_max = self._fit(share, instance_type)
        return int(min(largest, borrowable_max)) - rule.limits.get(instance_type, 0)


class Ledger:
    """Usage per (share, type) and the per-type sums derived from it, kept incrementally."""

    __slots__ = (
        "policy",
        "usage",
        "free",
        "reserved_idle",
        "lend_net",
        "reserve_over",
        "over",
        "hold",
    )

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.usage: list[dict[str, int]] = [{} for _ in policy.shares]
        # Instances of each type held for starters waiting for their victims (spec v2,
        # V8.2): taken off free(T) for every start, not for a capacity cut.
        self.hold: dict[str, int] = {}
        self._recount()

    def set_policy(self, policy: Policy) -> None:
        """Adopt a new policy with the same shares (in the same order); usage is kept."""
        self.policy = policy
        self._recount()

    def _recount(self) -> None:
        policy = self.policy
        types = set(policy.types)
        for used in self.usage:
            types.update(used)
        self.free = {t: policy.capacity.get(t, 0) for t in types}
        self.reserved_idle = dict.fromkeys(types, 0)
        self.lend_net = dict.fromkeys(types, 0)
        self.reserve_over = dict.fromkeys(types, 0)
        self.over = dict.fromkeys(types, 0)
        for rule in policy.shares:
            used = self.usage[rule.index]
            for t in types:
                limit = rule.limits.get(t, 0)
                u = used.get(t, 0)
                self.free[t] -= u
                self.over[t] += max(0, u - limit)
                if rule.reserve:
                    self.reserved_idle[t] += max(0, limit - u)
                    self.reserve_over[t] += max(0, u - limit)
                else:
                    self.lend_net[t] += limit - u

    def add(self, rule: ShareRule, instance_type: str, delta: int) -> None:
        """Change usage(S,T) by `delta` and every counter with it."""
        used = self.usage[rule.index]
        before = used.get(instance_type, 0)
        after = before + delta
        used[instance_type] = after
        limit = rule.limits.get(instance_type, 0)
        if instance_type not in self.free:
            for counters in (self.free, self.reserved_idle, self.lend_net, self.reserve_over):
                counters[instance_type] = 0
            self.over[instance_type] = 0
        self.free[instance_type] -= delta
        over_change = max(0, after - limit) - max(0, before - limit)
        self.over[instance_type] += over_change
        if rule.reserve:
            self.reserved_idle[instance_type] += max(0, limit - after) - max(0, limit - before)
            self.reserve_over[instance_type] += over_change
        else:
            self.lend_net[instance_type] -= delta

    def used(self, rule: ShareRule, instance_type: str) -> int:
        return self.usage[rule.index].get(instance_type, 0)

    def avail(self, rule: ShareRule, instance_type: str) -> int:
        """Free capacity minus the idle capacity other RESERVE shares hold (phase 1)."""
        held = self.reserved_idle.get(instance_type, 0)
        if rule.reserve:
            held -= max(0, rule.limits.get(instance_type, 0) - self.used(rule, instance_type))
        if self.hold:
            held += self.hold.get(instance_type, 0)
        return self.free.get(instance_type, 0) - held

    def pool(self, instance_type: str) -> int:
        """Lendable idle capacity not yet borrowed (rule 1; a borrower's own idle included)."""
        return self.lend_net.get(instance_type, 0) - self.reserve_over.get(instance_type, 0)

    def borrow_blocker(self, rule: ShareRule, instance_type: str, instances: int) -> str | None:
        """None when rule 1 lets a job of the share start borrowing, else why not.

        Besides rule 1 (`n <= free`, `n <= pool`, the cap), a start may not take the
        idle capacity RESERVE shares hold (v1.1: held in every phase); `avail <= free`,
        so `n <= avail` covers `n <= free`.
        """
        if not rule.can_borrow:
            return SHARE_LIMIT_REACHED
        cap = rule.caps.get(instance_type)
        if cap is not None:
            limit = rule.limits.get(instance_type, 0)
            if self.used(rule, instance_type) + instances - limit > cap:
                return BORROW_LIMIT_REACHED
        if instances > self.avail(rule, instance_type) or instances > self.pool(instance_type):
            return WAITING_FOR_CAPACITY
        return None

    def within_limit(self, rule: ShareRule, instance_type: str, instances: int) -> bool:
        return self.used(rule, instance_type) + instances <= rule.limits.get(instance_type, 0)

    def blocker(self, rule: ShareRule, instance_type: str, instances: int) -> str:
        """Why a well-configured head job of the share is not running now."""
        if self.within_limit(rule, instance_type, instances):
            return WAITING_FOR_CAPACITY
        return self.borrow_blocker(rule, instance_type, instances) or WAITING_FOR_CAPACITY

    def in_share_need(self, rule: ShareRule, instance_type: str, instances: int) -> int:
        """Instances of the share's own jobs of T to stop before a job of n could start.

        Stopping c instances of S raises free, S's avail and the pool by exactly c and
        lowers usage(S,T) by c, so each route of phase 3 needs c above a bound:
        within the limit, `usage - c + n <= limit` and `n <= avail + c`; borrowing
        (rule 1, with RESERVE idle held), `n <= avail + c`, `n <= pool + c` and
        `usage - c + n - limit <= cap`.
        """
        used = self.used(rule, instance_type)
        limit = rule.limits.get(instance_type, 0)
        avail = self.avail(rule, instance_type)
        need = max(used + instances - limit, instances - avail)
        if rule.can_borrow:
            borrow_need = max(instances - avail, instances - self.pool(instance_type))
            cap = rule.caps.get(instance_type)
            if cap is not None:
                borrow_need = max(borrow_need, used + instances - limit - cap)
            need = min(need, borrow_need)
        return need


@dataclass(frozen=True)
class ShareUsage:
    """One share's use of one instance type, split the way the quota rules see it.

    `within` = min(usage, limit); `over` is what it borrows; `idle` what it leaves unused
    of its limit; `reserved` whether that idle is held for it (RESERVE) rather than
    `lendable`; `borrow_cap` the most it may borrow on top of its limit (None: no cap;
    0 when it cannot borrow at all).
    """

    usage: int
    limit: int
    within: int
    over: int
    idle: int
    reserved: bool
    lendable: bool
    borrow_cap: int | None


def share_usage(share: ShareSpec, instance_type: str, usage: int) -> ShareUsage:
    limit = share.capacity_limits.get(instance_type, 0)
    does = strategy_capabilities(share.strategy)
    if not does.borrows or not share.enabled:
        cap: int | None = 0
    else:
        cap = borrow_cap(limit, share.borrow_limit)
    return ShareUsage(
        usage=usage,
        limit=limit,
        within=min(usage, limit),
        over=max(0, usage - limit),
        idle=max(0, limit - usage),
        reserved=does.holds_idle,
        lendable=does.lends,
        borrow_cap=cap,
    )
