"""The project's URLs plus the what-if ones, for tests run before governance/urls.py
includes governance.views.whatif_urls."""

from django.urls import include, path

urlpatterns = [
    path("", include("governance.views.whatif_urls")),
    path("", include("governance.urls")),
]
