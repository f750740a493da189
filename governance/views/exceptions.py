"""Exception pages: the list, filing a request, one request (with deciding), the
decision queue and the counts. Thin: permission questions go to
governance.exception_permissions, reads to the selectors, writes to the services."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from governance import exception_permissions as rules
from governance.forms_exceptions import (
    DecisionForm,
    ExceptionFilterForm,
    ExceptionRequestForm,
    RevokeForm,
)
from governance.models import ExceptionRequest, UrgencyDefinition
from governance.permissions import can_edit_policies
from governance.selectors import exceptions as selectors
from governance.selectors.knowledge import articles_for_request
from governance.services import exceptions as services
from governance.services.policy import PolicyError, changed_fields

PER_PAGE = 20


def _require(allowed: bool) -> None:
    if not allowed:
        raise PermissionDenied


def _visible_request(request, pk: int) -> ExceptionRequest:
    try:
        obj = selectors.exception_request_get(pk=pk)
    except ExceptionRequest.DoesNotExist:
        raise Http404("No such exception request") from None
    _require(rules.can_view_request(request.user, obj))
    return obj


def exception_list(request):
    _require(rules.can_view_exceptions(request.user))
    filters = ExceptionFilterForm(request.GET or None)
    values = filters.cleaned_data if filters.is_valid() else {}
    requests = selectors.exception_request_list(
        user=request.user,
        state=values.get("state") or None,
        kind=values.get("kind") or None,
        team_id=values["team"].pk if values.get("team") else None,
        urgency_id=values["urgency"].pk if values.get("urgency") else None,
    )
    page = Paginator(requests, PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page_obj": page,
        "requests": list(page),
        "filter_form": filters if request.GET else ExceptionFilterForm(),
        "filtered": any(values.values()) if values else False,
        "can_file": rules.can_file_requests(request.user),
        "can_view_counts": rules.can_view_exception_counts(request.user),
        "can_view_decisions": rules.can_view_decision_queue(request.user),
    }
    if request.htmx:
        return render(request, "governance/exceptions/_list.html", context)
    return render(request, "governance/exceptions/list.html", context)


def _initial_window() -> dict:
    start = timezone.localtime().replace(second=0, microsecond=0) + timedelta(minutes=5)
    return {"window_start": start, "window_end": start + timedelta(hours=24)}


def exception_create(request):
    _require(rules.can_file_requests(request.user))
    if request.method == "POST":
        form = ExceptionRequestForm(request.POST, user=request.user)
        if form.is_valid():
            try:
                obj = services.exception_request_create(
                    actor=request.user,
                    data=form.request_data(),
                    submit="submit" in request.POST,
                )
            except PolicyError as error:
                for field, problems in error.errors.items():
                    for problem in problems:
                        form.add_error(field if field in form.fields else None, problem)
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
    chosen = str(form["urgency"].value() or "")
    urgencies = list(UrgencyDefinition.objects.prefetch_related("invokers"))
    selected = next((u for u in urgencies if str(u.pk) == chosen), None)
    return render(
        request,
        "governance/exceptions/create.html",
        {
            "form": form,
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
    _require(rules.can_file_requests(request.user))
    urgency = (
        UrgencyDefinition.objects.prefetch_related("invokers")
        .filter(pk=request.GET.get("urgency") or 0)
        .first()
    )
    return render(
        request,
        "governance/exceptions/_urgency_help.html",
        {"urgency": urgency, "kinds": _kind_labels(urgency) if urgency else []},
    )


def _detail_context(request, obj: ExceptionRequest, **forms) -> dict:
    user = request.user
    decide_refusal = rules.decide_refusal(user, obj) if rules.can_decide_requests(user) else None
    can_decide = rules.can_decide_requests(user) and decide_refusal is None
    pending = obj.state == ExceptionRequest.State.SUBMITTED
    return {
        "req": obj,
        "timeline": selectors.request_timeline(request=obj),
        "policy_changes": [
            (change, changed_fields(change.before, change.after))
            for change in selectors.request_policy_changes(request=obj)
        ],
        "articles": articles_for_request(request=obj),
        "can_submit": obj.state == obj.State.DRAFT and rules.submit_refusal(user, obj) is None,
        "can_decide": can_decide and pending,
        "decide_refusal": decide_refusal if pending and rules.can_decide_requests(user) else None,
        "impact": services.exception_impact(request=obj) if can_decide and pending else None,
        "history": selectors.requester_history(request=obj) if can_decide and pending else None,
        "waiting": selectors.waiting_seconds(obj) if pending else None,
        "can_revoke": obj.state in (obj.State.APPROVED, obj.State.ACTIVE)
        and rules.revoke_refusal(user, obj) is None,
        "can_compare": can_edit_policies(user),
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
    except services.ActionNotAllowed as refusal:
        messages.error(request, str(refusal))
        return redirect("exception-detail", pk=obj.pk)
    except PolicyError as error:
        if form is not None:
            for field, problems in error.errors.items():
                for problem in problems:
                    form.add_error(field if field in form.fields else None, problem)
            if form.errors:
                context = _detail_context(request, obj, **{form_name: form})
                return render(request, "governance/exceptions/detail.html", context, status=400)
        messages.error(
            request, "; ".join(p for problems in error.errors.values() for p in problems)
        )
        return redirect("exception-detail", pk=obj.pk)
    return None


@require_POST
def exception_submit(request, pk: int):
    obj = _visible_request(request, pk)
    failed = _act(request, obj, services.exception_request_submit)
    if failed:
        return failed
    messages.success(request, f"Request #{obj.pk} was submitted to its exception owners.")
    return redirect("exception-detail", pk=obj.pk)


@require_POST
def exception_approve(request, pk: int):
    obj = _visible_request(request, pk)
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
    _require(rules.can_view_decision_queue(request.user))
    now = timezone.now()
    pending = list(selectors.decision_queue(user=request.user))
    rows = [(obj, selectors.waiting_seconds(obj, now=now)) for obj in pending]
    return render(request, "governance/exceptions/decisions.html", {"rows": rows})


def exception_counts(request):
    _require(rules.can_view_exception_counts(request.user))
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
