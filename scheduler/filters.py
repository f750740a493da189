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

SEARCH_HELP = (
    "Jobs matching every word: a word matches a job whose name, definition name or "
    "submitter's username contains it (case-insensitive), or, as a number (123 or #123), "
    "the job of that id."
)
SEARCH_MAX = 200  # a job's name at most


class JobFilter(FilterSet):
    search = name_filter(None, SEARCH_HELP, max_length=SEARCH_MAX)
    queue = id_filter(None, "Only jobs of this queue (id).")
    share = id_filter(None, "Only jobs of this share (id).")
    team = id_filter(None, "Only jobs of this team (id).")
    state = choice_filter("state", Job.State.choices, "Only jobs in this state.")

    class Meta:
        model = Job
        fields = ["search", "queue", "share", "team", "state"]


def _team_queues() -> dict[int, set[int]]:
    """Team id -> the ids of the queues it has a share in."""
    found: dict[int, set[int]] = {}
    for team_id, queue_id in QuotaShare.objects.values_list("team_id", "queue_id"):
        found.setdefault(team_id, set()).add(queue_id)
    return found


class JobPageForm(forms.Form):
    """The share and team pickers follow the chosen queue (core/widgets.py); a share or
    team outside it is refused, naming its field, and left out of the filter."""

    def clean(self):
        cleaned = super().clean()
        queue, share, team = (cleaned.get(name) for name in ("queue", "share", "team"))
        if queue is None:
            return cleaned
        if share is not None and share.queue_id != queue.pk:
            self.add_error("share", f"share {share.name} is not in queue {queue.name}")
        if team is not None and not QuotaShare.objects.filter(queue=queue, team=team).exists():
            self.add_error("team", f"team {team.name} has no share in queue {queue.name}")
        return cleaned


class JobPageFilter(JobFilter):
    """The jobs page's filters: JobFilter's parameters, chosen from lists. The selector
    gets the same ids as from the API (governance.filters.page_query)."""

    class Meta(JobFilter.Meta):
        form = JobPageForm

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
