"""The job pages, the job definition pages, and their API (/api/v1/jobs/...,
/api/v1/job-definitions/...)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from scheduler import api, runner_views, views

router = SimpleRouter()
router.register("api/v1/job-definitions", api.JobDefinitionViewSet, basename="api-job-definition")

urlpatterns = [
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/new/", views.job_create, name="job-create"),
    path("jobs/decisions/", views.job_decisions, name="job-decisions"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path(
        "jobs/<int:pk>/attempts/<int:attempt>/log/",
        views.job_log_download,
        name="job-log-download",
    ),
    path("jobs/<int:pk>/priority/", views.job_priority, name="job-priority"),
    path("jobs/<int:pk>/terminate/", views.job_terminate, name="job-terminate"),
    path("jobs/<int:pk>/decision/", views.job_decision, name="job-decision"),
    path("jobs/queues/<int:pk>/live/", views.queue_live, name="queue-live"),
    path("jobs/runners/", runner_views.runner_list, name="runner-list"),
    path("jobs/definitions/", views.definition_list, name="definition-list"),
    path("jobs/definitions/new/", views.definition_create, name="definition-create"),
    path("jobs/definitions/<int:pk>/", views.definition_detail, name="definition-detail"),
    path("jobs/definitions/<int:pk>/revise/", views.definition_revise, name="definition-revise"),
    path("jobs/definitions/<int:pk>/retire/", views.definition_retire, name="definition-retire"),
    path("api/v1/jobs/", api.JobListCreate.as_view(), name="api-job-list"),
    path("api/v1/jobs/bulk/", api.JobBulkCreate.as_view(), name="api-job-bulk"),
    path("api/v1/jobs/estimate/", api.JobEstimate.as_view(), name="api-job-estimate"),
    path("api/v1/queues/<int:pk>/pending/", api.QueuePending.as_view(), name="api-queue-pending"),
    path("api/v1/jobs/<int:pk>/", api.JobDetail.as_view(), name="api-job-detail"),
    path("api/v1/jobs/<int:pk>/events/", api.JobEvents.as_view(), name="api-job-events"),
    path("api/v1/jobs/<int:pk>/priority/", api.JobPriority.as_view(), name="api-job-priority"),
    path("api/v1/jobs/<int:pk>/terminate/", api.JobTerminate.as_view(), name="api-job-terminate"),
    *router.urls,
]
