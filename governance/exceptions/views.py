"""Exception pages: the list, filing a request, one request (with deciding), the
decision queue and the counts. Thin: permission questions go to core.rules,
reads to the selectors, writes to the services."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core import rules
from core.errors import DomainError, InvalidInput, Refused, WrongState
from core.filters import page_query, query_id
from core.form_errors import apply_errors
from fleet.models import UrgencyDefinition
from governance.exceptions import selectors, services
from governance.exceptions.filters import ExceptionPageFilter
from governance.exceptions.forms import (
    DecisionForm,
    ExceptionOwnerForm,
    ExceptionRequestForm,
    RevokeForm,
)
from governance.knowledge.selectors import articles_for_request
from governance.models import ExceptionOwner, ExceptionRequest
from governance.policy.history_views import diff_rows

PER_PAGE = 20


def _visible_request(request, pk: int) -> ExceptionRequest:
    try:
        obj = selectors.exception_request_get(pk=pk)
    except ExceptionRequest.DoesNotExist:
        raise Http404("No such exception request") from None
    rules.require(request.user, "exception.view", obj)
    return obj


def exception_list(request):
    rules.require(request.user, "exception.list")
    filters = ExceptionPageFilter(request.GET or None)
    values = page_query(filters)
    requests = selectors.exception_request_list(
        user=request.user,
        state=values.get("state"),
        kind=values.get("kind"),
        team_id=values.get("team"),
        urgency_id=values.get("urgency"),
    )
    page = Paginator(requests, PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page_obj": page,
        "requests": list(page),
        "filter_form": filters.form,
        "filtered": bool(values),
    }
    if request.htmx:
        return render(request, "governance/exceptions/_list.html", context)
    return render(request, "governance/exceptions/list.html", context)


def _initial_window() -> dict:
    start = timezone.localtime().replace(second=0, microsecond=0) + timedelta(minutes=5)
    return {"window_start": start, "window_end": start + timedelta(hours=24)}


def exception_create(request):
    rules.require(request.user, "exception.file")
    if request.method == "POST":
        form = ExceptionRequestForm(request.POST, user=request.user)
        if form.is_valid():
            try:
                obj = services.exception_request_create(
                    actor=request.user,
                    data=form.request_data(),
                    submit="submit" in request.POST,
                )
            except InvalidInput as error:
                apply_errors(form, error)
            else:
                verb = (
                    "submitted for decision" if obj.state != obj.State.DRAFT else "saved as a draft"
                )
                messages.success(request, f"Exception request #{obj.pk} {verb}.")
                return redirect("exception-detail", pk=obj.pk)
        status = 400
    else:
        initial = _initial_window()
        teams = ExceptionRequestForm(user=request.user).fields["team"].queryset
        if len(teams) == 1:
            initial["team"] = teams[0]
        initial.update({key: request.GET[key] for key in ("kind",) if key in request.GET})
        # "File an exception" on a failed job's decision arrives with ?jobs=<pk>,...
        job_ids = [pk for pk in request.GET.get("jobs", "").split(",") if pk.isdigit()]
        if job_ids:
            initial["jobs"] = job_ids
        form = ExceptionRequestForm(user=request.user, initial=initial)
        status = 200
    return _render_request_form(request, form, status=status)


def _render_request_form(request, form, *, status: int, draft: ExceptionRequest | None = None):
    """The filing page; with `draft`, the same page editing that draft."""
    chosen = str(form["urgency"].value() or "")
    urgencies = list(UrgencyDefinition.objects.prefetch_related("invokers"))
    selected = next((u for u in urgencies if str(u.pk) == chosen), None)
    return render(
        request,
        "governance/exceptions/create.html",
        {
            "form": form,
            "draft": draft,
            "urgency_rows": [(u, _kind_labels(u)) for u in urgencies],
            "selected_urgency": selected,
            "kinds": _kind_labels(selected) if selected else [],
        },
        status=status,
    )


def _kind_labels(urgency: UrgencyDefinition) -> list[str]:
    return [
        ExceptionRequest.Kind(kind).label.lower()
        for kind in urgency.allowed_kinds
        if kind in ExceptionRequest.Kind.values
    ]


@require_GET
def urgency_help(request):
    """Fragment: the chosen urgency's meaning and limits (the filing form swaps it in)."""
    rules.require(request.user, "exception.file")
    urgency = (
        UrgencyDefinition.objects.prefetch_related("invokers")
        .filter(pk=query_id(request.GET, "urgency") or 0)
        .first()
    )
    return render(
        request,
        "governance/exceptions/_urgency_help.html",
        {"urgency": urgency, "kinds": _kind_labels(urgency) if urgency else []},
    )


