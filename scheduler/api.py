"""The jobs API (/api/v1/jobs/) and the job definitions API (/api/v1/job-definitions/),
thin over scheduler.services.

Errors have the project's one shape (core.api.errors, which maps the services'
domain errors): a JobError or DefinitionError is a 400 with the same field keys the
pages use; a client token used for another body (TokenConflict), or a revision made on
a stale one (RevisionConflict), is a 409 in the same shape with the ids of what it
conflicts with.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, generics, status
from rest_framework.authentication import TokenAuthentication
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from core import rules
from core.api.base import BaseApiViewSet, FilteredQuery
from core.api.pagination import CountedApart
from core.api.serializers import ErrorSerializer
from fleet.models import Job, JobDefinition, JobQueue
from scheduler import permissions, selectors
from scheduler.filters import QUEUE_RULE, JobDefinitionFilter, JobFilter
from scheduler.serializers import (
    BulkResultSerializer,
    JobBulkInputSerializer,
    JobDefinitionCreateSerializer,
    JobDefinitionOutputSerializer,
    JobDefinitionReviseSerializer,
    JobEventOutputSerializer,
    JobInputSerializer,
    JobOutputSerializer,
    PendingListSerializer,
    PriorityInputSerializer,
    RetireSerializer,
    RevisionConflictSerializer,
    RevisionOutputSerializer,
    SubmissionEstimateSerializer,
    TokenConflictSerializer,
    definition_data_from_input,
    job_data_from_input,
)
from scheduler.services.estimates.reads import queue_estimates, submission_estimate
from scheduler.services.job_definitions import (
    definition_data_of,
    definition_register,
    definition_retire,
    definition_revise,
)
from scheduler.services.jobs import (
    Submitted,
    job_set_priority,
    job_terminate,
    jobs_submit_outcomes,
)

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404)}
SUBMIT_ERRORS = {**ERRORS, 409: TokenConflictSerializer}


class JobAccess(BasePermission):
    """Admins and team leads read jobs; writes are checked per share and per job."""

    def has_permission(self, request, view):
        return permissions.can_view_jobs(request.user)


class JobApiView(APIView):
    permission_classes = [JobAccess]

    def get_authenticate_header(self, request):
        return TokenAuthentication().authenticate_header(request)

    def job(self, pk: int, *, manage: bool = False) -> Job:
        return permissions.get_job_for_user(
            self.request.user, selectors.job_detail_queryset(), pk, manage=manage
        )

    def job_output(self, pk: int) -> dict:
        """The job as the API shows it, if the user may see it (404 otherwise): read as
        one row of the columns the output needs, not as a model with its relations."""
        rows = Job.objects.values(*JobOutputSerializer.columns())
        return JobOutputSerializer(permissions.get_job_for_user(self.request.user, rows, pk)).data

    def submit(self, items: list[dict], *, prefix: bool) -> list[Submitted]:
        """The outcome per item; raises TokenConflict for a token used with another body."""
        data = job_data_from_input(items, prefix=prefix)
        for item in data:
            if not permissions.can_submit_to_share(self.request.user, item.share):
                raise PermissionDenied(f"you may not submit jobs to share {item.share.name}")
        return jobs_submit_outcomes(items=data, submitted_by=self.request.user)


class JobListCreate(FilteredQuery, generics.GenericAPIView, JobApiView):
    serializer_class = JobOutputSerializer
    filterset_class = JobFilter
    queryset = Job.objects.none()

    @extend_schema(
        summary="List jobs",
        description="Newest first. `search` finds jobs by name, id, definition or "
        "submitter; it combines with the other filters. " + QUEUE_RULE,
        responses=JobOutputSerializer(many=True),
    )
    def get(self, request):
        # Rows, not models: a page of 50 jobs with their queue, share, team, instance
        # type and definition would build 350 model instances only to read names.
        jobs = selectors.job_list(filters=self.query(), user=request.user)
        rows = jobs.values(*JobOutputSerializer.columns())
        page = self.paginate_queryset(CountedApart(rows, counted=jobs))
        return self.get_paginated_response(JobOutputSerializer(page, many=True).data)

    @extend_schema(
        summary="Submit a job (team leads into their teams' shares; admins anywhere)",
        description="The job runs a registered job definition with the given parameter "
        "values; a free-form command is refused. With a client_token, a retry returns the "
        "original job (200) instead of creating another.",
        request=JobInputSerializer,
        responses={201: JobOutputSerializer, 200: JobOutputSerializer, **SUBMIT_ERRORS},
    )
    def post(self, request):
        serializer = JobInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        (outcome,) = self.submit([serializer.validated_data], prefix=False)
        # A job just created is answered as it was written, with the share, queue, type
        # and definition it was made from: reading it back would be one more query,
        # with every join of the output, for each submission.
        return Response(
            JobOutputSerializer(outcome.job).data
            if outcome.created
            else self.job_output(outcome.job.pk),
            status=status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK,
        )


class JobBulkCreate(JobApiView):
    @extend_schema(
        summary="Submit many jobs at once (all or none)",
        description="Each item as for one job, client_token included: an item whose token "
        "made a job already (same body) returns that job; 201 when any job was created, "
        "200 when none was.",
        request=JobBulkInputSerializer,
        responses={201: BulkResultSerializer, 200: BulkResultSerializer, **SUBMIT_ERRORS},
    )
    def post(self, request):
        serializer = JobBulkInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        outcomes = self.submit(serializer.validated_data["jobs"], prefix=True)
        created = [outcome.created for outcome in outcomes]
        return Response(
            {
                "count": len(outcomes),
                "ids": [outcome.job.pk for outcome in outcomes],
                "created": created,
            },
            status=status.HTTP_201_CREATED if any(created) else status.HTTP_200_OK,
        )


class JobDetail(JobApiView):
    @extend_schema(summary="Get a job", responses={200: JobOutputSerializer, **ERRORS})
    def get(self, request, pk: int):
        return Response(self.job_output(pk))


class JobEvents(JobApiView):
    @extend_schema(
        summary="A job's events, oldest first", responses=JobEventOutputSerializer(many=True)
    )
    def get(self, request, pk: int):
        job = self.job(pk)
        return Response(JobEventOutputSerializer(job.events.order_by("at", "pk"), many=True).data)


class JobPriority(JobApiView):
    @extend_schema(
        summary="Change a live job's priority",
        request=PriorityInputSerializer,
        responses={200: JobOutputSerializer, **ERRORS},
    )
    def post(self, request, pk: int):
        job = self.job(pk, manage=True)
        serializer = PriorityInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job_set_priority(
            job_id=job.pk, priority=serializer.validated_data["priority"], actor=request.user
        )
        return Response(self.job_output(pk))


class JobTerminate(JobApiView):
    @extend_schema(
        summary="Terminate a live job", request=None, responses={200: JobOutputSerializer, **ERRORS}
    )
    def post(self, request, pk: int):
        job = self.job(pk, manage=True)
        job_terminate(job_id=job.pk, actor=request.user)
        return Response(self.job_output(pk))


# Why jobs wait and when they start.


class PendingAccess(BasePermission):
    def has_permission(self, request, view):
        why = rules.refusal(request.user, "job.pending.view")
        if why is not None:
            self.message = why
        return why is None


class QueuePending(generics.GenericAPIView):
    """The queue's waiting jobs in dispatch order (as Kueue's visibility API)."""

    permission_classes = [PendingAccess]
    serializer_class = PendingListSerializer

    def get_authenticate_header(self, request):
        return TokenAuthentication().authenticate_header(request)

    @extend_schema(
        summary="A queue's waiting jobs in dispatch order: position, reason, blocker, estimate",
        description="Every RUNNABLE job of the queue in the order it is expected to start "
        "(a forward simulation of the queue's live state, durations corrected by history), "
        "with its place in its share's queue and in the borrowing order, the engine's reason, "
        "what holds it in plain words, and its estimated start range (p50-p90). Paginated. "
        "The forecast is made in the background after the queue changes: `current` false "
        "means these are the last estimates, as of `estimated_at`, and new ones are coming.",
        parameters=[OpenApiParameter("page", int, description="Page number (50 per page).")],
        responses={200: PendingListSerializer, **ERRORS},
    )
    def get(self, request, pk: int):
        queue = JobQueue.objects.filter(pk=pk).first()
        if queue is None:
            raise exceptions.NotFound("no such queue")
        result = queue_estimates(queue)
        page = self.paginate_queryset(result.entries)
        body = self.get_paginated_response([]).data
        body = {
            "count": body["count"],
            "next": body["next"],
            "previous": body["previous"],
            "queue": queue.pk,
            "clock": result.clock,
            "estimated_at": result.estimated_at,
            "current": result.current,
            "results": page,
        }
        return Response(PendingListSerializer(body).data)


class JobEstimate(JobApiView):
    @extend_schema(
        summary="If you submit this now: estimated start, within limit or borrowing",
        description="The body of a job submission (POST /api/v1/jobs/). Nothing is stored: "
        "the answer is when the job would start (p50-p90), where it would stand in its "
        "share's queue, what would hold it, whether it would start within its share's "
        "limit or borrowing, and which shares could then reclaim it. A submission the "
        "service would refuse is refused here with the same field errors. It reads the "
        "queue's forecast as of `estimated_at` (`current` false: the queue changed since).",
        request=JobInputSerializer,
        responses={200: SubmissionEstimateSerializer, **ERRORS},
    )
    def post(self, request):
        serializer = JobInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        (data,) = job_data_from_input([serializer.validated_data], prefix=False)
        why = rules.refusal(request.user, "job.estimate", data.share)
        if why is not None:
            raise PermissionDenied(why)
        answer = submission_estimate(data=data)
        return Response(SubmissionEstimateSerializer(answer).data)


# Job definitions.


class DefinitionAccess(BasePermission):
    """Who may submit reads the definitions; only who may manage them writes."""

    def has_permission(self, request, view):
        action_name = "job.submit" if request.method in SAFE_METHODS else "job_definition.manage"
        why = rules.refusal(request.user, action_name)
        if why is not None:
            self.message = why
        return why is None


_DEFINITION_OK = {200: JobDefinitionOutputSerializer, **ERRORS}


@extend_schema_view(
    list=extend_schema(
        summary="List job definitions",
        responses=JobDefinitionOutputSerializer(many=True),
    ),
    retrieve=extend_schema(summary="Get a job definition", responses=_DEFINITION_OK),
    create=extend_schema(
        summary="Register a job definition (admins)",
        request=JobDefinitionCreateSerializer,
        responses={201: JobDefinitionOutputSerializer, **ERRORS},
    ),
)
class JobDefinitionViewSet(BaseApiViewSet):
    permission_classes = [DefinitionAccess]
    serializer_class = JobDefinitionOutputSerializer
    queryset = JobDefinition.objects.none()
    filterset_class = JobDefinitionFilter

    def get_serializer_context(self):
        show = rules.allowed(self.request.user, "job_definition.manage")
        return {**super().get_serializer_context(), "show_environment": show}

    def _get(self, pk) -> JobDefinition:
        try:
            return selectors.definition_get(pk=int(pk))
        except (JobDefinition.DoesNotExist, ValueError):
            raise exceptions.NotFound("no such job definition") from None

    def _detail(self, pk, *, status_code=status.HTTP_200_OK) -> Response:
        output = JobDefinitionOutputSerializer(self._get(pk), context=self.get_serializer_context())
        return Response(output.data, status=status_code)

    def list(self, request):
        query = self.query()
        definitions = selectors.definition_list(
            queue_id=query["queue"],
            retired=None if not query["state"] else query["state"] == "retired",
        )
        page = selectors.with_latest(self.paginate_queryset(definitions))
        output = JobDefinitionOutputSerializer(
            page, many=True, context=self.get_serializer_context()
        )
        return self.get_paginated_response(output.data)

    def retrieve(self, request, pk=None):
        return self._detail(pk)

    def create(self, request):
        values = self.parse(JobDefinitionCreateSerializer)
        data = definition_data_from_input(values)
        definition = definition_register(
            actor=request.user,
            name=values["name"],
            description=values["description"],
            data=data,
            reason=values["reason"],
        )
        return self._detail(definition.pk, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        methods=["GET"],
        summary="A definition's revisions, newest first (its history)",
        request=None,
        responses={200: RevisionOutputSerializer(many=True), **ERRORS},
    )
    @extend_schema(
        methods=["POST"],
        summary="Revise a definition (admins): a new revision on top of base_revision",
        description="Fields left out keep the latest revision's values; reason is required.",
        request=JobDefinitionReviseSerializer,
        responses={201: JobDefinitionOutputSerializer, 409: RevisionConflictSerializer, **ERRORS},
    )
    @action(detail=True, methods=["get", "post"])
    def revisions(self, request, pk=None):
        definition = self._get(pk)
        if request.method == "GET":
            revisions = selectors.definition_revisions(definition)
            return Response(
                RevisionOutputSerializer(
                    revisions, many=True, context=self.get_serializer_context()
                ).data
            )
        values = self.parse(JobDefinitionReviseSerializer)
        data = definition_data_from_input(values, base=definition_data_of(definition.latest))
        definition_revise(
            actor=request.user,
            definition_id=definition.pk,
            base_revision=values["base_revision"],
            data=data,
            reason=values["reason"],
            description=values.get("description"),
        )
        return self._detail(definition.pk, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Retire a definition (admins): it refuses new jobs; running ones go on",
        request=RetireSerializer,
        responses=_DEFINITION_OK,
    )
    @action(detail=True, methods=["post"])
    def retire(self, request, pk=None):
        definition = self._get(pk)
        values = self.parse(RetireSerializer)
        definition_retire(actor=request.user, definition_id=definition.pk, reason=values["reason"])
        return self._detail(definition.pk)
