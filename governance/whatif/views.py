"""What-if pages: clone a queue's policy into a draft, edit it, pick a workload,
run both policies (a Celery task, polled with htmx), read the comparison, save, review,
apply.

Thin views: admins only (core.rules, "whatif.use"); reads through
governance.whatif.selectors, writes through governance.whatif.services, which also say
which steps the draft allows now (the page's buttons). The API is governance.whatif.api.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from core import rules
from core.errors import DomainError, InvalidInput, WrongState
from core.filters import query_id
from governance import glossary
from governance.models import WhatIfComparison
from governance.whatif import selectors, services, workloads
from governance.whatif.forms import (
    ApplyForm,
    ClassContractForm,
    ContractForm,
    CreateForm,
    MappingForm,
    ReviewForm,
    SaveForm,
    WorkloadForm,
    draft_share_form,
)
from governance.whatif.workloads import WorkloadError

PER_PAGE = 20


def _comparison(request, pk: int) -> WhatIfComparison:
    rules.require(request.user, "whatif.use")
    return get_object_or_404(
        WhatIfComparison.objects.select_related("queue", "author", "reviewer", "applied_by"),
        pk=pk,
    )


# What a step can refuse with a notice (a Refused stays a 403).
STEP_ERRORS = (InvalidInput, WrongState)


def _error_messages(request, error: DomainError) -> None:
    for key, lines in error.errors.items():
        for line in lines:
            prefix = "" if key == "non_field_errors" else f"{key.replace('_', ' ')}: "
            messages.error(request, f"{prefix}{line}")


# -- list and create ------------------------------------------------------------------


@require_GET
def whatif_list(request):
    rules.require(request.user, "whatif.use")
    page = Paginator(selectors.comparison_list(), PER_PAGE).get_page(request.GET.get("page"))
    initial = {
        name: query_id(request.GET, name)
        for name in ("queue", "exception_request")
        if query_id(request.GET, name)
    }
    return render(
        request,
        "governance/whatif/list.html",
        {"page_obj": page, "form": CreateForm(initial=initial)},
    )


@require_POST
def whatif_create(request):
    rules.require(request.user, "whatif.use")
    form = CreateForm(request.POST)
    if form.is_valid():
        try:
            comparison = services.comparison_create(
                actor=request.user,
                queue=form.cleaned_data["queue"],
                title=form.cleaned_data["title"],
                exception_request=form.cleaned_data["exception_request"],
            )
        except STEP_ERRORS as error:
            _error_messages(request, error)
        else:
            messages.success(
                request,
                f"Cloned the current policy of {comparison.queue.name} into a draft. "
                "Nothing changes live until you apply it.",
            )
            return redirect("whatif-detail", pk=comparison.pk)
    page = Paginator(selectors.comparison_list(), PER_PAGE).get_page(1)
    return render(
        request, "governance/whatif/list.html", {"page_obj": page, "form": form}, status=400
    )


# -- the comparison page --------------------------------------------------------------


def _workload_initial(comparison: WhatIfComparison) -> dict:
    params = comparison.workload_params or {}
    initial = {"kind": comparison.workload_kind, "days": params.get("days", 30)}
    if params.get("start"):
        initial["start"] = params["start"][:10]
        # The start belongs to this kind of workload: choosing another kind without
        # touching it uses that kind's own default (a Philly window is in 2017).
        initial["start_of_kind"] = comparison.workload_kind
        initial["start_shown"] = initial["start"]
    if params.get("scale"):
        initial["scale"] = params["scale"]
    return initial


def _detail(request, comparison: WhatIfComparison, *, status_code: int = 200, **forms):
    user = request.user
    waiting_for_review = services.comparison_review_refusal(comparison) is None
    context = {
        "comparison": comparison,
        "draft_rows": selectors.draft_rows(comparison),
        "changed": services.changed_shares(comparison),
        "results": selectors.results_view(comparison),
        "workload_form": forms.get("workload_form")
        or WorkloadForm(initial=_workload_initial(comparison)),
        "workload_problems": forms.get("workload_problems", []),
        "mapping_form": forms.get("mapping_form") or MappingForm(comparison=comparison),
        "mapping": selectors.mapping_view(comparison),
        "contract_form": forms.get("contract_form") or ContractForm(comparison=comparison),
        "class_contract_form": forms.get("class_contract_form")
        or ClassContractForm(classes=selectors.workload_class_counts(comparison)),
        "contracts": selectors.contract_rows(comparison),
        "contract_precedence": services.PRECEDENCE,
        "save_form": forms.get("save_form")
        or SaveForm(
            initial={
                "title": comparison.title,
                "note": comparison.note,
                "articles": list(comparison.articles.all()),
                "exception_requests": list(comparison.exception_requests.all()),
            }
        ),
        "review_form": forms.get("review_form") or ReviewForm(),
        "apply_form": forms.get("apply_form") or ApplyForm(),
        "reviews": comparison.reviews.select_related("actor"),
        "applied_changes": comparison.applied_changes.all(),
        "need_review": services.review_required(),
        "can_propose": services.comparison_propose_refusal(comparison) is None,
        "can_apply": services.comparison_apply_refusal(comparison) is None,
        "waiting_for_review": waiting_for_review,
        "can_review": waiting_for_review and rules.allowed(user, "whatif.review", comparison),
        "is_author": comparison.author_id == user.pk,
        "editable": services.comparison_edit_refusal(comparison) is None,
    }
    return render(request, "governance/whatif/detail.html", context, status=status_code)


@require_GET
def whatif_detail(request, pk: int):
    return _detail(request, _comparison(request, pk))


@require_GET
def whatif_progress(request, pk: int):
    """The progress fragment the page polls every second; when the run ends, htmx
    reloads the page to show the results."""
    comparison = _comparison(request, pk)
    if request.htmx and not comparison.is_active:
        return HttpResponseClientRefresh()
    return render(request, "governance/whatif/_progress.html", {"comparison": comparison})


# -- the draft ------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def whatif_share_edit(request, pk: int, index: int):
    comparison = _comparison(request, pk)
    if not 0 <= index < len(comparison.draft_policy["shares"]):
        raise Http404("No such share in this draft.")
    form = draft_share_form(comparison, index, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.draft_share_update(
                actor=request.user, comparison=comparison, index=index, data=form.share_data()
            )
        except STEP_ERRORS as error:
            form.apply_errors(error.errors)
        else:
            messages.success(
                request,
                f"Draft updated: {form.cleaned_data['name']}. The live share is unchanged; "
                "run the comparison to see the effect.",
            )
            return redirect("whatif-detail", pk=comparison.pk)
    return render(
        request,
        "governance/whatif/share_edit.html",
        {
            "comparison": comparison,
            "form": form,
            "index": index,
            "share_name": comparison.current_policy["shares"][index]["name"],
            "strategy_options": [
                (radio, glossary.explain(radio.data["value"])) for radio in form["strategy"]
            ],
        },
        status=400 if request.method == "POST" else 200,
    )


@require_POST
def whatif_reset(request, pk: int):
    comparison = _comparison(request, pk)
    try:
        services.draft_reset(actor=request.user, comparison=comparison)
    except STEP_ERRORS as error:
        _error_messages(request, error)
    else:
        messages.success(request, "The draft is back to the current policy.")
    return redirect("whatif-detail", pk=pk)


@require_POST
def whatif_workload(request, pk: int):
    comparison = _comparison(request, pk)
    form = WorkloadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _detail(request, comparison, status_code=400, workload_form=form)
    data = form.cleaned_data
    upload = request.FILES.get("upload")
    try:
        services.comparison_choose_workload(
            actor=request.user,
            comparison=comparison,
            kind=data["kind"],
            start_day=data.get("start"),
            days=data.get("days") or workloads.DEFAULT_DAYS,
            scale=data.get("scale") or 1.0,
            upload=upload.read() if upload else None,
            filename=upload.name if upload else "upload.csv",
        )
    except WorkloadError as error:
        return _detail(
            request,
            comparison,
            status_code=400,
            workload_form=form,
            workload_problems=error.problems,
        )
    except STEP_ERRORS as error:
        _error_messages(request, error)
    else:
        comparison.refresh_from_db()
        messages.success(request, f"Workload: {comparison.workload_description}.")
    return redirect("whatif-detail", pk=pk)


@require_POST
def whatif_mapping(request, pk: int):
    """Send each team's jobs to the share chosen for it (or leave them out)."""
    comparison = _comparison(request, pk)
    form = MappingForm(request.POST, comparison=comparison)
    if not form.is_valid():
        return _detail(request, comparison, status_code=400, mapping_form=form)
    try:
        services.comparison_set_mapping(
            actor=request.user, comparison=comparison, mapping=form.mapping()
        )
    except InvalidInput as error:
        for key, problems in error.errors.items():
            field = form.field_of(key.removeprefix("mapping."))
            form.add_error(field, problems)
        return _detail(request, comparison, status_code=400, mapping_form=form)
    except WrongState as error:
        _error_messages(request, error)
        return redirect("whatif-detail", pk=pk)
    comparison.refresh_from_db()
    messages.success(request, f"Mapping saved. Workload: {comparison.workload_description}.")
    return redirect("whatif-detail", pk=pk)


