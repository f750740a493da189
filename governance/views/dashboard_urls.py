"""The leadership dashboard (include from governance/urls.py)."""

from django.urls import path

from governance.views import dashboard

urlpatterns = [
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("dashboard/csv/<slug:dataset>/", dashboard.dashboard_csv, name="dashboard-csv"),
    path("dashboard/refresh/", dashboard.dashboard_refresh, name="dashboard-refresh"),
]
