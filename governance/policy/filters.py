"""The policy history page's filters (django-filter)."""

from __future__ import annotations

import django_filters
from django.contrib.auth import get_user_model

from core.filters import FilterSet, ModelChoiceFilter
from fleet.models import JobQueue, QuotaShare, Team
from governance.models import PolicyChange


def _actors(request):
    """The people who made a change."""
    return (
        get_user_model()
        .objects.filter(pk__in=PolicyChange.objects.exclude(actor=None).values("actor"))
        .order_by("username")
    )


class HistoryFilter(FilterSet):
    """Parsed only: governance.policy.selectors.policy_history filters, with the ids
    (governance.filters.page_query). The actor is a user's id, chosen by name."""

    queue = ModelChoiceFilter(
        label="Queue", queryset=JobQueue.objects.only("pk", "name"), empty_label="Any queue"
    )
    share = ModelChoiceFilter(
        label="Share",
        queryset=QuotaShare.objects.select_related("queue").order_by("queue__name", "name"),
        empty_label="Any share",
        label_from_instance=lambda share: f"{share.queue.name} / {share.name}",
    )
    actor = ModelChoiceFilter(
        label="Changed by",
        queryset=_actors,
        empty_label="Anyone",
        label_from_instance=lambda user: user.get_full_name() or user.get_username(),
    )
    cause = django_filters.ChoiceFilter(
        label="Cause", choices=PolicyChange.Cause.choices, empty_label="Any cause"
    )
    team = ModelChoiceFilter(
        label="Team", queryset=Team.objects.only("pk", "name"), empty_label="Any team"
    )

    class Meta:
        model = PolicyChange
        fields = ["queue", "share", "actor", "cause", "team"]
