"""Queue overview, the admins' policy index, the share editor and the capacity editor.

Views are thin: permissions ask core.rules, reads go through the
selectors, writes through the forms (which call the services), and the impact
preview is the engine's own sentences (governance.policy.impact).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods, require_POST

from core import rules
from fleet.models import QuotaShare
from fleet.selectors import queue_list, queue_usage, share_get
from governance import glossary
from governance.exceptions.selectors import active_exceptions
from governance.knowledge.selectors import articles_by_share
from governance.policy import contracts
from governance.policy.forms import CapacityForm, ShareForm
from governance.policy.history_views import display_value, field_label, history_url_for
from governance.policy.impact import capacity_change_impact, share_change_impact
from governance.policy.services import (
    PolicyError,
    PolicyWrite,
    VersionConflict,
    queue_capacity_validate,
    share_validate,
)
from governance.proposals.messages import after_policy_write
from governance.proposals.selectors import pending_count
from scheduler.services.estimates.record import queue_coverage

QUEUES_PER_PAGE = 10


# Reading: the overview and one queue.


def queues(request):
    rules.require(request.user, "policy.view")
    page = Paginator(queue_list().order_by("name", "pk"), QUEUES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "governance/queues/list.html",
        {
            "page_obj": page,
            "usages": [queue_usage(queue) for queue in page],
        },
    )


def queue_detail(request, pk: int):
    rules.require(request.user, "policy.view")
    queue = get_object_or_404(queue_list(), pk=pk)
    usage = queue_usage(queue)
    articles = articles_by_share(user=request.user, queue=queue)
    exceptions: dict[int, list] = {}
    for request_ in active_exceptions(queue=queue):
        exceptions.setdefault(request_.share_id, []).append(request_)
    explained = [
        (row.share, articles.get(row.share.pk, []), exceptions.get(row.share.pk, []))
        for row in usage.shares
    ]
    return render(
        request,
        "governance/queues/detail.html",
        {
            "usage": usage,
            "explained": explained,
            "estimate_coverage": queue_coverage(queue),
        },
    )


def policy_list(request):
    """The admins' index: every queue's shares, each with its editor one click away."""
    rules.require(request.user, "policy.edit")
    return render(
        request,
        "governance/policies/list.html",
        {"queues": list(queue_list()), "pending_proposals": pending_count()},
    )


# The share editor.


def _editor_context(form: ShareForm, **extra) -> dict:
    return {
        "form": form,
        "queue": form.queue,
        "share": form.share,
        "bounds": contracts.reclaim_bounds(contracts.queue_contracts(form.queue)),
        "strategy_options": [
            (radio, glossary.explain(radio.data["value"])) for radio in form["strategy"]
        ],
        **extra,
    }


def _problem(key: str, message: str) -> str:
    if key == "non_field_errors":
        return message
    name, _, detail = key.partition(".")
    return f"{field_label(name)}{f' ({detail})' if detail else ''}: {message}"


def _parse_problems(form) -> list[str]:
    """What stops the preview from reading the form (not a number, no strategy, ...)."""
    problems = [
        f"{form.fields[name].label if name in form.fields else 'Form'}: {error}"
        for name, errors in form.errors.items()
        for error in errors
    ]
    for number, row in enumerate(form.limit_rows, start=1):
        problems += [f"Limit row {number}: {e}" for errors in row.errors.values() for e in errors]
    return problems


@dataclass(frozen=True)
class ConflictRow:
    label: str
    theirs: str
    yours: str
    differs: bool


def conflict_context(conflict: VersionConflict, *, obj, fields: list[str]) -> dict:
    """Both versions side by side: theirs (saved meanwhile) and yours (not saved)."""
    keys = fields or sorted(set(conflict.current) | set(conflict.submitted))
    rows = []
    for key in keys:
        theirs = display_value(key, conflict.current.get(key))
        yours = display_value(key, conflict.submitted.get(key))
        rows.append(ConflictRow(field_label(key), theirs, yours, theirs != yours))
    last = obj.changes.select_related("actor").order_by("-id").first() if obj else None
    return {"version": conflict.current_version, "rows": rows, "last_change": last}


def rebound_with_version(post, version: int):
    """The admin's input, kept as typed, now based on the version saved meanwhile."""
    data = post.copy()
    data["version"] = str(version)
    return data


SHARE_FIELDS = [
    "name",
    "team",
    "strategy",
    "borrow_limit",
    "in_share_preemption",
    "state",
    "capacity_limits",
]


