"""Policy as code over the API: export a queue's policy, plan and apply a policy file.

One view per operation, each a thin caller of governance.policy_code. A file's problems
answer 400 in the API's error shape, keyed by the file's field path, each message
starting with its line ("line 12: must be a whole number"); a plan that is out of date
when applied answers 409.
"""

import json

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.authentication import TokenAuthentication
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import TableAccess
from core.api.serializers import ErrorSerializer
from core.errors import InvalidInput
from fleet.models import JobQueue
from governance.policy_code import (
    FORMATS,
    IMPORT_FORMATS,
    UnknownFormat,
    policy_export,
    policy_file_read,
)
from governance.policy_code.plan import REASON_MISSING, policy_apply, policy_plan
from governance.policy_code.report import plan_document
from governance.policy_code.source import MAX_FILE_BYTES

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404)}


class _JsonOnly(DefaultContentNegotiation):
    """`?format=` names the policy file's format here, not a DRF renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class PolicyCodeView(APIView):
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _JsonOnly
    permission_classes = [TableAccess]
    rule_actions = {"read": "policy.view", "write": "policy.edit"}

    def get_authenticate_header(self, request):
        return TokenAuthentication().authenticate_header(request)


class ExportView(PolicyCodeView):
    @extend_schema(
        summary="Export a queue's policy as a file",
        description=(
            "The body is the file itself: `aws-batch` (CreateQuotaShare requests) and "
            "`cloudformation` are JSON, `kueue` and `native` are YAML. What the format cannot "
            "express is listed in the `X-Policy-Warnings` header (a JSON list of sentences)."
        ),
        parameters=[
            OpenApiParameter("format", OpenApiTypes.STR, enum=list(FORMATS), required=True),
        ],
        responses={
            (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT),
            (200, "application/yaml"): OpenApiResponse(OpenApiTypes.STR),
            **ERRORS,
        },
    )
    def get(self, request, pk: int):
        queue = get_object_or_404(JobQueue, pk=pk)
        format = request.query_params.get("format", "")
        if format not in FORMATS:
            raise InvalidInput({"format": [f"must be one of {', '.join(FORMATS)}"]})
        try:
            export = policy_export(format=format, queue=queue)
        except UnknownFormat as error:
            raise InvalidInput({"format": [str(error)]}) from None
        response = HttpResponse(export.content, content_type=f"{export.media_type}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
        # Headers are Latin-1: names in the sentences are escaped.
        response["X-Policy-Warnings"] = json.dumps(list(export.warnings), ensure_ascii=True)
        return response


class PolicyFileSerializer(serializers.Serializer):
    content = serializers.CharField(
        max_length=MAX_FILE_BYTES,
        trim_whitespace=False,
        help_text="The policy file's text.",
    )
    filename = serializers.CharField(
        max_length=200, default="upload", help_text="Named in the history's reason."
    )
    format = serializers.ChoiceField(
        choices=IMPORT_FORMATS,
        required=False,
        help_text="The file's format; recognised from its content when left out.",
    )
    queue = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**31 - 1,
        help_text="Apply a one-queue file to this queue (id), whatever queue it names.",
    )


class ApplySerializer(PolicyFileSerializer):
    reason = serializers.CharField(
        max_length=1000,
        help_text="Why this change is made (required, as for every policy change); the "
        "history adds the file's name.",
        error_messages={"required": REASON_MISSING, "blank": REASON_MISSING},
    )
    versions = serializers.DictField(
        required=False,
        help_text="The `versions` of the plan you reviewed: a change made since is a 409.",
    )


def _read(data: dict):
    target = None
    if "queue" in data:
        queue = JobQueue.objects.filter(pk=data["queue"]).first()
        if queue is None:
            raise InvalidInput({"queue": [f"no queue with id {data['queue']}"]})
        target = queue.name
    return policy_file_read(
        raw=data["content"],
        source=data["filename"],
        format=data.get("format"),
        target_queue=target,
    )


class PlanView(PolicyCodeView):
    @extend_schema(
        summary="Plan a policy file (admins): its diff and impact; changes nothing",
        request=PolicyFileSerializer,
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **ERRORS},
    )
    def post(self, request):
        serializer = PolicyFileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        return Response(plan_document(policy_plan(policy=_read(data))))


class ApplyView(PolicyCodeView):
    @extend_schema(
        summary="Apply a policy file (admins), all or nothing",
        request=ApplySerializer,
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), 409: ErrorSerializer, **ERRORS},
    )
    def post(self, request):
        serializer = ApplySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        result = policy_apply(
            actor=request.user,
            policy=_read(data),
            reason=data["reason"],
            expected_versions=data.get("versions"),
        )
        return Response(
            {
                "plan": plan_document(result.plan),
                "changes": [change.pk for change in result.changes],
                "proposals": [proposal.pk for proposal in result.proposals],
                "sync": result.sync_lines(),
            }
        )


# Included under /api/v1/ by governance.api.urls.
urlpatterns = [
    path("queues/<int:pk>/export/", ExportView.as_view(), name="api-queue-export"),
    path("policy/plan/", PlanView.as_view(), name="api-policy-plan"),
    path("policy/apply/", ApplyView.as_view(), name="api-policy-apply"),
]
