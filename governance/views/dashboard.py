"""The leadership dashboard: the signals of one month, from stored rollups.

Thin views: the figures come from governance.dashboards (page.dashboard_view reads
the rollups in one query; nothing here scans job events). Filters live in the query
string (`?month=2025-03&queue=4`); the month defaults to the last full month.
"""

from __future__ import annotations

import datetime as dt

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from governance import permissions
from governance.dashboards.csv import DATASETS, csv_filename, csv_response
from governance.dashboards.page import charts, dashboard_view
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors import last_full_month, rollup_months
from governance.models import JobQueue

YIELDERS_SHOWN = 20


def _require_viewer(user) -> None:
    if not permissions.has_role(user, permissions.ADMINS, permissions.LEADERSHIP):
        raise PermissionDenied("The dashboard is for leadership and platform admins.")


def _month(value: str | None) -> dt.date:
    if value:
        try:
            return dt.datetime.strptime(value, "%Y-%m").date()
        except ValueError:
            pass
    return last_full_month(timezone.now())


def _filters(request) -> tuple[dt.date, JobQueue | None, list[JobQueue]]:
    month = _month(request.GET.get("month"))
    queues = list(JobQueue.objects.order_by("name").only("id", "name"))
    queue = None
    raw = request.GET.get("queue", "")
    if raw.isdigit():
        queue = next((q for q in queues if q.pk == int(raw)), None)
    return month, queue, queues


def _query(month: dt.date, queue: JobQueue | None) -> str:
    params = {"month": f"{month:%Y-%m}"}
    if queue is not None:
        params["queue"] = queue.pk
    return urlencode(params)


def dashboard(request):
    _require_viewer(request.user)
    month, queue, queues = _filters(request)
    view = dashboard_view(month=month, queue_id=queue.pk if queue else None)
    months = rollup_months()
    if month not in months:
        months = sorted([*months, month], reverse=True)
    query = _query(month, queue)
    csv_urls = {name: f"{reverse('dashboard-csv', args=[name])}?{query}" for name in DATASETS}
    context = {
        **view,
        "months": months,
        "queues": queues,
        "queue": queue,
        "query": query,
        "can_refresh": permissions.is_admin(request.user),
        "csv_urls": csv_urls,
        "charts": charts(view, csv_urls),
        "yielders_shown": view["yielders"][:YIELDERS_SHOWN],
    }
    return render(request, "governance/dashboard/dashboard.html", context)


def dashboard_csv(request, dataset: str):
    _require_viewer(request.user)
    if dataset not in DATASETS:
        raise Http404("No such dataset.")
    month, queue, _ = _filters(request)
    view = dashboard_view(month=month, queue_id=queue.pk if queue else None)
    filename = csv_filename(dataset, month, queue.name if queue else None)
    return csv_response(view["tables"][dataset], filename)


@require_POST
def dashboard_refresh(request):
    """Recompute the month's rollups now (admins; the beat task does it every 15 min)."""
    if not permissions.is_admin(request.user):
        raise PermissionDenied("Only platform admins refresh the figures.")
    month = _month(request.POST.get("month"))
    rows = rollups_refresh(month=month)
    messages.success(request, f"Figures of {month:%B %Y} recomputed ({rows} scopes).")
    params = {"month": f"{month:%Y-%m}"}
    if request.POST.get("queue", "").isdigit():
        params["queue"] = request.POST["queue"]
    return redirect(f"{reverse('dashboard')}?{urlencode(params)}")
