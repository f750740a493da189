"""Reads of the live policy that every exporter and the planner share."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Prefetch

from fleet.models import (
    CapacityLimit,
    InstanceType,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
    WorkloadClass,
)
from governance.policy.services import share_history_document, urgency_document
from governance.policy.workload_classes import workload_class_document


@dataclass(frozen=True)
class LiveQueue:
    queue: JobQueue
    capacity: dict[str, int]
    shares: list[QuotaShare]  # in entitlement order
    share_docs: list[dict]
    instance_types: list[InstanceType]  # every type its capacity or a limit names, by name

    def share_doc(self, name: str) -> dict | None:
        return next((doc for doc in self.share_docs if doc["name"] == name), None)

    def share(self, name: str) -> QuotaShare | None:
        return next((share for share in self.shares if share.name == name), None)


def live_queue(*, queue: JobQueue) -> LiveQueue:
    queue = JobQueue.objects.prefetch_related(
        Prefetch("capacities", queryset=QueueCapacity.objects.select_related("instance_type")),
        Prefetch(
            "shares",
            queryset=QuotaShare.objects.select_related("team", "default_workload_class")
            .prefetch_related(
                Prefetch("limits", queryset=CapacityLimit.objects.select_related("instance_type"))
            )
            .order_by("position", "id"),
        ),
    ).get(pk=queue.pk)
    shares = list(queue.shares.all())
    capacity = {
        cap.instance_type.name: cap.instances
        for cap in sorted(queue.capacities.all(), key=lambda cap: cap.instance_type.name)
    }
    types = {cap.instance_type.name: cap.instance_type for cap in queue.capacities.all()}
    for share in shares:
        types.update(
            {limit.instance_type.name: limit.instance_type for limit in share.limits.all()}
        )
    return LiveQueue(
        queue=queue,
        capacity=capacity,
        shares=shares,
        share_docs=[history_document(share) for share in shares],
        instance_types=[types[name] for name in sorted(types)],
    )


def history_document(share: QuotaShare) -> dict:
    """The share as a PolicyChange records it (the services' own document): its policy,
    its priority ceiling and its default workload class (by name; None: none)."""
    return share_history_document(share)


def live_urgencies() -> list[dict]:
    """Every urgency definition as the history records it, by name."""
    return [
        urgency_document(urgency)
        for urgency in UrgencyDefinition.objects.prefetch_related("invokers").order_by("name")
    ]


def live_workload_classes() -> list[dict]:
    """Every workload class as the history records it, by name."""
    return [workload_class_document(wc) for wc in WorkloadClass.objects.order_by("name")]


def teams_named(names) -> list[Team]:
    return list(Team.objects.filter(name__in=set(names)).order_by("name"))
