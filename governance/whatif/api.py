"""The what-if API (/api/v1/what-if/): create a comparison with draft edits and a
workload in one request, then poll it. Thin: the draft edit, the workload period and
every rule are governance.whatif.services'; errors have the API's one shape."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import TokenAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.fields import BoundedPrimaryKeyRelatedField, InstanceMapField
from core.api.permissions import WhatIfAccess
from fleet.models import JobQueue, QuotaShare
from governance.models import ExceptionRequest, WhatIfComparison
from governance.policy.services import BORROW_LIMIT_MAX
from governance.policy.workload_classes import MAX_CONTRACT_SECONDS
from governance.whatif import selectors, services
from governance.whatif.forms import workload_start_problem
from governance.whatif.workloads import MAX_UPLOAD_BYTES


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
    csv = serializers.CharField(
        required=False, max_length=MAX_UPLOAD_BYTES, help_text="The trace, for kind UPLOAD."
    )
    mapping = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=100),
        required=False,
        help_text="Team -> the share its jobs go to (a trace's cluster, or the share "
        "recorded jobs were submitted to); an empty name leaves its jobs out. Teams not "
        "named keep their default (the share named like the team or vc-<team>, else "
        "none: left out). The response's workload.mapping shows the whole mapping.",
    )

    def validate(self, data):
        problem = workload_start_problem(data.get("start"), data.get("days"))
        if problem:
            raise serializers.ValidationError({"start": [problem]})
        return data


class ContractInput(serializers.Serializer):
    """One interruption contract (spec v2) in one run of the comparison, for the jobs of
    one share or of one workload class (services.PRECEDENCE when both apply). The
    service checks the values (whole seconds, at most MAX_CONTRACT_SECONDS) and the
    names, keyed `contracts.<run>.<share>.<field>` or
    `class_contracts.<run>.<class>.<field>`; the bounds are repeated here for the
    schema."""

    run = serializers.ChoiceField(choices=services.CONTRACT_RUNS)
    share = serializers.CharField(
        max_length=100, required=False, help_text="The share (its current name)."
    )
    workload_class = serializers.CharField(
        max_length=100,
        required=False,
        help_text="A workload class: the jobs that carry it (a recorded job's copied "
        "class, a trace job's share's default class).",
    )
    min_runtime_reclaim = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_CONTRACT_SECONDS
    )
    min_runtime_preempt = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_CONTRACT_SECONDS
    )
    grace = serializers.IntegerField(required=False, min_value=0, max_value=MAX_CONTRACT_SECONDS)
    checkpoint_on_notice = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_CONTRACT_SECONDS
    )

    def validate(self, data):
        if ("share" in data) == ("workload_class" in data):
            raise serializers.ValidationError(
                {"share": ["name a share or a workload_class (one of the two)"]}
            )
        return data


class CreateInput(serializers.Serializer):
    queue = BoundedPrimaryKeyRelatedField(queryset=JobQueue.objects.all())
    title = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    shares = DraftShareInput(many=True, required=False, default=list)
    workload = WorkloadInput(required=False)
    contracts = ContractInput(
        many=True,
        required=False,
        default=list,
        help_text="Replay these shares' or classes' jobs under these contracts (e.g. "
        "grace 0 in `current`, 120 in `draft`); the results gain `interruptions` per "
        "run. " + services.PRECEDENCE,
    )
    run = serializers.BooleanField(required=False, default=True)
    exception_request = BoundedPrimaryKeyRelatedField(
        queryset=ExceptionRequest.objects.all(), required=False, allow_null=True
    )


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
                services.draft_share_edit(actor=request.user, comparison=comparison, edit=edit)
            workload = data.get("workload")
            if workload:
                services.comparison_choose_workload(
                    actor=request.user,
                    comparison=comparison,
                    kind=workload["kind"],
                    start_day=workload.get("start"),
                    days=workload["days"],
                    scale=workload["scale"],
                    upload=workload.get("csv", "").encode() or None,
                    mapping=workload.get("mapping"),
                )
            if data["contracts"]:
                overrides: dict[str, dict[str, dict]] = {"share": {}, "workload_class": {}}
                for item in data["contracts"]:
                    target = "share" if "share" in item else "workload_class"
                    fields = {k: v for k, v in item.items() if k not in ("run", target)}
                    overrides[target].setdefault(item["run"], {})[item[target]] = fields
                comparison.refresh_from_db()
                services.comparison_set_contracts(
                    actor=request.user,
                    comparison=comparison,
                    contracts=overrides["share"],
                    class_contracts=overrides["workload_class"],
                )
            if data["run"]:
                # The services stored the edits and the workload on their own copies:
                # run the stored comparison, not this stale copy.
                comparison.refresh_from_db()
                services.comparison_run(actor=request.user, comparison=comparison)
        comparison.refresh_from_db()
        return Response(selectors.comparison_document(comparison), status=status.HTTP_201_CREATED)


class WhatIfDetailApi(ApiView):
    @extend_schema(responses={200: dict})
    def get(self, request, pk: int):
        comparison = get_object_or_404(WhatIfComparison.objects.select_related("author"), pk=pk)
        return Response(selectors.comparison_document(comparison))
