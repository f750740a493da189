"""The leadership dashboard (include from governance/urls.py)."""

from django.urls import path, re_path

from governance.dashboards import views as dashboard

urlpatterns = [
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("dashboard/csv/<slug:dataset>/", dashboard.dashboard_csv, name="dashboard-csv"),
    path("dashboard/refresh/", dashboard.dashboard_refresh, name="dashboard-refresh"),
    path("dashboard/packs/make/", dashboard.pack_make_now, name="dashboard-pack-make"),
    re_path(
        r"^dashboard/packs/(?P<month>[0-9]{4}-[0-9]{2})/(?P<kind>pdf|csv)/$",
        dashboard.pack_download,
        name="dashboard-pack",
    ),
]