def _detail_context(request, obj: ExceptionRequest, **forms) -> dict:
    user = request.user
    may_decide = rules.allowed(user, "exception.decide")
    decide_refusal = rules.refusal(user, "exception.decide", obj) if may_decide else None
    can_decide = may_decide and decide_refusal is None
    pending = obj.state == ExceptionRequest.State.SUBMITTED
    return {
        "req": obj,
        "timeline": selectors.request_timeline(request=obj),
        "policy_changes": [
            (change, diff_rows(change.before, change.after))
            for change in selectors.request_policy_changes(request=obj)
        ],
        "articles": articles_for_request(user=request.user, request=obj),
        "can_submit": obj.state == obj.State.DRAFT and rules.allowed(user, "exception.submit", obj),
        "can_edit": obj.state == obj.State.DRAFT and rules.allowed(user, "exception.edit", obj),
        "can_withdraw": obj.state == obj.State.SUBMITTED
        and rules.allowed(user, "exception.withdraw", obj),
        "can_decide": can_decide and pending,
        "decide_refusal": decide_refusal if pending and may_decide else None,
        "impact": services.exception_impact(request=obj) if can_decide and pending else None,
        "history": selectors.requester_history(request=obj) if can_decide and pending else None,
        "waiting": selectors.waiting_seconds(obj) if pending else None,
        "can_revoke": obj.state in (obj.State.APPROVED, obj.State.ACTIVE)
        and rules.allowed(user, "exception.revoke", obj),
        "decision_form": forms.get("decision_form") or DecisionForm(),
        "revoke_form": forms.get("revoke_form") or RevokeForm(),
    }


def exception_detail(request, pk: int):
    obj = _visible_request(request, pk)
    return render(request, "governance/exceptions/detail.html", _detail_context(request, obj))


def _act(request, obj, action, *, form=None, form_name: str = "", **kwargs):
    """Run a transition; on a refusal show the request again with the reason."""
    try:
        action(actor=request.user, request=obj, **kwargs)
    except Refused as refusal:
        messages.error(request, str(refusal))
        return redirect("exception-detail", pk=obj.pk)
    except DomainError as error:
        if form is not None:
            apply_errors(form, error)
            context = _detail_context(request, obj, **{form_name: form})
            return render(request, "governance/exceptions/detail.html", context, status=400)
        messages.error(request, error.sentence())
        return redirect("exception-detail", pk=obj.pk)
    return None


@require_POST
def exception_submit(request, pk: int):
    obj = _visible_request(request, pk)
    rules.require(request.user, "exception.submit", obj)
    failed = _act(request, obj, services.exception_request_submit)
    if failed:
        return failed
    messages.success(request, f"Request #{obj.pk} was submitted to its exception owners.")
    return redirect("exception-detail", pk=obj.pk)


@require_POST
def exception_withdraw(request, pk: int):
    obj = _visible_request(request, pk)
    rules.require(request.user, "exception.withdraw", obj)
    failed = _act(request, obj, services.exception_request_withdraw)
    if failed:
        return failed
    messages.success(
        request, f"Request #{obj.pk} was withdrawn: it is a draft again, to edit or submit."
    )
    return redirect("exception-detail", pk=obj.pk)


@require_POST
def exception_approve(request, pk: int):
    obj = _visible_request(request, pk)
    rules.require(request.user, "exception.decide", obj)
    form = DecisionForm(request.POST)
    form.is_valid()
    note = form.cleaned_data.get("note", "")
    failed = _act(
        request,
        obj,
        services.exception_request_approve,
        form=form,
        form_name="decision_form",
        note=note,
    )
    if failed:
        return failed
    obj.refresh_from_db()
    when = (
        "It is in effect now."
        if obj.state == obj.State.ACTIVE
        else "It takes effect when its window starts."
    )
    messages.success(request, f"Request #{obj.pk} approved. {when}")
    return redirect("exception-detail", pk=obj.pk)


@require_POST
def exception_deny(request, pk: int):
    obj = _visible_request(request, pk)
    rules.require(request.user, "exception.decide", obj)
    form = DecisionForm(request.POST)
    form.is_valid()
    failed = _act(
        request,
        obj,
        services.exception_request_deny,
        form=form,
        form_name="decision_form",
        note=form.cleaned_data.get("note", ""),
    )
    if failed:
        return failed
    messages.success(request, f"Request #{obj.pk} denied; the requester has been told why.")
    return redirect("exception-detail", pk=obj.pk)


