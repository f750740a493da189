"""Reads of the fleet's policy (queues, shares, limits, urgency definitions) and its use,
shaped for pages and the API: the scheduler's pages and governance's both read them."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Prefetch, QuerySet, Sum

from engine import ShareUsage as EngineShareUsage
from engine import share_usage
from fleet.bridge import queue_scenario, share_scenario, share_spec
from fleet.models import (
    CapacityLimit,
    Job,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
)

# Documents: the canonical JSON shape used for validation, history and revert (the
# writes in governance.policy.services record them; the dashboards read them back).


def share_document(share: QuotaShare) -> dict:
    """The share as recorded in history: the engine's scenario format of it (from the
    one bridge, fleet.bridge) and its team."""
    scenario = share_scenario(share)
    return {"name": scenario["name"], "team": share.team.name, **scenario}


def queue_document(queue: JobQueue) -> dict:
    return queue_scenario(queue)


def queue_list() -> QuerySet[JobQueue]:
    return JobQueue.objects.prefetch_related(
        Prefetch("capacities", queryset=QueueCapacity.objects.select_related("instance_type")),
        Prefetch(
            "shares",
            queryset=QuotaShare.objects.select_related("team").prefetch_related(
                Prefetch("limits", queryset=CapacityLimit.objects.select_related("instance_type"))
            ),
        ),
    ).annotate(share_count=Count("shares", distinct=True))


def share_get(*, pk: int) -> QuotaShare:
    return (
        QuotaShare.objects.select_related("team", "queue")
        .prefetch_related(
            Prefetch("limits", queryset=CapacityLimit.objects.select_related("instance_type")),
            Prefetch(
                "queue__capacities", queryset=QueueCapacity.objects.select_related("instance_type")
            ),
        )
        .get(pk=pk)
    )


@dataclass(frozen=True)
class UsageBar:
    """One share × instance type, ready for the stacked bar."""

    instance_type: str
    limit: int
    within: int
    borrowed: int
    idle: int  # idle instances of its limit that are free in the queue now (never more)
    reserved: bool
    borrow_cap: int | None  # instances it may borrow on top of its limit; None = unlimited
    scale: int  # the bar's full width in instances (the queue's capacity of the type)
    # The part of its idle limit the queue cannot give now: other shares use it, or the
    # share limits add up to more than the queue holds.
    unavailable: int = 0
    # A lender's idle limit split the way the engine's ledger sees it (`_lending`): what
    # borrowers hold of it now, and what a borrower could still take now.
    lent: int = 0
    lendable: int = 0

    @property
    def not_lendable(self) -> int:
        """The part of a lender's idle limit that is neither lent out nor lendable now
        (the queue cannot give it: other shares use it, a reserving share holds it, or the
        limits add up to more than the queue holds). What the queue page says beside
        `lent` and `lendable`, the engine's figures."""
        return max(0, self.idle + self.unavailable - self.lent - self.lendable)


@dataclass(frozen=True)
class ShareUsage:
    share: QuotaShare
    bars: list[UsageBar]


@dataclass(frozen=True)
class Oversubscription:
    """An instance type whose share limits add up to more than the queue holds."""

    instance_type: str
    limits: int
    capacity: int
    free: int = 0  # instances of the type no job uses now

    @property
    def excess(self) -> int:
        return self.limits - self.capacity

    def __str__(self) -> str:
        return (
            f"{self.instance_type} is over-subscribed: the share limits add up to "
            f"{self.limits}, {self.excess} more than the queue's {self.capacity}, so not "
            "every share can reach its limit at once"
        )


@dataclass(frozen=True)
class NodeCapacity:
    """What a Slurm queue's partition can hold now, as its last reconciliation saw it:
    `unusable`, one line per instance type that nodes taken out cost ("2 of 8
    ml.g5.xlarge unusable: node2 drained (test)"), and `disagreements`, one per type
    whose configured capacity is not what the partition's nodes hold."""

    partition: str
    seen_at: str
    unusable: list[str]
    disagreements: list[str]
    # Held by Slurm jobs the product did not start: one line per type they cost, one per
    # job (at most the executor's bound, then how many more); the partition not up.
    held_outside: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    outside_more: int = 0
    partition_state: str = ""
    # The queue's jobs started by the product that its cluster has not run yet.
    starting: int = 0


