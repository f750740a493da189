from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path, re_path

from core.api import errors as api_errors
from governance import as_data, system
from governance.directory import oidc

urlpatterns = [
    path("healthz/", system.healthz, name="healthz"),
    # Prometheus's default path, no trailing slash.
    path("metrics", system.metrics, name="metrics"),
    path(
        "accounts/login/",
        login_not_required(
            # The "Sign in with <provider>" button, while OpenID Connect is on.
            auth_views.LoginView.as_view(extra_context={"oidc_provider_name": oidc.provider_name})
        ),
        name="login",
    ),
    # Django's logout, then the OpenID Connect provider's when it started the session.
    path("accounts/logout/", oidc.logout_view, name="logout"),
    # OpenID Connect login (404 while OIDC_CLIENT_ID is unset).
    path("oidc/authenticate/", oidc.authenticate_view, name="oidc_authentication_init"),
    path("oidc/callback/", oidc.callback_view, name="oidc_authentication_callback"),
    path("", include("accounts.urls")),
    path("api/", include("governance.api.urls")),
    # One object as the API shows it, for the "View as JSON / YAML" of its page.
    path("data/<slug:kind>/<int:pk>/", as_data.object_data, name="as-data"),
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