@require_POST
def whatif_contracts(request, pk: int):
    """Set one share's or one workload class's contract in one run: the form posted
    names a `workload_class` or a `share`."""
    comparison = _comparison(request, pk)
    by_class = "workload_class" in request.POST
    if by_class:
        form = ClassContractForm(request.POST, classes=selectors.workload_class_counts(comparison))
        form_key = "class_contract_form"
    else:
        form = ContractForm(request.POST, comparison=comparison)
        form_key = "contract_form"
    if not form.is_valid():
        return _detail(request, comparison, status_code=400, **{form_key: form})
    data = form.cleaned_data
    try:
        if by_class:
            services.comparison_set_class_contract(
                actor=request.user,
                comparison=comparison,
                run=data["run"],
                workload_class=data["workload_class"],
                contract=form.contract(),
            )
        else:
            services.comparison_set_share_contract(
                actor=request.user,
                comparison=comparison,
                run=data["run"],
                share=data["share"],
                contract=form.contract(),
            )
    except InvalidInput as error:
        name_field = "workload_class" if by_class else "share"
        base = f"{'class_contracts' if by_class else 'contracts'}.{data['run']}.{data[name_field]}"
        for key, problems in error.errors.items():
            # Keys name `<base>` (the class or share) or `<base>.<field>`: the form's
            # field where it has one.
            field = name_field if key == base else key.removeprefix(base + ".")
            form.add_error(field if field in form.fields else None, problems)
        return _detail(request, comparison, status_code=400, **{form_key: form})
    except WrongState as error:
        _error_messages(request, error)
        return redirect("whatif-detail", pk=pk)
    messages.success(request, "Contracts updated: run the comparison to measure them.")
    return redirect("whatif-detail", pk=pk)


