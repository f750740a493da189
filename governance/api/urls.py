"""/api/: the v1 resources, the OpenAPI schema and its interactive docs (assets served locally).

DRF exempts its views from LoginRequiredMiddleware and checks permissions
itself; the schema and docs are for signed-in users too.
"""

from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import IsAuthenticated
from rest_framework.routers import SimpleRouter

from governance.dashboards import api as signals
from governance.policy import api as views
from governance.whatif import api as whatif

router = SimpleRouter()
router.register("v1/queues", views.QueueViewSet, basename="api-queue")
router.register("v1/shares", views.ShareViewSet, basename="api-share")
router.register("v1/teams", views.TeamViewSet, basename="api-team")
router.register("v1/instance-types", views.InstanceTypeViewSet, basename="api-instance-type")
router.register(
    "v1/urgency-definitions", views.UrgencyDefinitionViewSet, basename="api-urgency-definition"
)
router.register("v1/workload-classes", views.WorkloadClassViewSet, basename="api-workload-class")
router.register("v1/policy-changes", views.PolicyChangeViewSet, basename="api-policy-change")

urlpatterns = [
    *router.urls,
    path("v1/", include("governance.policy_code.api")),
    path("v1/signals/", signals.SignalsView.as_view(), name="api-signals"),
    path("v1/what-if/", whatif.WhatIfCreateApi.as_view(), name="api-whatif-list"),
    path("v1/what-if/<int:pk>/", whatif.WhatIfDetailApi.as_view(), name="api-whatif-detail"),
    # Session or token: API clients fetch the schema without a browser login.
    path(
        "schema/",
        SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]),
        name="api-schema",
    ),
    # A page for people: an anonymous visitor is sent to the login page. The split
    # view serves its start-up script as a file, as the Content-Security-Policy requires.
    path(
        "docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
]
