"""The project's URLs plus the dashboard's, for tests run before governance/urls.py
includes governance.views.dashboard_urls."""

from django.urls import include, path

urlpatterns = [
    path("", include("governance.views.dashboard_urls")),
    path("", include("governance.urls")),
]