def _saved_message(request, write: PolicyWrite, *, label: str) -> None:
    change, version = write.entry, write.applied.version
    if change is None:
        messages.info(request, f"Nothing changed in {label}: it is still as it was.")
        return
    messages.success(
        request,
        format_html(
            'Saved {}: now version {}. <a href="{}">See this change in the history</a>.',
            label,
            version,
            history_url_for(change),
        ),
    )


@require_http_methods(["GET", "POST"])
def share_create(request, queue_pk: int):
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=queue_pk)
    form = ShareForm(request.POST or None, queue=queue)
    if request.method == "POST" and form.is_valid():
        try:
            saved = form.save(actor=request.user)
        except PolicyError:
            pass
        else:
            return after_policy_write(
                request, saved, applied=lambda write: _share_saved(request, write)
            )
    return render(request, "governance/shares/edit.html", _editor_context(form))


@require_http_methods(["GET", "POST"])
def share_edit(request, pk: int):
    rules.require(request.user, "policy.edit")
    try:
        share = share_get(pk=pk)
    except QuotaShare.DoesNotExist as missing:
        raise Http404("No such share") from missing
    queue = get_object_or_404(queue_list(), pk=share.queue_id)
    form = ShareForm(request.POST or None, queue=queue, share=share)
    conflict = None
    if request.method == "POST" and form.is_valid():
        try:
            saved = form.save(actor=request.user)
        except PolicyError:
            pass
        except VersionConflict as error:
            conflict = conflict_context(error, obj=share, fields=SHARE_FIELDS)
            form = ShareForm(
                rebound_with_version(request.POST, error.current_version),
                queue=queue,
                share=share_get(pk=share.pk),
            )
            form.is_valid()
        else:
            return after_policy_write(
                request, saved, applied=lambda write: _share_saved(request, write)
            )
    return render(request, "governance/shares/edit.html", _editor_context(form, conflict=conflict))


def _share_saved(request, write: PolicyWrite) -> str:
    share = write.applied
    _saved_message(request, write, label=share.name)
    return _share_url(share)


def _share_url(share: QuotaShare) -> str:
    return reverse("queue-detail", args=[share.queue_id]) + f"#share-{share.pk}"


@require_POST
def share_impact(request, queue_pk: int):
    """The impact preview fragment: what saving this form would do now, in the engine's words."""
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=queue_pk)
    share = None
    if request.GET.get("share", "").isdigit():
        share = get_object_or_404(QuotaShare.objects.filter(queue=queue), pk=request.GET["share"])
        share = share_get(pk=share.pk)
    form = ShareForm(request.POST, queue=queue, share=share)
    context = {"ready": False, "problems": [], "lines": []}
    if not form.is_valid():
        context["problems"] = _parse_problems(form)
    else:
        data = form.share_data()
        errors = share_validate(queue=queue, data=data, share=share)
        if errors:
            context["problems"] = [
                _problem(key, message) for key, messages_ in errors.items() for message in messages_
            ]
        else:
            context["ready"] = True
            context["lines"] = share_change_impact(queue=queue, data=data, share=share)
    return render(request, "governance/shares/_impact.html", context)


# The queue capacity editor.


@require_http_methods(["GET", "POST"])
def queue_capacity(request, pk: int):
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=pk)
    form = CapacityForm(request.POST or None, queue=queue)
    conflict = None
    if request.method == "POST" and form.is_valid():
        try:
            saved = form.save(actor=request.user)
        except PolicyError:
            pass
        except VersionConflict as error:
            conflict = conflict_context(error, obj=None, fields=["capacity"])
            form = CapacityForm(
                rebound_with_version(request.POST, error.current_version), queue=queue
            )
            form.is_valid()
        else:
            return after_policy_write(
                request, saved, applied=lambda write: _capacity_saved(request, write)
            )
    return render(
        request,
        "governance/queues/capacity.html",
        {"form": form, "queue": queue, "conflict": conflict},
    )


def _capacity_saved(request, write: PolicyWrite) -> str:
    queue = write.applied
    _saved_message(request, write, label=f"the capacity of {queue.name}")
    return reverse("queue-detail", kwargs={"pk": queue.pk})


@require_POST
def queue_capacity_impact(request, pk: int):
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=pk)
    form = CapacityForm(request.POST, queue=queue)
    context = {"ready": False, "problems": [], "lines": []}
    if not form.is_valid():
        context["problems"] = _parse_problems(form)
    elif form.entries():
        errors = queue_capacity_validate(queue=queue, capacity=form.entries())
        if errors:
            context["problems"] = [
                _problem(key, message) for key, messages_ in errors.items() for message in messages_
            ]
        else:
            context["ready"] = True
            context["lines"] = capacity_change_impact(queue=queue, capacity=form.entries())
    return render(request, "governance/shares/_impact.html", context)
