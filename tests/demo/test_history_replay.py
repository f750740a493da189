"""The demo's months of history: the Philly trace replayed onto the demo queue."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from demo.history import HISTORY_PREFIX, seed_history
from demo.organisation import seed_demo
from fleet.models import Job, JobEvent
from governance.dashboards.selectors.reads import dashboard_rollups
from governance.models import ExceptionRequest, MonthlyRollup, PolicyChange

END = dt.datetime(2025, 6, 15, tzinfo=dt.UTC)


@pytest.mark.django_db
def test_seed_history_writes_three_months_once(client):
    users = seed_demo(password="pw-for-tests-1")
    summary = seed_history(months=3, end=END)
    assert summary.months == [dt.date(2025, 3, 1), dt.date(2025, 4, 1), dt.date(2025, 5, 1)]
    assert summary.jobs > 50_000
    jobs = Job.objects.filter(name__startswith=HISTORY_PREFIX)
    assert jobs.count() == summary.jobs
    # Nothing replayed is left for the live scheduler, nothing is in the future.
    assert not jobs.filter(state__in=Job.LIVE_STATES).exists()
    replayed = JobEvent.objects.filter(job__name__startswith=HISTORY_PREFIX)
    assert not replayed.filter(at__gte=dt.datetime(2025, 6, 1, tzinfo=dt.UTC)).exists()
    assert JobEvent.objects.filter(type="PREEMPTED", cause="reclaim").exists()
    assert JobEvent.objects.filter(type="PREEMPTED", cause="capacity_change").exists()
    assert ExceptionRequest.objects.filter(state="DENIED").exists()
    assert PolicyChange.objects.filter(cause="exception", created_at__lt=END).exists()
    for month in summary.months:
        data = dashboard_rollups(month=month)["current"]
        assert data["jobs_ended"] > 1000
        assert data["preemptions_total"] > 0
        assert data["policy_edits"] > 0
        assert data["exceptions"]["filed"] > 0
    rows = MonthlyRollup.objects.count()

    # The seeded prices cost the replayed months: the dashboard's cost table has figures
    # on the first start (philly.gpu at 2.20 USD per instance-hour, one GPU each).
    client.force_login(users["leader"])
    page = client.get(reverse("dashboard"), {"month": summary.months[-1].strftime("%Y-%m")})
    assert "philly.gpu 2.2000 USD" in page.content.decode()
    teams = {row["name"]: row for row in page.context["cost"]["teams"]}
    busiest = teams["vc-ee9e8c"]
    assert busiest["cost"]["within_limit"] > 0
    assert busiest["cost"]["within_limit"] == pytest.approx(
        busiest["gpu_hours"]["within_limit"] * 2.2, rel=1e-6
    )

    again = seed_history(months=3, end=END)
    assert again.skipped
    assert Job.objects.filter(name__startswith=HISTORY_PREFIX).count() == summary.jobs
    assert MonthlyRollup.objects.count() == rows
