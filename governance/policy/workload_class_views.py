"""Workload classes: their interruption contracts, listed for policy readers with the
trade-off they make (how long a lender may wait to get its capacity back), edited and
deleted by admins with a reason (governance.policy.workload_classes)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods, require_POST

from core import rules
from fleet.models import WorkloadClass
from governance.models import PolicyChange
from governance.policy import contracts
from governance.policy.forms import WorkloadClassDeleteForm, WorkloadClassForm
from governance.policy.history_views import history_url_for
from governance.policy.impact import workload_class_change_impact
from governance.policy.services import PolicyError, PolicyWrite
from governance.policy.views import _parse_problems, _problem, edit_with_conflicts
from governance.policy.workload_classes import workload_class_validate
from governance.proposals.messages import after_policy_write
from scheduler.selectors import contract_words


def workload_classes(request):
    rules.require(request.user, "policy.view")
    return render(
        request,
        "governance/workload_classes/list.html",
        {
            "classes": [
                (workload_class, contract_words(workload_class))
                for workload_class in WorkloadClass.objects.all()
            ],
        },
    )


@require_http_methods(["GET", "POST"])
def workload_class_edit(request, pk: int | None = None):
    rules.require(request.user, "policy.edit")
    workload_class = get_object_or_404(WorkloadClass, pk=pk) if pk is not None else None

    def form_for(data):
        current = WorkloadClass.objects.get(pk=pk) if pk is not None else None
        return WorkloadClassForm(data, workload_class=current)

    def render_page(form, **extra):
        return render(
            request,
            "governance/workload_classes/edit.html",
            {
                "form": form,
                "workload_class": workload_class,
                "bounds": contracts.class_reclaim_bounds(workload_class) if workload_class else [],
                **extra,
            },
        )

    return edit_with_conflicts(
        request,
        form_for=form_for,
        changes=PolicyChange.objects.filter(workload_class=workload_class)
        if workload_class
        else PolicyChange.objects.none(),
        applied=lambda write: _class_saved(request, write),
        render_page=render_page,
        preview=_class_preview if workload_class else None,
    )


def _class_saved(request, write: PolicyWrite) -> str:
    workload_class, change = write.applied, write.entry
    if change is None:
        messages.info(request, f"Nothing changed in {workload_class.name}: it is still as it was.")
    else:
        messages.success(
            request,
            format_html(
                'Saved the workload class {}: now version {}. <a href="{}">See this change in '
                "the history</a>.",
                workload_class.name,
                workload_class.version,
                history_url_for(change),
            ),
        )
    return reverse("workload-class-list") + f"#class-{workload_class.pk}"


@require_POST
def workload_class_impact(request, pk: int):
    """The class editor's impact preview: what the change does to the lenders' worst case."""
    rules.require(request.user, "policy.edit")
    workload_class = get_object_or_404(WorkloadClass, pk=pk)
    form = WorkloadClassForm(request.POST, workload_class=workload_class)
    return render(request, "governance/shares/_impact.html", _class_preview(form))


def _class_preview(form: WorkloadClassForm) -> dict:
    context = {"ready": False, "problems": [], "lines": []}
    if not form.is_valid():
        context["problems"] = _parse_problems(form)
        return context
    data = form.class_data()
    errors = workload_class_validate(data, workload_class=form.workload_class)
    if errors:
        context["problems"] = [
            _problem(key, message) for key, messages_ in errors.items() for message in messages_
        ]
    else:
        context["ready"] = True
        context["lines"] = workload_class_change_impact(
            workload_class=form.workload_class, data=data
        )
    return context


@require_http_methods(["GET", "POST"])
def workload_class_delete(request, pk: int):
    rules.require(request.user, "policy.edit")
    workload_class = get_object_or_404(WorkloadClass, pk=pk)
    form = WorkloadClassDeleteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        name = workload_class.name
        try:
            deleted = form.save(actor=request.user, workload_class=workload_class)
        except PolicyError:
            pass
        else:

            def applied(write: PolicyWrite) -> str:
                messages.success(request, f"Deleted the workload class {name}.")
                return reverse("workload-class-list")

            return after_policy_write(request, deleted, applied=applied)
    return render(
        request,
        "governance/workload_classes/delete.html",
        {"form": form, "workload_class": workload_class},
    )
