"""The exception list page's filters (django-filter)."""

from __future__ import annotations

import django_filters

from core.filters import ModelChoiceFilter
from fleet.models import Team, UrgencyDefinition
from governance.filters import ExceptionRequestFilter
from governance.models import ExceptionRequest


class ExceptionPageFilter(ExceptionRequestFilter):
    """ExceptionRequestFilter's parameters but the queue, chosen from lists. The selector
    gets the same ids as from the API (governance.filters.page_query)."""

    state = django_filters.ChoiceFilter(
        label="State", choices=ExceptionRequest.State.choices, empty_label="Any state"
    )
    kind = django_filters.ChoiceFilter(
        label="Kind", choices=ExceptionRequest.Kind.choices, empty_label="Any kind"
    )
    team = ModelChoiceFilter(
        label="Team", queryset=Team.objects.order_by("name"), empty_label="Any team"
    )
    urgency = ModelChoiceFilter(
        label="Urgency",
        queryset=UrgencyDefinition.objects.order_by("name"),
        empty_label="Any urgency",
    )
    queue = None  # the page lists every queue's requests

    class Meta(ExceptionRequestFilter.Meta):
        fields = ["state", "kind", "team", "urgency"]
