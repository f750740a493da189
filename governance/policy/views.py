"""Queue overview, the admins' policy index, the share editor and the capacity editor.

Views are thin: permissions ask core.rules, reads go through the
selectors, writes through the forms (which call the services), and the impact
preview is the engine's own sentences (governance.policy.impact).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
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
from governance.models import PolicyChange
from governance.policy import conflicts, contracts
from governance.policy.forms import CapacityForm, ShareForm
from governance.policy.history_views import field_label, history_url_for
from governance.policy.impact import (
    capacity_change_impact,
    share_change_impact,
    share_field_impact,
)
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
    """One field that differs, with the admin's choice for the merge."""

    name: str
    label: str
    theirs: str
    yours: str
    choice: str = conflicts.MINE
    differs: bool = True


def conflict_context(
    *, form_for: conflicts.FormFor, submitted_form, changes, post, errors=None
) -> dict:
    """The conflict screen: every field of the editor's form that differs between the
    version saved meanwhile (theirs) and the admin's input (yours, not saved), who saved
    theirs and when, the choices of the merge, and the input it carries."""
    stored = form_for(None)
    version = int(stored["version"].value())
    diffs = conflicts.field_diff(form_for, submitted_form)
    chosen = conflicts.choices(post, [diff.name for diff in diffs])
    carried = conflicts.submission(post)
    return {
        "version": version,
        "rows": [
            ConflictRow(diff.name, diff.label, diff.theirs, diff.mine, chosen[diff.name])
            for diff in diffs
        ],
        "last_change": changes.select_related("actor").order_by("-id").first(),
        "carried": [
            (key, value)
            for key in carried
            if key not in conflicts.CONTROL_FIELDS
            for value in carried.getlist(key)
        ],
        "reason": carried.get("reason", ""),
        "errors": errors or [],
    }


def rebound_with_version(post, version: int):
    """The admin's input, kept as typed, now based on the version saved meanwhile."""
    data = post.copy()
    data["version"] = str(version)
    return data


def edit_with_conflicts(
    request,
    *,
    form_for: conflicts.FormFor,
    changes,
    applied: Callable[[PolicyWrite], str],
    render_page: Callable[..., HttpResponse],
    preview: Callable[[object], dict] | None = None,
) -> HttpResponse:
    """An editor's page: open the form on the object (`form_for(None)`), save a POST
    through it, and on a version conflict show both versions field by field with the
    merge (governance.policy.conflicts). `changes` is the object's history (who saved
    the other version, and when); `applied` says where an applied write goes;
    `render_page(form, conflict=..., impact=...)` renders the page; `preview(form)` is
    the impact preview's context, shown again after a failed save."""
    if request.method != "POST":
        return render_page(form_for(None), conflict=None, impact=None)
    post = request.POST
    data = post
    merging = conflicts.MERGE_SAVE in post or conflicts.MERGE_ALL in post
    if merging:
        data = conflicts.submission(post)
    if conflicts.MERGE_ALL in post:
        # "Take all theirs" / "keep all mine" only set the choices: nothing is saved
        # before the admin confirms the merge.
        form = form_for(data)
        if form.is_valid():
            conflict = conflict_context(
                form_for=form_for, submitted_form=form, changes=changes, post=post
            )
            return render_page(form, conflict=conflict, impact=None)
    elif merging:
        stored = form_for(None)
        take = [
            name
            for name, choice in conflicts.choices(post, conflicts.part_names(stored)).items()
            if choice == conflicts.THEIRS
        ]
        data = conflicts.merged_data(
            data, stored, take_theirs=take, version=_posted_version(data, stored)
        )
    form = form_for(data)
    conflict = None
    if form.is_valid():
        try:
            saved = form.save(actor=request.user)
        except PolicyError:
            if merging:
                conflict = conflict_context(
                    form_for=form_for,
                    submitted_form=form,
                    changes=changes,
                    post=post,
                    errors=[_problem(key, e) for key, es in form.errors.items() for e in es],
                )
        except VersionConflict as error:
            conflict = conflict_context(
                form_for=form_for, submitted_form=form, changes=changes, post=post
            )
            form = form_for(rebound_with_version(data, error.current_version))
            form.is_valid()
        else:
            return after_policy_write(request, saved, applied=applied)
    # The preview of the submitted values, on a fresh form: the save's own errors (a
    # missing reason) are not the change's.
    impact = preview(form_for(data)) if preview is not None and conflict is None else None
    return render_page(form, conflict=conflict, impact=impact)


