from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from core import rules
from core.scrape import ScrapeAccess, scrape_access
from fleet.metrics import metrics_exposition
from governance.outbox import outbox_enabled, outbox_messages
from scheduler.metrics import BackgroundCollector


@login_not_required
@require_GET
def healthz(request):
    """For load balancers and docker compose: 503 only when the database is down;
    otherwise 200, "ok" or "degraded" (the scheduler is not ticking, or an instance
    type of a process queue has no live runner), with the scheduler's and runners'
    liveness."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any database failure means unhealthy
        return JsonResponse({"status": "error", "database": str(exc)}, status=503)
    from scheduler.selectors import system_health

    return JsonResponse(system_health())


@login_not_required
@require_GET
def metrics(request):
    """Prometheus's exposition format (the fleet's figures, fleet.metrics, then the
    background work's, scheduler.metrics), for a scraper with the token or from an
    allowed address; 404 while it is off, 403 to anyone else."""
    access = scrape_access(
        authorization=request.headers.get("Authorization", ""),
        remote_addr=request.META.get("REMOTE_ADDR", ""),
    )
    if access is ScrapeAccess.OFF:
        raise Http404("/metrics is off: set METRICS_TOKEN or METRICS_ALLOWED_ADDRESSES.")
    if access is ScrapeAccess.REFUSED:
        return HttpResponse(
            "A scrape token (Authorization: Bearer) or an allowed address is required.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    body, content_type = metrics_exposition(
        accept=request.headers.get("Accept", ""), extra=[BackgroundCollector()]
    )
    return HttpResponse(body, content_type=content_type)


def home(request):
    return redirect("queue-list")


def outbox(request):
    """Admins, in the demo: the notification e-mails the product sent (kept as files)."""
    rules.require(request.user, "outbox.view")
    context = {"enabled": outbox_enabled(), "messages_sent": outbox_messages()}
    return render(request, "governance/outbox.html", context)