def nodes_out(queue: JobQueue, type_name: str) -> str:
    """'1 of 2 ml.g5.xlarge unusable: node2 drained (test)', or "" when no node that
    holds the type is out (or the queue is not on Slurm)."""
    figures = ((queue.capacity_seen or {}).get("types") or {}).get(type_name) or {}
    total, usable = figures.get("total"), figures.get("usable")
    if total is None or usable is None or usable >= total:
        return ""
    per_node = figures.get("per_node", {})
    out = [
        node["described"]
        for node in queue.capacity_seen.get("nodes", [])
        if not node["usable"] and per_node.get(node["name"], 0)
    ]
    return f"{total - usable} of {total} {type_name} unusable: {', '.join(out)}"


def node_capacity(queue: JobQueue, capacity: dict[str, int]) -> NodeCapacity | None:
    seen = queue.capacity_seen
    if not seen:
        return None
    partition = seen.get("partition", "")
    unusable, disagreements = [], []
    for type_name, figures in sorted((seen.get("types") or {}).items()):
        total, usable = figures.get("total"), figures.get("usable")
        if total is None or usable is None:
            disagreements.append(
                f"{type_name}: its Slurm resources cannot be matched to the partition's "
                f"nodes ({figures.get('problem', 'unreadable')})"
            )
            continue
        if total > usable:
            unusable.append(nodes_out(queue, type_name))
        configured = capacity.get(type_name, 0)
        if configured > total:
            disagreements.append(
                f"{type_name}: the queue's capacity is {configured}, but partition "
                f"{partition}'s nodes hold {total}; it never runs more than {total}"
            )
        elif configured < total:
            disagreements.append(
                f"{type_name}: the queue's capacity is {configured}, but partition "
                f"{partition}'s nodes hold {total}; {total - configured} of them are "
                "not the queue's to use"
            )
    return NodeCapacity(
        partition=partition,
        seen_at=seen.get("seen_at", ""),
        unusable=unusable,
        disagreements=disagreements,
        held_outside=[
            f"{figures['held_outside']} of {figures.get('total')} {type_name}"
            for type_name, figures in sorted((seen.get("types") or {}).items())
            if figures.get("held_outside")
        ],
        outside=[_outside_line(job) for job in seen.get("outside", [])],
        outside_more=seen.get("outside_more", 0),
        partition_state=seen.get("partition_state", ""),
        starting=Job.objects.filter(queue=queue, state=Job.State.RUNNING)
        .exclude(placement__state="RUNNING")
        .count(),
    )


def capacity_seen_document(queue: JobQueue) -> dict | None:
    """What the queue's executor last saw it can use, for the API: per type `total`,
    `usable` and `held_outside` (instances held by jobs the product did not start), the
    nodes out of service, the partition's state when not up, and those jobs (`outside`:
    Slurm job id, user, GPUs, nodes, since; `outside_more`: how many more); None when
    the executor reports nothing."""
    seen = queue.capacity_seen
    if not seen:
        return None
    return {
        "partition": seen.get("partition", ""),
        "partition_state": seen.get("partition_state", "up"),
        "seen_at": seen.get("seen_at", ""),
        "types": {
            name: {
                "total": figures.get("total"),
                "usable": figures.get("usable"),
                "held_outside": figures.get("held_outside", 0),
            }
            for name, figures in sorted((seen.get("types") or {}).items())
        },
        "nodes_out": [node["described"] for node in seen.get("nodes", []) if not node["usable"]],
        "outside": seen.get("outside", []),
        "outside_more": seen.get("outside_more", 0),
    }


def _outside_line(job: dict) -> str:
    """'Slurm job 12 of alice: 3 GPUs on node1, since 2026-12-07 23:27:16 UTC'."""
    since = job.get("since", "")[:19].replace("T", " ")
    where = f" on {', '.join(job.get('nodes', []))}" if job.get("nodes") else ""
    return (
        f"Slurm job {job.get('job_id')} of {job.get('user') or 'unknown'}: "
        f"{job.get('gpus', 0)} GPUs{where}" + (f", since {since} UTC" if since else "")
    )


@dataclass(frozen=True)
class QueueUsage:
    queue: JobQueue
    capacity: dict[str, int]
    shares: list[ShareUsage]
    summary: str
    free: dict[str, int] = field(default_factory=dict)  # instances no job uses, per type
    oversubscribed: list[Oversubscription] = field(default_factory=list)
    nodes: NodeCapacity | None = None  # a Slurm queue's partition, as last seen


def running_usage(queues: list[JobQueue]) -> dict[int, dict[tuple[int, str], int]]:
    """Instances held per queue, then per (share, instance type), in one query."""
    rows = (
        # A STOPPING job holds its capacity until it stops (spec v2, V7).
        Job.objects.filter(queue__in=queues, state__in=Job.HOLDING_STATES)
        .values("queue_id", "share_id", "instance_type__name")
        .annotate(used=Sum("instances"))
    )
    used: dict[int, dict[tuple[int, str], int]] = {queue.pk: {} for queue in queues}
    for row in rows:
        used[row["queue_id"]][(row["share_id"], row["instance_type__name"])] = row["used"]
    return used


