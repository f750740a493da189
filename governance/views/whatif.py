"""What-if pages and API: clone a queue's policy into a draft, edit it, pick a workload,
run both policies (a Celery task, polled with htmx), read the comparison, save, review,
apply.

Thin views: admins only (governance.rules, "whatif.use"); reads through
governance.whatif.selectors, writes through governance.whatif.services.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import TokenAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import glossary, rules
from governance.api.fields import BoundedPrimaryKeyRelatedField, InstanceMapField
from governance.api.permissions import WhatIfAccess
from governance.models import ExceptionRequest, JobQueue, QuotaShare, Team, WhatIfComparison
from governance.services.policy import (
    BORROW_LIMIT_MAX,
    PolicyError,
    share_data_from_document,
)
from governance.whatif import selectors, services
from governance.whatif.forms import (
    ApplyForm,
    CreateForm,
    ReviewForm,
    SaveForm,
    WorkloadForm,
    draft_share_form,
    workload_start_problem,
)
from governance.whatif.workloads import WorkloadError

PER_PAGE = 20


def _comparison(request, pk: int) -> WhatIfComparison:
    rules.require(request.user, "whatif.use")
    return get_object_or_404(
        WhatIfComparison.objects.select_related("queue", "author", "reviewer", "applied_by"),
        pk=pk,
    )


def _error_messages(request, errors: dict[str, list[str]]) -> None:
    for key, lines in errors.items():
        for line in lines:
            prefix = "" if key == "non_field_errors" else f"{key.replace('_', ' ')}: "
            messages.error(request, f"{prefix}{line}")


# -- list and create ------------------------------------------------------------------


@require_GET
def whatif_list(request):
    rules.require(request.user, "whatif.use")
    page = Paginator(selectors.comparison_list(), PER_PAGE).get_page(request.GET.get("page"))
    initial = {}
    if request.GET.get("queue", "").isdigit():
        initial["queue"] = int(request.GET["queue"])
    if request.GET.get("exception_request", "").isdigit():
        initial["exception_request"] = int(request.GET["exception_request"])
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
        except PolicyError as error:
            _error_messages(request, error.errors)
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
    review_open = comparison.review_state == WhatIfComparison.Review.PROPOSED
    context = {
        "comparison": comparison,
        "draft_rows": selectors.draft_rows(comparison),
        "changed": services.changed_shares(comparison),
        "results": selectors.results_view(comparison),
        "workload_form": forms.get("workload_form")
        or WorkloadForm(initial=_workload_initial(comparison)),
        "workload_problems": forms.get("workload_problems", []),
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
        "need_review": settings.POLICY_CHANGES_NEED_REVIEW,
        "can_review": review_open and rules.allowed(user, "whatif.review", comparison),
        "is_author": comparison.author_id == user.pk,
        "editable": comparison.review_state
        in (WhatIfComparison.Review.NONE, WhatIfComparison.Review.REJECTED)
        and not comparison.is_active,
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
        except PolicyError as error:
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
    except PolicyError as error:
        _error_messages(request, error.errors)
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
    start = data.get("start")
    end = None
    if data["kind"] == WhatIfComparison.Workload.RECORDED and start:
        start = dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC)
        end = start + dt.timedelta(days=data.get("days") or 30)
    upload = request.FILES.get("upload")
    try:
        services.comparison_set_workload(
            actor=request.user,
            comparison=comparison,
            kind=data["kind"],
            start=start,
            end=end,
            days=data.get("days") or 30,
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
    except PolicyError as error:
        _error_messages(request, error.errors)
    else:
        comparison.refresh_from_db()
        messages.success(request, f"Workload: {comparison.workload_description}.")
    return redirect("whatif-detail", pk=pk)


# -- run ------------------------------------------------------------------------------


@require_POST
def whatif_run(request, pk: int):
    comparison = _comparison(request, pk)
    try:
        services.comparison_run(actor=request.user, comparison=comparison)
    except PolicyError as error:
        _error_messages(request, error.errors)
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
    except PolicyError as error:
        _error_messages(request, error.errors)
    else:
        messages.success(request, "Comparison saved.")
    return redirect("whatif-detail", pk=pk)


@require_POST
def whatif_propose(request, pk: int):
    comparison = _comparison(request, pk)
    try:
        services.comparison_propose(actor=request.user, comparison=comparison)
    except PolicyError as error:
        _error_messages(request, error.errors)
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
    except PolicyError as error:
        _error_messages(request, error.errors)
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
    except PolicyError as error:
        _error_messages(request, error.errors)
    else:
        messages.success(
            request,
            f"Applied: {len(changes)} share{'s' if len(changes) != 1 else ''} changed, "
            "each recorded in the policy history with a link to this comparison.",
        )
    return redirect("whatif-detail", pk=pk)


# -- API ------------------------------------------------------------------------------


class ApiView(APIView):
    permission_classes = [WhatIfAccess]

    def get_authenticate_header(self, request):
        return TokenAuthentication().authenticate_header(request)


class DraftShareInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="The share (its current name).")
    new_name = serializers.CharField(max_length=100, required=False)
    team = serializers.CharField(max_length=100, required=False)
    strategy = serializers.ChoiceField(choices=QuotaShare.Strategy.choices, required=False)
    borrow_limit = serializers.IntegerField(
        required=False, allow_null=True, min_value=-1, max_value=BORROW_LIMIT_MAX
    )
    in_share_preemption = serializers.BooleanField(required=False)
    state = serializers.ChoiceField(choices=QuotaShare.State.choices, required=False)
    capacity_limits = InstanceMapField(required=False)


class WorkloadInput(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=WhatIfComparison.Workload.choices,
        error_messages={"invalid_choice": "must be RECORDED, PHILLY or UPLOAD"},
    )
    start = serializers.DateField(required=False)
    days = serializers.FloatField(required=False, default=30, min_value=0.01, max_value=120)
    scale = serializers.FloatField(required=False, default=1.0, min_value=0, max_value=100)
    csv = serializers.CharField(required=False, help_text="The trace, for kind UPLOAD.")

    def validate(self, data):
        problem = workload_start_problem(data.get("start"), data.get("days"))
        if problem:
            raise serializers.ValidationError({"start": [problem]})
        return data


class CreateInput(serializers.Serializer):
    queue = BoundedPrimaryKeyRelatedField(queryset=JobQueue.objects.all())
    title = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    shares = DraftShareInput(many=True, required=False, default=list)
    workload = WorkloadInput(required=False)
    run = serializers.BooleanField(required=False, default=True)
    exception_request = BoundedPrimaryKeyRelatedField(
        queryset=ExceptionRequest.objects.all(), required=False, allow_null=True
    )


def _draft_edit(actor, comparison: WhatIfComparison, edit: dict) -> None:
    names = [share["name"] for share in comparison.draft_policy["shares"]]
    if edit["name"] not in names:
        raise PolicyError({"shares": [f"no share named '{edit['name']}' in {comparison.queue}"]})
    index = names.index(edit["name"])
    doc = dict(comparison.draft_policy["shares"][index])
    for key in ("strategy", "borrow_limit", "in_share_preemption", "state", "capacity_limits"):
        if key in edit:
            doc[key] = edit[key]
    if "strategy" in edit and edit["strategy"] != "LEND_AND_BORROW" and "borrow_limit" not in edit:
        doc.pop("borrow_limit", None)
    if "new_name" in edit:
        doc["name"] = edit["new_name"]
    team = Team.objects.filter(name=edit.get("team", doc.get("team"))).first()
    data = share_data_from_document(doc, team=team)
    try:
        services.draft_share_update(actor=actor, comparison=comparison, index=index, data=data)
    except PolicyError as error:
        raise PolicyError(
            {f"shares[{index}].{key}": lines for key, lines in error.errors.items()}
        ) from None


def _api_workload(actor, comparison: WhatIfComparison, workload: dict) -> None:
    start = workload.get("start")
    end = None
    if workload["kind"] == WhatIfComparison.Workload.RECORDED and start:
        start = dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC)
        end = start + dt.timedelta(days=workload["days"])
    try:
        services.comparison_set_workload(
            actor=actor,
            comparison=comparison,
            kind=workload["kind"],
            start=start,
            end=end,
            days=workload["days"],
            scale=workload["scale"],
            upload=workload.get("csv", "").encode() or None,
        )
    except WorkloadError as error:
        raise PolicyError({"workload": error.problems}) from None


class WhatIfCreateApi(ApiView):
    @extend_schema(request=CreateInput, responses={201: dict})
    def post(self, request):
        """Clone a queue's policy, apply the draft edits, choose the workload, and (by
        default) queue the run. Poll GET /api/v1/what-if/{id}/ for progress and results."""
        serializer = CreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        with transaction.atomic():  # nothing is kept when any part is refused
            comparison = services.comparison_create(
                actor=request.user,
                queue=data["queue"],
                title=data["title"],
                exception_request=data.get("exception_request"),
            )
            for edit in data["shares"]:
                _draft_edit(request.user, comparison, edit)
            workload = data.get("workload")
            if workload:
                _api_workload(request.user, comparison, workload)
            if data["run"]:
                # comparison_set_workload stored the workload on its own copy: run the
                # stored one, not this stale copy's empty default.
                comparison.refresh_from_db()
                services.comparison_run(actor=request.user, comparison=comparison)
        comparison.refresh_from_db()
        return Response(selectors.comparison_document(comparison), status=status.HTTP_201_CREATED)


class WhatIfDetailApi(ApiView):
    @extend_schema(responses={200: dict})
    def get(self, request, pk: int):
        comparison = get_object_or_404(WhatIfComparison.objects.select_related("author"), pk=pk)
        return Response(selectors.comparison_document(comparison))
