"""Reads of the share policy, shaped for pages and the API."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q, QuerySet, Sum

from governance.models import (
    CapacityLimit,
    JobQueue,
    PolicyChange,
    QueueCapacity,
    QuotaShare,
    UrgencyDefinition,
)
from scheduler.engine import ShareSpec, share_usage
from scheduler.models import Job


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
    idle: int
    reserved: bool
    borrow_cap: int | None  # instances it may borrow on top of its limit; None = unlimited
    scale: int  # the bar's full width in instances (the queue's capacity of the type)


@dataclass(frozen=True)
class ShareUsage:
    share: QuotaShare
    bars: list[UsageBar]


@dataclass(frozen=True)
class QueueUsage:
    queue: JobQueue
    capacity: dict[str, int]
    shares: list[ShareUsage]
    summary: str


def _running_usage(queue: JobQueue) -> dict[tuple[int, str], int]:
    rows = (
        Job.objects.filter(queue=queue, state=Job.State.RUNNING)
        .values("share_id", "instance_type__name")
        .annotate(used=Sum("instances"))
    )
    return {(row["share_id"], row["instance_type__name"]): row["used"] for row in rows}


def _count_verb(shares: int, verb: str) -> str:
    """'1 share lends', '3 shares lend'."""
    return f"1 share {verb}s" if shares == 1 else f"{shares} shares {verb}"


def queue_usage(queue: JobQueue) -> QueueUsage:
    """Each share's use of each instance type: within limit, borrowed, idle (lendable or held)."""
    capacity = {cap.instance_type.name: cap.instances for cap in queue.capacities.all()}
    used = _running_usage(queue)
    rows: list[ShareUsage] = []
    lenders: dict[str, set[int]] = {}
    lent: dict[str, int] = {}
    borrowers: dict[str, set[int]] = {}
    borrowed_total: dict[str, int] = {}
    for share in queue.shares.all():
        spec = ShareSpec(
            name=share.name,
            capacity_limits={
                lim.instance_type.name: lim.max_instances for lim in share.limits.all()
            },
            strategy=share.strategy,
            borrow_limit=-1 if share.borrow_limit is None else share.borrow_limit,
            in_share_preemption=share.in_share_preemption,
            enabled=share.enabled,
        )
        bars = []
        for type_name in sorted(
            set(spec.capacity_limits) | {t for (s, t) in used if s == share.pk}
        ):
            usage = share_usage(spec, type_name, used.get((share.pk, type_name), 0))
            bars.append(
                UsageBar(
                    instance_type=type_name,
                    limit=usage.limit,
                    within=usage.within,
                    borrowed=usage.over,
                    idle=usage.idle,
                    reserved=usage.reserved,
                    borrow_cap=usage.borrow_cap,
                    scale=max(capacity.get(type_name, 0), usage.limit, usage.usage, 1),
                )
            )
            if usage.idle and usage.lendable:
                lenders.setdefault(type_name, set()).add(share.pk)
                lent[type_name] = lent.get(type_name, 0) + usage.idle
            if usage.over:
                borrowers.setdefault(type_name, set()).add(share.pk)
                borrowed_total[type_name] = borrowed_total.get(type_name, 0) + usage.over
        rows.append(ShareUsage(share=share, bars=bars))
    parts = []
    for type_name in sorted(capacity):
        if type_name in lenders:
            parts.append(
                f"{_count_verb(len(lenders[type_name]), 'lend')} {lent[type_name]} idle {type_name}"
            )
        if type_name in borrowers:
            parts.append(
                f"{_count_verb(len(borrowers[type_name]), 'borrow')} "
                f"{borrowed_total[type_name]} {type_name}"
            )
    summary = "; ".join(parts) if parts else "No capacity is lent or borrowed right now."
    return QueueUsage(queue=queue, capacity=capacity, shares=rows, summary=summary)


def policy_history(
    *,
    queue: int | None = None,
    share: int | None = None,
    actor: int | None = None,
    cause: str | None = None,
) -> QuerySet[PolicyChange]:
    changes = PolicyChange.objects.select_related(
        "actor", "queue", "share", "urgency", "reverts"
    ).prefetch_related("whatif_comparisons")
    filters = Q()
    if queue:
        filters &= Q(queue_id=queue)
    if share:
        filters &= Q(share_id=share)
    if actor:
        filters &= Q(actor_id=actor)
    if cause:
        filters &= Q(cause=cause)
    return changes.filter(filters)


def urgency_list() -> QuerySet[UrgencyDefinition]:
    return UrgencyDefinition.objects.prefetch_related("invokers")