@require_POST
def exception_revoke(request, pk: int):
    obj = _visible_request(request, pk)
    rules.require(request.user, "exception.revoke", obj)
    form = RevokeForm(request.POST)
    form.is_valid()
    failed = _act(
        request,
        obj,
        services.exception_request_revoke,
        form=form,
        form_name="revoke_form",
        reason=request.POST.get("reason", ""),
    )
    if failed:
        return failed
    messages.success(request, f"Exception #{obj.pk} revoked; its effect has been taken back.")
    return redirect("exception-detail", pk=obj.pk)


def decision_queue(request):
    rules.require(request.user, "exception.decision_queue")
    now = timezone.now()
    pending = list(selectors.decision_queue(user=request.user))
    rows = [(obj, selectors.waiting_seconds(obj, now=now)) for obj in pending]
    return render(
        request,
        "governance/exceptions/decisions.html",
        {"rows": rows},
    )


def exception_counts(request):
    rules.require(request.user, "exception.counts")
    counts = selectors.exception_counts()
    states = [value for value, _ in counts.states]

    def table(rows):
        return [
            {
                "label": row.label,
                "cells": [row.counts.get(s, 0) for s in states],
                "total": row.total,
            }
            for row in rows
        ]

    return render(
        request,
        "governance/exceptions/counts.html",
        {
            "counts": counts,
            "state_cells": [(label, counts.by_state[value]) for value, label in counts.states],
            "tables": [("urgency", table(counts.by_urgency)), ("team", table(counts.by_team))],
        },
    )


# Editing a draft.


def exception_edit(request, pk: int):
    """The requester changes a DRAFT (same form and rules as filing), then may submit it."""
    obj = _visible_request(request, pk)
    rules.require(request.user, "exception.edit", obj)
    if obj.state != obj.State.DRAFT:
        messages.error(
            request,
            f"Request #{obj.pk} is {obj.get_state_display().lower()}, so it cannot be edited "
            "any more; only a draft can. File a new request instead.",
        )
        return redirect("exception-detail", pk=obj.pk)
    if request.method != "POST":
        form = ExceptionRequestForm(
            user=request.user, initial=ExceptionRequestForm.initial_for(obj)
        )
        return _render_request_form(request, form, status=200, draft=obj)
    form = ExceptionRequestForm(request.POST, user=request.user)
    if form.is_valid():
        try:
            services.exception_request_update(
                actor=request.user, request=obj, data=form.request_data()
            )
            if "submit" in request.POST:
                services.exception_request_submit(actor=request.user, request=obj)
        except (Refused, WrongState) as refusal:
            messages.error(request, refusal.sentence())
            return redirect("exception-detail", pk=obj.pk)
        except InvalidInput as error:
            apply_errors(form, error)
        else:
            verb = "submitted for decision" if "submit" in request.POST else "saved"
            messages.success(request, f"Draft #{obj.pk} {verb}.")
            return redirect("exception-detail", pk=obj.pk)
    return _render_request_form(request, form, status=400, draft=obj)


# Exception owners (admins).


def exception_owners(request):
    """Who decides which queue's or share's requests; admins appoint and remove them."""
    rules.require(request.user, "exception_owner.manage")
    if request.method == "POST":
        form = ExceptionOwnerForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                owner = services.exception_owner_add(
                    actor=request.user, user=data["user"], queue=data["queue"], share=data["share"]
                )
            except InvalidInput as error:
                apply_errors(form, error)
            else:
                messages.success(
                    request, f"{_owner_name(owner.user)} now decides for {_scope(owner)}."
                )
                return redirect("exception-owners")
        status = 400
    else:
        form = ExceptionOwnerForm()
        status = 200
    owners = ExceptionOwner.objects.select_related(
        "user", "queue", "share__queue", "share__team"
    ).order_by("user__username", "queue__name", "share__name", "id")
    page = Paginator(owners, PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "governance/exceptions/owners.html",
        {"form": form, "page_obj": page, "owners": list(page)},
        status=status,
    )


@require_POST
def exception_owner_remove(request, pk: int):
    rules.require(request.user, "exception_owner.manage")
    owner = get_object_or_404(
        ExceptionOwner.objects.select_related("user", "queue", "share__queue"), pk=pk
    )
    try:
        services.exception_owner_remove(actor=request.user, owner=owner)
    except Refused:
        raise PermissionDenied from None
    messages.success(request, f"{_owner_name(owner.user)} no longer decides for {_scope(owner)}.")
    return redirect("exception-owners")


def _owner_name(user) -> str:
    return user.get_full_name() or user.get_username()


def _scope(owner: ExceptionOwner) -> str:
    if owner.queue_id is not None:
        return f"queue {owner.queue.name}"
    return f"share {owner.share.queue.name} / {owner.share.name}"