def _apportion(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainder; ties to the earlier)."""
    whole = sum(weights)
    if not total or not whole:
        return [0] * len(weights)
    parts = [total * weight // whole for weight in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _lending(usages: list[EngineShareUsage], free: int) -> list[tuple[int, int]]:
    """(lent, lendable) of each share's use of one instance type.

    The engine's ledger pools the lenders' idle limits: what is borrowed comes out of that
    pool (`Ledger.pool` = the lenders' idle less everything borrowed), and a borrower may
    take at most the pool and the free instances that shares which never lend do not hold
    (`Ledger.avail`). So the lenders lend, together, all that is borrowed (never more
    than their idle), and could lend the rest of the pool as far as it is free. The pool
    does not say whose instance a borrower holds: both totals are shared out among the
    lenders in proportion to their idle limits.
    """
    lenders = [i for i, usage in enumerate(usages) if usage.lendable and usage.idle]
    idle = [usages[i].idle for i in lenders]
    borrowed = sum(usage.over for usage in usages)
    held = sum(usage.idle for usage in usages if usage.reserved)
    lent_total = min(borrowed, sum(idle))
    lendable_total = max(0, min(free - held, sum(idle) - borrowed))
    out = [(0, 0)] * len(usages)
    for i, lent, lendable in zip(
        lenders, _apportion(lent_total, idle), _apportion(lendable_total, idle), strict=True
    ):
        out[i] = (lent, lendable)
    return out


def _count_shares(shares: int) -> str:
    return "1 share" if shares == 1 else f"{shares} shares"


def _count_verb(shares: int, verb: str) -> str:
    """'1 share lends', '3 shares lend'."""
    return f"{_count_shares(shares)} {verb}{'s' if shares == 1 else ''}"


def _engine_usages(
    shares: list[QuotaShare], specs: dict, used: dict[tuple[int, str], int]
) -> dict[int, dict[str, EngineShareUsage]]:
    """Each share's use of each type it has a limit of or uses, by the engine's rules."""
    types_used: dict[int, set[str]] = {}
    for share_pk, type_name in used:
        types_used.setdefault(share_pk, set()).add(type_name)
    return {
        share.pk: {
            type_name: share_usage(specs[share.pk], type_name, used.get((share.pk, type_name), 0))
            for type_name in sorted(
                set(specs[share.pk].capacity_limits) | types_used.get(share.pk, set())
            )
        }
        for share in shares
    }


def _lending_by_share(
    usages: dict[int, dict[str, EngineShareUsage]], free: dict[str, int]
) -> dict[tuple[int, str], tuple[int, int]]:
    """`_lending` of every (share, type) of the queue."""
    by_type: dict[str, list[int]] = {}
    for share_pk, types in usages.items():
        for type_name in types:
            by_type.setdefault(type_name, []).append(share_pk)
    out: dict[tuple[int, str], tuple[int, int]] = {}
    for type_name, share_pks in by_type.items():
        figures = _lending([usages[pk][type_name] for pk in share_pks], free.get(type_name, 0))
        out.update(zip(((pk, type_name) for pk in share_pks), figures, strict=True))
    return out


def queue_usage(queue: JobQueue, *, used: dict[tuple[int, str], int] | None = None) -> QueueUsage:
    """Each share's use of each instance type: within limit, borrowed, idle (lendable or held).

    Idle is what the queue could really give: a share's unused limit counts as idle only
    as far as instances of the type are free (not used by any job). Limits may add up to
    more than the queue holds (an approved extra-capacity exception does that); such a
    type is listed in `oversubscribed`, with the figures. `used` is the queue's entry of
    `running_usage` when the caller read several queues at once.
    """
    capacity = {cap.instance_type.name: cap.instances for cap in queue.capacities.all()}
    if used is None:
        used = running_usage([queue])[queue.pk]
    in_use: dict[str, int] = {}
    for (_share, type_name), count in used.items():
        in_use[type_name] = in_use.get(type_name, 0) + count
    free = {name: max(0, instances - in_use.get(name, 0)) for name, instances in capacity.items()}
    shares = list(queue.shares.all())
    specs = {share.pk: share_spec(share) for share in shares}
    limits: dict[str, int] = {}
    for share in shares:
        if share.enabled:
            for type_name, limit in specs[share.pk].capacity_limits.items():
                limits[type_name] = limits.get(type_name, 0) + limit
    rows: list[ShareUsage] = []
    lenders: dict[str, set[int]] = {}
    lendable: dict[str, int] = {}
    lent_by: dict[str, set[int]] = {}
    lent: dict[str, int] = {}
    borrowers: dict[str, set[int]] = {}
    borrowed_total: dict[str, int] = {}
    engine_usages = _engine_usages(shares, specs, used)
    lending = _lending_by_share(engine_usages, free)
    for share in shares:
        bars = []
        for type_name, usage in engine_usages[share.pk].items():
            idle = min(usage.idle, free.get(type_name, 0))
            bars.append(
                UsageBar(
                    instance_type=type_name,
                    limit=usage.limit,
                    within=usage.within,
                    borrowed=usage.over,
                    idle=idle,
                    reserved=usage.reserved,
                    borrow_cap=usage.borrow_cap,
                    scale=max(capacity.get(type_name, 0), usage.usage, 1),
                    unavailable=usage.idle - idle,
                    lent=lending[share.pk, type_name][0],
                    lendable=lending[share.pk, type_name][1],
                )
            )
            # The summary's lending figures are the engine's (`_lending`), as the bars'.
            share_lent, share_lendable = lending[share.pk, type_name]
            if share_lendable:
                lenders.setdefault(type_name, set()).add(share.pk)
                lendable[type_name] = lendable.get(type_name, 0) + share_lendable
            if share_lent:
                lent_by.setdefault(type_name, set()).add(share.pk)
                lent[type_name] = lent.get(type_name, 0) + share_lent
            if usage.over:
                borrowers.setdefault(type_name, set()).add(share.pk)
                borrowed_total[type_name] = borrowed_total.get(type_name, 0) + usage.over
        rows.append(ShareUsage(share=share, bars=bars))
    oversubscribed = [
        Oversubscription(
            type_name, limits[type_name], capacity.get(type_name, 0), free.get(type_name, 0)
        )
        for type_name in sorted(limits)
        if limits[type_name] > capacity.get(type_name, 0)
    ]
    parts = []
    for type_name in sorted(capacity):
        if type_name in lenders:
            # What a borrower could still take now: free, not held by a reserving share,
            # and not yet borrowed (the engine's pool); two shares idle on the same
            # free instance lend it once.
            parts.append(
                f"{_count_verb(len(lenders[type_name]), 'lend')} "
                f"{lendable[type_name]} idle {type_name}"
            )
        if type_name in borrowers:
            parts.append(
                f"{_count_verb(len(borrowers[type_name]), 'borrow')} "
                f"{borrowed_total[type_name]} {type_name}"
                + (
                    f", {lent[type_name]} of them lent out by "
                    f"{_count_shares(len(lent_by[type_name]))}"
                    if type_name in lent_by
                    else ""
                )
            )
        if capacity[type_name] and not free[type_name] and type_name in limits:
            parts.append(f"no {type_name} free")
    summary = "; ".join(parts) if parts else "No capacity is lent or borrowed right now."
    return QueueUsage(
        queue=queue,
        capacity=capacity,
        shares=rows,
        summary=summary,
        free=free,
        oversubscribed=oversubscribed,
        nodes=node_capacity(queue, capacity),
    )


def urgency_list() -> QuerySet[UrgencyDefinition]:
    return UrgencyDefinition.objects.prefetch_related("invokers")


# Filters that cannot match: a team or a share outside the chosen queue.


def queue_filter_conflicts(
    *, queue_id: int | None, share_id: int | None = None, team_id: int | None = None
) -> dict[str, str]:
    """Field -> why, for a share or team filter that cannot match within the chosen queue
    (a share of another queue, a team with no share in it); empty when they fit. The one
    rule of the jobs page and the jobs API (scheduler.filters). Ids that name nothing are
    left to the filters (they match nothing); so is a filter without a queue."""
    if queue_id is None or (share_id is None and team_id is None):
        return {}
    queue = JobQueue.objects.filter(pk=queue_id).values_list("name", flat=True).first()
    if queue is None:
        return {}
    conflicts: dict[str, str] = {}
    if share_id is not None:
        share = QuotaShare.objects.filter(pk=share_id).values_list("name", "queue_id").first()
        if share is not None and share[1] != queue_id:
            conflicts["share"] = f"share {share[0]} is not in queue {queue}"
    if team_id is not None:
        team = Team.objects.filter(pk=team_id).values_list("name", flat=True).first()
        if (
            team is not None
            and not QuotaShare.objects.filter(queue_id=queue_id, team_id=team_id).exists()
        ):
            conflicts["team"] = f"team {team} has no share in queue {queue}"
    return conflicts