# -- run ------------------------------------------------------------------------------


@require_POST
def whatif_run(request, pk: int):
    comparison = _comparison(request, pk)
    try:
        services.comparison_run(actor=request.user, comparison=comparison)
    except STEP_ERRORS as error:
        _error_messages(request, error)
    return redirect("whatif-detail", pk=pk)


@require_POST
def whatif_cancel(request, pk: int):
    comparison = services.comparison_cancel(actor=request.user, comparison=_comparison(request, pk))
    if request.htmx:
        return render(request, "governance/whatif/_progress.html", {"comparison": comparison})
    return redirect("whatif-detail", pk=pk)


# -- save, review, apply --------------------------------------------------------------


@require_POST
def whatif_save(request, pk: int):
    comparison = _comparison(request, pk)
    form = SaveForm(request.POST)
    if not form.is_valid():
        return _detail(request, comparison, status_code=400, save_form=form)
    try:
        services.comparison_save(
            actor=request.user,
            comparison=comparison,
            title=form.cleaned_data["title"],
            note=form.cleaned_data["note"],
            articles=list(form.cleaned_data["articles"]),
            exception_requests=list(form.cleaned_data["exception_requests"]),
        )
    except STEP_ERRORS as error:
        _error_messages(request, error)
    else:
        messages.success(request, "Comparison saved.")
    return redirect("whatif-detail", pk=pk)


@require_POST
def whatif_propose(request, pk: int):
    comparison = _comparison(request, pk)
    try:
        services.comparison_propose(actor=request.user, comparison=comparison)
    except STEP_ERRORS as error:
        _error_messages(request, error)
    else:
        messages.success(
            request, "Proposed for review: another admin approves it before it applies."
        )
    return redirect("whatif-detail", pk=pk)


@require_POST
def whatif_review(request, pk: int):
    comparison = _comparison(request, pk)
    rules.require(request.user, "whatif.review", comparison)
    form = ReviewForm(request.POST)
    if not form.is_valid():
        return _detail(request, comparison, status_code=400, review_form=form)
    try:
        services.comparison_review(
            actor=request.user,
            comparison=comparison,
            approve=form.cleaned_data["decision"] == "approve",
            note=form.cleaned_data["note"],
        )
    except STEP_ERRORS as error:
        _error_messages(request, error)
    else:
        messages.success(request, "Review recorded.")
    return redirect("whatif-detail", pk=pk)


@require_POST
def whatif_apply(request, pk: int):
    comparison = _comparison(request, pk)
    form = ApplyForm(request.POST)
    if not form.is_valid():
        return _detail(request, comparison, status_code=400, apply_form=form)
    try:
        changes = services.comparison_apply(
            actor=request.user, comparison=comparison, reason=form.cleaned_data["reason"]
        )
    except STEP_ERRORS as error:
        _error_messages(request, error)
    else:
        messages.success(
            request,
            f"Applied: {len(changes)} share{'s' if len(changes) != 1 else ''} changed, "
            "each recorded in the policy history with a link to this comparison.",
        )
    return redirect("whatif-detail", pk=pk)