def _posted_version(data, stored) -> int:
    posted = data.get("version", "")
    return int(posted) if posted.isdigit() else int(stored["version"].value())


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
    impact = None
    if request.method == "POST":
        impact = _share_preview(ShareForm(request.POST, queue=queue))
    return render(request, "governance/shares/edit.html", _editor_context(form, impact=impact))


@require_http_methods(["GET", "POST"])
def share_edit(request, pk: int):
    rules.require(request.user, "policy.edit")
    try:
        share = share_get(pk=pk)
    except QuotaShare.DoesNotExist as missing:
        raise Http404("No such share") from missing
    queue = get_object_or_404(queue_list(), pk=share.queue_id)

    def render_page(form, **extra):
        return render(request, "governance/shares/edit.html", _editor_context(form, **extra))

    return edit_with_conflicts(
        request,
        form_for=lambda data: ShareForm(data, queue=queue, share=share_get(pk=share.pk)),
        changes=PolicyChange.objects.filter(share=share),
        applied=lambda write: _share_saved(request, write),
        render_page=render_page,
        preview=_share_preview,
    )


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
    return render(request, "governance/shares/_impact.html", _share_preview(form))


def _share_preview(form: ShareForm) -> dict:
    """The preview's context for the share form's input (valid or not)."""
    context = {"ready": False, "problems": [], "lines": []}
    if not form.is_valid():
        context["problems"] = _parse_problems(form)
        return context
    data = form.share_data()
    errors = share_validate(queue=form.queue, data=data, share=form.share)
    if errors:
        context["problems"] = _problems(errors)
    else:
        context["ready"] = True
        if form.share is None:
            context["lines"] = share_change_impact(queue=form.queue, data=data)
        else:
            # One line per changed field, each with its own effect.
            context["fields"] = share_field_impact(queue=form.queue, data=data, share=form.share)
            context["unchanged"] = not context["fields"]
    return context


def _problems(errors: dict[str, list[str]]) -> list[str]:
    return [_problem(key, message) for key, messages_ in errors.items() for message in messages_]


# The queue capacity editor.


@require_http_methods(["GET", "POST"])
def queue_capacity(request, pk: int):
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=pk)
    return queue_editor(
        request,
        queue,
        form_class=CapacityForm,
        target=PolicyChange.Target.QUEUE,
        template="governance/queues/capacity.html",
        label="the capacity of",
        preview=_capacity_preview,
    )


def queue_editor(
    request, queue, *, form_class, target: str, template: str, label: str, preview
) -> HttpResponse:
    """A queue's editor page (its capacity, its executor binding): one form on the queue,
    saved with the version check, the conflict screen and the preview after a failed save."""

    def saved(write: PolicyWrite) -> str:
        _saved_message(request, write, label=f"{label} {write.applied.name}")
        return reverse("queue-detail", kwargs={"pk": write.applied.pk})

    def render_page(form, **extra):
        return render(request, template, {"form": form, "queue": queue, **extra})

    return edit_with_conflicts(
        request,
        form_for=lambda data: form_class(data, queue=queue_list().get(pk=queue.pk)),
        changes=PolicyChange.objects.filter(queue=queue, target=target),
        applied=saved,
        render_page=render_page,
        preview=preview,
    )


@require_POST
def queue_capacity_impact(request, pk: int):
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=pk)
    form = CapacityForm(request.POST, queue=queue)
    return render(request, "governance/shares/_impact.html", _capacity_preview(form))


def _capacity_preview(form: CapacityForm) -> dict:
    context = {"ready": False, "problems": [], "lines": []}
    if not form.is_valid():
        context["problems"] = _parse_problems(form)
    elif form.entries():
        errors = queue_capacity_validate(queue=form.queue, capacity=form.entries())
        if errors:
            context["problems"] = _problems(errors)
        else:
            context["ready"] = True
            context["lines"] = capacity_change_impact(queue=form.queue, capacity=form.entries())
    return context
