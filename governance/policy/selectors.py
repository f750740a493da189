"""Reads of the policy's history, shaped for pages and the API. The policy itself (queues,
shares, their use) is read by fleet.selectors."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from governance.models import PolicyChange


def policy_history(
    *,
    queue: int | None = None,
    share: int | None = None,
    actor: int | None = None,
    cause: str | None = None,
    team: int | None = None,
) -> QuerySet[PolicyChange]:
    changes = PolicyChange.objects.select_related(
        "actor",
        "queue",
        "share",
        "urgency",
        "reverts",
        "team",
        "subject",
        "workload_class",
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
    if team:
        filters &= Q(team_id=team)
    return changes.filter(filters)
