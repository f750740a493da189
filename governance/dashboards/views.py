"""The leadership dashboard: the signals of one month, from stored rollups.

Thin views: the figures come from governance.dashboards (rollups.rollups_read reads
the rollups in one query; nothing here scans job events). Filters live in the query
string (`?month=2025-03&queue=4&team=2`); the month defaults to the last full month.
A filter that names nothing known is refused with a message naming it, and the page
shows the default instead.
"""

from __future__ import annotations

import datetime as dt

from django.contrib import messages
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from core import rules
from fleet.models import JobQueue, QuotaShare, Team
from governance.dashboards.csv import DATASETS, csv_filename, csv_response
from governance.dashboards.formulas import DEFINITIONS, MIN_SAMPLE, MONTH_RULE
from governance.dashboards.pack import pack_file, pack_make, pack_schedule, packs_list
from governance.dashboards.page import charts, dashboard_view
from governance.dashboards.rollups import rollups_read, rollups_refresh
from governance.dashboards.selectors.calendar import last_full_month
from governance.dashboards.selectors.reads import rollup_months

YIELDERS_SHOWN = 20


def _month(value: str | None, errors: list[str]) -> dt.date:
    if value:
        try:
            return dt.datetime.strptime(value, "%Y-%m").date()
        except ValueError:
            errors.append("month: expected a month as YYYY-MM, such as 2025-03")
    return last_full_month(timezone.now())


def _pick(raw: str, options: list, name: str, errors: list[str]):
    if not raw:
        return None
    chosen = next((o for o in options if str(o.pk) == raw), None)
    if chosen is None:
        errors.append(f"{name}: no such {name}")
    return chosen


def _filters(request):
    errors: list[str] = []
    month = _month(request.GET.get("month"), errors)
    queues = list(JobQueue.objects.order_by("name").only("id", "name"))
    teams = list(Team.objects.order_by("name").only("id", "name"))
    queue = _pick(request.GET.get("queue", ""), queues, "queue", errors)
    team = _pick(request.GET.get("team", ""), teams, "team", errors)
    # The team picker follows the queue (data-narrow, core/widgets.py); a team with no
    # share in the chosen queue is refused by name, and the queue shown for every team.
    in_queues: dict[int, set[int]] = {}
    for team_id, queue_id in QuotaShare.objects.values_list("team_id", "queue_id"):
        in_queues.setdefault(team_id, set()).add(queue_id)
    for option in teams:
        option.narrow = " ".join(str(pk) for pk in sorted(in_queues.get(option.pk, ())))
    if queue is not None and team is not None and queue.pk not in in_queues.get(team.pk, ()):
        errors.append(f"team: team {team.name} has no share in queue {queue.name}")
        team = None
    return month, queue, team, queues, teams, errors


def _query(month: dt.date, queue, team) -> str:
    params = {"month": f"{month:%Y-%m}"}
    if queue is not None:
        params["queue"] = queue.pk
    if team is not None:
        params["team"] = team.pk
    return urlencode(params)


def _view(month, queue, team) -> dict:
    stored = rollups_read(
        month=month,
        queue_id=queue.pk if queue else None,
        team_id=team.pk if team else None,
    )
    return dashboard_view(stored=stored, month=month, queue_id=queue.pk if queue else None)


def dashboard(request):
    rules.require(request.user, "dashboard.view")
    month, queue, team, queues, teams, errors = _filters(request)
    for error in errors:
        messages.error(request, error)
    view = _view(month, queue, team)
    months = rollup_months()
    if month not in months:
        months = sorted([*months, month], reverse=True)
    query = _query(month, queue, team)
    packs = packs_list()
    csv_urls = {name: f"{reverse('dashboard-csv', args=[name])}?{query}" for name in DATASETS}
    context = {
        **view,
        "months": months,
        "queues": queues,
        "queue": queue,
        "team_options": teams,
        "team": team,
        "query": query,
        "csv_urls": csv_urls,
        "charts": charts(view, csv_urls),
        "cost_groups": [
            {"key": "team", "rows": view["cost"]["teams"]},
            {"key": "share", "rows": view["cost"]["shares"]},
        ],
        "yielders_shown": view["yielders"][:YIELDERS_SHOWN],
        "packs": packs,
        "pack_schedule": pack_schedule(now=timezone.now(), made={p.month for p in packs}),
        "definitions": DEFINITIONS,
        "month_rule": MONTH_RULE,
        "min_sample": MIN_SAMPLE,
    }
    return render(request, "governance/dashboard/dashboard.html", context)


def dashboard_csv(request, dataset: str):
    rules.require(request.user, "dashboard.view")
    if dataset not in DATASETS:
        raise Http404("No such dataset.")
    month, queue, team, _, _, _ = _filters(request)
    view = _view(month, queue, team)
    scope = "-".join(x.name for x in (queue, team) if x is not None) or None
    return csv_response(view["tables"][dataset], csv_filename(dataset, month, scope))


@require_POST
def dashboard_refresh(request):
    """Recompute the month's rollups now (admins; the beat task does it every 15 min)."""
    rules.require(request.user, "dashboard.refresh")
    errors: list[str] = []
    month = _month(request.POST.get("month"), errors)
    if errors:
        messages.error(request, errors[0])
        return redirect(reverse("dashboard"))
    rows = rollups_refresh(month=month)
    messages.success(request, f"Figures of {month:%B %Y} recomputed ({rows} scopes).")
    params = {"month": f"{month:%Y-%m}"}
    for name in ("queue", "team"):
        if request.POST.get(name, "").isdigit():
            params[name] = request.POST[name]
    return redirect(f"{reverse('dashboard')}?{urlencode(params)}")


@require_POST
def pack_make_now(request):
    """Make (or remake) a month's leadership pack now; beat makes last month's on the
    first of each month and emails it."""
    rules.require(request.user, "dashboard.view")
    errors: list[str] = []
    month = _month(request.POST.get("month"), errors)
    if errors:
        messages.error(request, errors[0])
        return redirect(reverse("dashboard"))
    pack_make(month=month)
    messages.success(request, f"The pack of {month:%B %Y} is ready to download below.")
    return redirect(f"{reverse('dashboard')}?{urlencode({'month': f'{month:%Y-%m}'})}#packs-title")


def pack_download(request, month: str, kind: str):
    rules.require(request.user, "dashboard.view")
    try:
        day = dt.datetime.strptime(month, "%Y-%m").date()
    except ValueError:
        raise Http404("No such month.") from None
    found = pack_file(month=day, kind=kind)
    if found is None:
        raise Http404("No pack for this month yet.")
    name, handle, content_type = found
    return FileResponse(handle, as_attachment=True, filename=name, content_type=content_type)
