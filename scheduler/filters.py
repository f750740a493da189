"""Typed query-string filters (django-filter) of the jobs and job definitions APIs.

Same guarantees as governance.filters, whose helpers they use: an id is 1 to 2^63-1,
a state one of its choices; anything else is a 400 naming the parameter. The OpenAPI
schema documents them from here. Parsed only: the selectors filter
(scheduler.selectors.job_list, definition_list), as for the pages.
"""

from __future__ import annotations

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from core.filters import FilterSet, ModelChoiceFilter, choice_filter, id_filter, name_filter
from core.widgets import NarrowedSelect
from fleet.models import Job, JobDefinition, JobQueue, QuotaShare, Team
from fleet.selectors import queue_filter_conflicts

SEARCH_HELP = (
    "Jobs matching every word: a word matches a job whose name, definition name or "
    "submitter's username contains it (case-insensitive), or, as a number (123 or #123), "
    "the job of that id."
)
SEARCH_MAX = 200  # a job's name at most


QUEUE_RULE = (
    "With `queue`, a `share` of another queue or a `team` with no share in it cannot "
    "match: it is a 400 naming the parameter (the jobs page refuses it the same way)."
)


FIELDS = ("queue", "share", "team")


class JobFilterForm(forms.Form):
    """A share or team outside the chosen queue is refused, naming its field
    (fleet.selectors.queue_filter_conflicts, the one rule of the page and the API): the
    API answers 400; the page shows it next to the field and leaves it out of the filter.
    The page's values are rows, the API's ids."""

    def clean(self):
        cleaned = super().clean()
        ids = {name: getattr(cleaned.get(name), "pk", cleaned.get(name)) for name in FIELDS}
        conflicts = queue_filter_conflicts(
            queue_id=ids["queue"], share_id=ids["share"], team_id=ids["team"]
        )
        for name, message in conflicts.items():
            self.add_error(name, message)
        return cleaned


class JobFilter(FilterSet):
    search = name_filter(None, SEARCH_HELP, max_length=SEARCH_MAX)
    queue = id_filter(None, "Only jobs of this queue (id).")
    share = id_filter(None, "Only jobs of this share (id); with `queue`, one of its shares.")
    team = id_filter(None, "Only jobs of this team (id); with `queue`, one with a share in it.")
    state = choice_filter("state", Job.State.choices, "Only jobs in this state.")

    class Meta:
        model = Job
        fields = ["search", "queue", "share", "team", "state"]
        form = JobFilterForm


def _team_queues() -> dict[int, set[int]]:
    """Team id -> the ids of the queues it has a share in."""
    found: dict[int, set[int]] = {}
    for team_id, queue_id in QuotaShare.objects.values_list("team_id", "queue_id"):
        found.setdefault(team_id, set()).add(queue_id)
    return found


class JobPageFilter(JobFilter):
    """The jobs page's filters: JobFilter's parameters, chosen from lists, and its form
    (JobFilterForm, the API's rule). The share and team pickers follow the chosen queue
    (core/widgets.py). The selector gets the same ids as from the API
    (core.filters.page_query)."""

    search = django_filters.CharFilter(
        label="Search",
        max_length=SEARCH_MAX,
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": "Name, id, definition or submitter"}
        ),
    )

    queue = ModelChoiceFilter(
        queryset=JobQueue.objects.order_by("name"), label="Queue", empty_label="All queues"
    )
    share = ModelChoiceFilter(
        queryset=QuotaShare.objects.select_related("queue", "team").order_by(
            "queue__name", "position", "pk"
        ),
        label="Share",
        empty_label="All shares",
        label_from_instance=lambda share: f"{share.queue.name} / {share.name} ({share.team.name})",
        widget=NarrowedSelect(narrow_by="id_queue", attribute="queue_id"),
    )
    team = ModelChoiceFilter(
        queryset=Team.objects.order_by("name"),
        label="Team",
        empty_label="All teams",
        widget=NarrowedSelect(narrow_by="id_queue", mapping=_team_queues),
    )
    state = django_filters.ChoiceFilter(
        choices=Job.State.choices, label="State", empty_label="All states"
    )


DEFINITION_STATES = [("active", "active"), ("retired", "retired")]
STATE_HELP = "active: they take new jobs; retired: they do not."


class JobDefinitionFilter(FilterSet):
    queue = id_filter(None, "Only definitions this queue may run (id).")
    # Not a column (retired_at says it): the schema is stated here.
    state = extend_schema_field(
        {
            "type": "string",
            "enum": [value for value, _ in DEFINITION_STATES],
            "description": STATE_HELP,
        }
    )(django_filters.ChoiceFilter(choices=DEFINITION_STATES, help_text=STATE_HELP))

    class Meta:
        model = JobDefinition
        fields = ["queue", "state"]
