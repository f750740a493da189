"""The project's URLs plus the dashboard's, for tests run before governance/urls.py
includes governance.dashboards.urls."""

from django.urls import include, path

urlpatterns = [
    path("", include("governance.dashboards.urls")),
    path("", include("config.urls")),
]
