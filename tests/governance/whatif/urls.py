"""The project's URLs plus the what-if ones, for tests run before governance/urls.py
includes governance.whatif.urls."""

from django.urls import include, path

urlpatterns = [
    path("", include("governance.whatif.urls")),
    path("", include("config.urls")),
]
