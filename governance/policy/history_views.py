"""Policy history: the timeline of changes, its filters, and revert."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.html import format_html
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods

from core import rules
from core.filters import page_query
from fleet.bridge import BORROW_UNLIMITED
from governance.models import PolicyChange
from governance.policy.filters import HistoryFilter
from governance.policy.forms import RevertForm
from governance.policy.selectors import policy_history
from governance.policy.services import PolicyError, changed_fields
from governance.proposals.messages import after_policy_write
from scheduler.services.executor_bindings import binding_field_labels

PAGE_SIZE = 20

FIELD_LABELS = {
    "name": "Name",
    "team": "Team",
    "strategy": "Strategy",
    "borrow_limit": "Borrow limit",
    "in_share_preemption": "In-share preemption",
    "state": "State",
    "capacity_limits": "Capacity limits",
    "capacity": "Capacity",
    "meaning": "Meaning",
    "examples": "Examples",
    "priority": "Priority",
    "max_window_hours": "Longest window (hours)",
    "allowed_kinds": "Allowed kinds",
    "invokers": "Invoking teams",
    "description": "Description",
    "leads": "Leads",
    "members": "Members",
    "roles": "Roles",
    "exception_owner_of": "Decides exceptions for",
    "priority_ceiling": "Priority ceiling",
    "default_workload_class": "Default workload class",
    "price_per_hour": "Price per instance-hour",
    "instance_type": "Instance type",
    "currency": "Currency",
    "min_runtime_reclaim": "Protected from reclaim (s)",
    "min_runtime_preempt": "Protected from in-share preemption (s)",
    "grace": "Notice before stopping (s)",
    "checkpoint_on_notice": "Checkpoints on notice within (s)",
}


def fragment_or_page(request, page_template: str, fragment_template: str, context: dict):
    """One URL serves a page or, to an htmx request, just the fragment it swaps."""
    partial = request.htmx and not request.htmx.boosted
    response = render(request, fragment_template if partial else page_template, context)
    patch_vary_headers(response, ("HX-Request",))
    return response


def field_label(key: str) -> str:
    label = FIELD_LABELS.get(key) or binding_field_labels().get(key)
    return label or key.replace("_", " ").capitalize()


def display_value(key: str, value) -> str:
    """A recorded policy value as people read it."""
    if value is None and key == "default_workload_class":
        return "none (no contract)"
    if value is None and key == "checkpoint_on_notice":
        return "does not checkpoint on notice"
    if value is None:
        return "—"
    if key in binding_field_labels():
        # An executor's setting: words of one option list, "" or [] for none.
        return (" ".join(value) if isinstance(value, list) else str(value)) or "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if key == "borrow_limit":
        return "unlimited" if value == BORROW_UNLIMITED else f"{value}%"
    if isinstance(value, dict):
        return ", ".join(f"{name} × {count}" for name, count in value.items()) or "none"
    if isinstance(value, list):
        empty = "none (every team)" if key == "invokers" else "none"
        return ", ".join(str(item) for item in value) or empty
    return str(value)


@dataclass(frozen=True)
class DiffRow:
    field: str
    label: str
    old: str
    new: str


@dataclass(frozen=True)
class HistoryEntry:
    change: PolicyChange
    diff: list[DiffRow]

    @property
    def reverts_url(self) -> str:
        return history_url_for(self.change.reverts) if self.change.reverts else ""


def diff_rows(before, after) -> list[DiffRow]:
    return [
        DiffRow(key, field_label(key), display_value(key, old), display_value(key, new))
        for key, old, new in changed_fields(before, after)
    ]


def history(request):
    rules.require(request.user, "history.view")
    filters = HistoryFilter(request.GET or None, request=request)
    values = page_query(filters)
    page = Paginator(policy_history(**values), PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "filter_form": filters.form,
        "filtered": bool(values),
        "page_obj": page,
        "entries": [
            HistoryEntry(change, diff_rows(change.before, change.after)) for change in page
        ],
    }
    return fragment_or_page(
        request, "governance/history/list.html", "governance/history/_list.html", context
    )


@require_http_methods(["GET", "POST"])
def history_revert(request, pk: int):
    rules.require(request.user, "policy.edit")
    change = get_object_or_404(policy_history(), pk=pk)
    form = RevertForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            write = form.save(actor=request.user, change=change)
        except PolicyError:
            pass
        else:
            return after_policy_write(
                request, write, applied=lambda write: _reverted(request, change, write.entry)
            )
    entry = HistoryEntry(change, diff_rows(change.before, change.after))
    return render(request, "governance/history/revert.html", {"entry": entry, "form": form})


def _reverted(request, change: PolicyChange, revert: PolicyChange) -> str:
    url = reverse("history") + "?" + urlencode(_scope(revert)) + f"#change-{revert.pk}"
    messages.success(
        request,
        format_html(
            'Reverted change #{} of {}: <a href="{}">new change #{}</a>.',
            change.pk,
            change.object_repr,
            url,
            revert.pk,
        ),
    )
    return url


def _scope(change: PolicyChange) -> dict:
    """Filters that show `change` among its neighbours: its share, else its queue."""
    if change.share_id:
        return {"share": change.share_id}
    if change.queue_id:
        return {"queue": change.queue_id}
    if change.team_id:
        return {"team": change.team_id}
    return {}


def history_url_for(change: PolicyChange) -> str:
    query = urlencode(_scope(change))
    return reverse("history") + (f"?{query}" if query else "") + f"#change-{change.pk}"
