"""The jobs API (/api/v1/jobs/): one view per operation, thin over scheduler.services.

Errors have the project's one shape (governance.api.errors): a service's JobError
becomes a validation error with the same field keys the pages use.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.serializers import ErrorSerializer
from scheduler import permissions, selectors
from scheduler.models import Job
from scheduler.serializers import (
    BulkResultSerializer,
    JobBulkInputSerializer,
    JobEventOutputSerializer,
    JobInputSerializer,
    JobOutputSerializer,
    PriorityInputSerializer,
    job_data_from_input,
)
from scheduler.services.jobs import JobError, job_set_priority, job_terminate, jobs_submit

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404)}


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

    def submit(self, items: list[dict], *, prefix: bool) -> list[Job]:
        data = job_data_from_input(items, prefix=prefix)
        for item in data:
            if not permissions.can_submit_to_share(self.request.user, item.share):
                raise PermissionDenied(f"you may not submit jobs to share {item.share.name}")
        try:
            return jobs_submit(items=data, submitted_by=self.request.user)
        except JobError as error:
            raise ValidationError(error.errors) from None


_FILTERS = [
    OpenApiParameter(name, int, description=f"Only jobs of this {name} (id).")
    for name in ("queue", "share", "team")
] + [OpenApiParameter("state", str, enum=Job.State.values)]


class JobListCreate(generics.GenericAPIView, JobApiView):
    serializer_class = JobOutputSerializer

    @extend_schema(
        summary="List jobs", parameters=_FILTERS, responses=JobOutputSerializer(many=True)
    )
    def get(self, request):
        filters = {}
        for key in ("queue", "share", "team"):
            value = request.query_params.get(key)
            if value:
                if not value.isdigit():
                    raise ValidationError({key: ["must be a whole number (an id)"]})
                filters[key] = int(value)
        state = request.query_params.get("state")
        if state:
            if state not in Job.State.values:
                raise ValidationError({"state": [f"one of {', '.join(Job.State.values)}"]})
            filters["state"] = state
        page = self.paginate_queryset(selectors.job_list(filters=filters))
        return self.get_paginated_response(JobOutputSerializer(page, many=True).data)

    @extend_schema(
        summary="Submit a job (team leads into their teams' shares; admins anywhere)",
        request=JobInputSerializer,
        responses={201: JobOutputSerializer, **ERRORS},
    )
    def post(self, request):
        serializer = JobInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        (job,) = self.submit([serializer.validated_data], prefix=False)
        return Response(
            JobOutputSerializer(selectors.job_detail_queryset().get(pk=job.pk)).data,
            status=status.HTTP_201_CREATED,
        )


class JobBulkCreate(JobApiView):
    @extend_schema(
        summary="Submit many jobs at once (all or none)",
        request=JobBulkInputSerializer,
        responses={201: BulkResultSerializer, **ERRORS},
    )
    def post(self, request):
        serializer = JobBulkInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        jobs = self.submit(serializer.validated_data["jobs"], prefix=True)
        return Response(
            {"count": len(jobs), "ids": [job.pk for job in jobs]}, status=status.HTTP_201_CREATED
        )


class JobDetail(JobApiView):
    @extend_schema(summary="Get a job", responses={200: JobOutputSerializer, **ERRORS})
    def get(self, request, pk: int):
        return Response(JobOutputSerializer(self.job(pk)).data)


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
        try:
            job_set_priority(
                job_id=job.pk, priority=serializer.validated_data["priority"], actor=request.user
            )
        except JobError as error:
            raise ValidationError(error.errors) from None
        return Response(JobOutputSerializer(self.job(pk)).data)


class JobTerminate(JobApiView):
    @extend_schema(
        summary="Terminate a live job", request=None, responses={200: JobOutputSerializer, **ERRORS}
    )
    def post(self, request, pk: int):
        job = self.job(pk, manage=True)
        try:
            job_terminate(job_id=job.pk, actor=request.user)
        except JobError as error:
            raise ValidationError(error.errors) from None
        return Response(JobOutputSerializer(self.job(pk)).data)
