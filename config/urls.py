from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path, re_path

from core.api import errors as api_errors
from governance import system

urlpatterns = [
    path("healthz/", system.healthz, name="healthz"),
    # Prometheus's default path, no trailing slash.
    path("metrics", system.metrics, name="metrics"),
    path(
        "accounts/login/",
        login_not_required(auth_views.LoginView.as_view()),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("accounts.urls")),
    path("api/", include("governance.api.urls")),
    path("", include("governance.urls")),
    path("", include("governance.exceptions.urls")),
    path("", include("governance.dashboards.urls")),
    path("", include("governance.whatif.urls")),
    path("", include("governance.directory.urls")),
    path("", include("scheduler.urls")),
    path("", system.home, name="home"),
    # Last: an /api/ path that no operation above matched is a JSON 404, not a page.
    re_path(r"^api/", api_errors.not_found, name="api-not-found"),
]
handler500 = "core.api.errors.server_error"
