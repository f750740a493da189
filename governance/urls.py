from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from governance.views import system

urlpatterns = [
    path("healthz/", system.healthz, name="healthz"),
    path(
        "accounts/login/",
        login_not_required(auth_views.LoginView.as_view()),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("accounts.urls")),
    path("api/", include("governance.api.urls")),
    path("", include("governance.views.urls")),
    path("", include("governance.views.exception_urls")),
    path("", include("governance.views.dashboard_urls")),
    path("", include("governance.views.whatif_urls")),
    path("", include("scheduler.urls")),
    path("", system.home, name="home"),
]
