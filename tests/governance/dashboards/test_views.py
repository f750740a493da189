"""The dashboard page, its CSV exports and refresh: who may open them, what they show,
and a fixed number of queries."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.urls import reverse

from governance.dashboards.csv import DATASETS
from governance.dashboards.rollups import rollups_refresh
from governance.models import MonthlyRollup
from tests.governance.dashboards.conftest import load_into_db, scenario_document

MARCH = "2025-03"


@pytest.fixture
def march(db):
    result, _, queue = load_into_db(
        scenario_document("01-walkthrough-borrow-reclaim-priority.json")
    )
    rollups_refresh(month=dt.date(2025, 3, 1))
    return queue


def test_anonymous_is_sent_to_login(client, db):
    response = client.get(reverse("dashboard"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("role", ["team_lead", "exception_owner", "outsider"])
def test_other_roles_are_refused(client, request, role):
    client.force_login(request.getfixturevalue(role))
    assert client.get(reverse("dashboard")).status_code == 403
    assert client.get(reverse("dashboard-csv", args=["kpis"])).status_code == 403


@pytest.mark.parametrize("role", ["leadership", "admin"])
def test_leadership_and_admins_see_the_month(client, request, role, march):
    client.force_login(request.getfixturevalue(role))
    response = client.get(reverse("dashboard"), {"month": MARCH})
    assert response.status_code == 200
    page = response.content.decode()
    assert "March 2025" in page
    for card in response.context["kpis"]:
        assert card["label"] in page
    assert [chart["dataset"] for chart in response.context["charts"]] == [
        "turnaround",
        "lender-wait",
        "preemptions",
        "recovery",
        "policy",
    ]
    assert page.count("data-plotly-figure") == 5
    assert "vendor/plotly.min.js" in page


def test_default_month_is_the_last_full_month(client, leadership, march):
    client.force_login(leadership)
    response = client.get(reverse("dashboard"))
    today = dt.date.today()
    assert response.context["month"] == (today.replace(day=1) - dt.timedelta(days=1)).replace(day=1)
    assert "No figures for this month" in response.content.decode()


def test_kpi_change_is_coloured_by_whether_it_is_good(client, leadership, march):
    # February had nothing: every change is unknown; fake a worse previous month.
    data = MonthlyRollup.objects.get(month=dt.date(2025, 3, 1), scope="all").data
    worse = {**data, "preemptions_total": data["preemptions_total"] + 5, "goodput": 0.5}
    MonthlyRollup.objects.create(
        month=dt.date(2025, 2, 1), scope="all", data=worse, computed_at=dt.datetime.now(dt.UTC)
    )
    client.force_login(leadership)
    cards = {
        c["key"]: c for c in client.get(reverse("dashboard"), {"month": MARCH}).context["kpis"]
    }
    assert cards["preemptions"]["change"] == {"arrow": "▼", "text": "down 5", "tone": "good"}
    assert cards["goodput"]["change"]["arrow"] == "▲"
    assert cards["goodput"]["change"]["tone"] == "good"
    assert cards["policy_edits"]["change"]["tone"] == "flat"


def test_queue_filter(client, leadership, march):
    client.force_login(leadership)
    response = client.get(reverse("dashboard"), {"month": MARCH, "queue": march.pk})
    assert response.context["queue"] == march
    assert response.context["current"]["queue_id"] == march.pk


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_dataset_exports_csv(client, leadership, march, dataset):
    client.force_login(leadership)
    response = client.get(reverse("dashboard-csv", args=[dataset]), {"month": MARCH})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert f"signals-2025-03-{dataset}.csv" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert len(rows) >= (1 if dataset == "yielders" else 2)  # no yielder in this scenario


def test_recovery_csv_holds_the_funnel(client, leadership, march):
    client.force_login(leadership)
    response = client.get(reverse("dashboard-csv", args=["recovery"]), {"month": MARCH})
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert rows[1:4] == [["Preempted", "2"], ["Resumed", "2"], ["Completed", "2"]]


def test_unknown_dataset_is_404(client, leadership, db):
    client.force_login(leadership)
    assert client.get(reverse("dashboard-csv", args=["nope"])).status_code == 404


def test_admins_refresh_on_demand_leadership_cannot(client, admin, leadership, march):
    MonthlyRollup.objects.all().delete()
    client.force_login(leadership)
    assert client.post(reverse("dashboard-refresh"), {"month": MARCH}).status_code == 403
    client.force_login(admin)
    response = client.post(reverse("dashboard-refresh"), {"month": MARCH})
    assert response.status_code == 302
    assert MonthlyRollup.objects.filter(month=dt.date(2025, 3, 1), scope="all").exists()


def test_the_page_reads_rollups_in_a_fixed_number_of_queries(
    client, leadership, march, django_assert_max_num_queries
):
    """Session, user, groups, queues, rollups, months: whatever the volume of events."""
    client.force_login(leadership)
    client.get(reverse("dashboard"), {"month": MARCH})
    with django_assert_max_num_queries(8) as captured:
        client.get(reverse("dashboard"), {"month": MARCH})
    assert not any("scheduler_jobevent" in q["sql"] for q in captured.captured_queries)
    # More jobs and events, the same queries.
    load_into_db(scenario_document("25-restart-overhead-and-checkpoints.json"), queue_name="more")
    rollups_refresh(month=dt.date(2025, 3, 1))
    with django_assert_max_num_queries(len(captured.captured_queries)):
        client.get(reverse("dashboard"), {"month": MARCH})
