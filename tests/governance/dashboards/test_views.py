"""The dashboard page, its CSV exports and refresh: who may open them, what they show,
and a fixed number of queries."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re

import pytest
from django.urls import reverse

from governance.dashboards.csv import DATASETS
from governance.dashboards.rollups import rollups_refresh, rollups_refresh_stale
from governance.dashboards.selectors.signals import SIGNALS_VERSION
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
        "capacity",
        "turnaround",
        "waiting",
        "reclaim",
        "stops",
        "lost",
        "recovery",
        "policy",
        "trend",
    ]
    assert page.count("data-plotly-figure") == 9
    assert re.search(r"vendor/plotly\.min(\.[0-9a-f]+)?\.js", page)
    # The month rule and every figure's n are on the page.
    assert "counts in the month in which it was settled" in page
    assert page.count("n = ") >= 11


def test_default_month_is_the_last_full_month(client, leadership, march):
    client.force_login(leadership)
    response = client.get(reverse("dashboard"))
    today = dt.date.today()
    assert response.context["month"] == (today.replace(day=1) - dt.timedelta(days=1)).replace(day=1)
    assert "No figures for this month" in response.content.decode()


def _whole(data: dict) -> dict:
    """The figures as a whole month's (the fixture's March starts on the 3rd)."""
    return {**data["coverage"], "partial": False}


def _march_whole(**changes) -> dict:
    rows = MonthlyRollup.objects.filter(month=dt.date(2025, 3, 1), scope="all")
    data = rows.get().data
    rows.update(data={**data, "coverage": _whole(data), **changes})
    return rows.get().data


def _previous_month_from(data: dict, **changes) -> None:
    MonthlyRollup.objects.create(
        month=dt.date(2025, 2, 1),
        scope="all",
        data={**data, "coverage": _whole(data), **changes},
        version=SIGNALS_VERSION,
        computed_at=dt.datetime.now(dt.UTC),
    )


def _cards(client):
    response = client.get(reverse("dashboard"), {"month": MARCH})
    return {card["key"]: card for card in response.context["kpis"]}, response.content.decode()


def test_a_change_on_a_small_sample_has_no_arrow_and_no_verdict(client, leadership, march):
    # March holds 4 finished jobs: too few for a median to say better or worse.
    data = MonthlyRollup.objects.get(month=dt.date(2025, 3, 1), scope="all").data
    _previous_month_from(data, turnaround_s={**data["turnaround_s"], "p50": 9000})
    client.force_login(leadership)
    cards, page = _cards(client)
    change = cards["turnaround_p50"]["change"]
    assert change["arrow"] == "" and change["tone"] == "flat" and change["word"] == ""
    assert "too few to compare (n = 4, under 30)" in change["text"]
    assert "(better)" not in page and "(worse)" not in page


def test_a_change_on_enough_observations_is_called_better_or_worse(client, leadership, march):
    data = MonthlyRollup.objects.get(month=dt.date(2025, 3, 1), scope="all").data
    many = {**data["turnaround_s"], "n": 40}
    _march_whole(turnaround_s=many, goodput=0.9, runs=50)
    _previous_month_from(
        data, turnaround_s={**many, "p50": many["p50"] + 600}, goodput=0.95, runs=50
    )
    client.force_login(leadership)
    cards, page = _cards(client)
    assert cards["turnaround_p50"]["change"] == {
        "arrow": "▼",
        "text": "down 10 m 00 s",
        "tone": "good",
        "word": "better",
    }
    assert cards["goodput"]["change"]["word"] == "worse"
    assert "(better)" in page and "(worse)" in page


def test_figures_without_a_direction_never_say_better_or_worse(client, leadership, march):
    data = _march_whole()
    _previous_month_from(
        data,
        runs=500,
        exceptions={**data["exceptions"], "approved": 7},
        policy_edits=9,
        preemptions_per_1000=1.0,
    )
    client.force_login(leadership)
    cards, _ = _cards(client)
    for key in ("exceptions_approved", "policy_edits", "preemptions_per_1000"):
        assert cards[key]["change"]["tone"] == "flat"
        assert cards[key]["change"]["arrow"] == ""
        assert cards[key]["change"]["text"].startswith(("up", "down"))


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
    # Header, units, then rows (no yielder in this scenario).
    assert len(rows) >= (2 if dataset == "yielders" else 3)
    assert len(rows[1]) == len(rows[0])


def test_recovery_csv_holds_the_funnel(client, leadership, march):
    client.force_login(leadership)
    response = client.get(reverse("dashboard-csv", args=["recovery"]), {"month": MARCH})
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert rows[1] == ["", "count"]
    assert rows[2:5] == [["Preempted", "2"], ["Resumed", "2"], ["Completed", "2"]]


def test_key_figures_csv_holds_raw_values_in_base_units(client, leadership, march):
    client.force_login(leadership)
    response = client.get(reverse("dashboard-csv", args=["kpis"]), {"month": MARCH})
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    by_label = {row[0]: row for row in rows[2:]}
    # Turnaround 3800 s (not "1 h 03 m"), its unit and its n.
    assert by_label["Median turnaround"][1:4] == ["3800", "seconds", "4"]
    assert by_label["Entitlement honoured"][1:4] == ["1.0", "fraction", "2"]


def test_team_picker_shows_one_team(client, leadership, march):
    from fleet.models import Team

    team = Team.objects.get(name__endswith="-qs2")
    client.force_login(leadership)
    response = client.get(reverse("dashboard"), {"month": MARCH, "team": team.pk})
    assert response.context["team"] == team
    assert response.context["current"]["team_id"] == team.pk
    assert [row["name"] for row in response.context["teams"]] == [team.name]
    assert {share["share_name"] for share in response.context["shares"]} == {"qs2"}


def test_unknown_filters_are_named_and_the_default_shown(client, leadership, march):
    client.force_login(leadership)
    response = client.get(reverse("dashboard"), {"month": "2025-13", "queue": "999999"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "month: expected a month as YYYY-MM" in page
    assert "queue: no such queue" in page
    assert response.context["queue"] is None


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
    """Session, user, groups, queues, the teams' queues (the team picker follows the
    queue), rollups, months: whatever the volume of events."""
    client.force_login(leadership)
    client.get(reverse("dashboard"), {"month": MARCH})
    with django_assert_max_num_queries(9) as captured:
        client.get(reverse("dashboard"), {"month": MARCH})
    assert not any("scheduler_jobevent" in q["sql"] for q in captured.captured_queries)
    # More jobs and events, the same queries.
    load_into_db(scenario_document("25-restart-overhead-and-checkpoints.json"), queue_name="more")
    rollups_refresh(month=dt.date(2025, 3, 1))
    with django_assert_max_num_queries(len(captured.captured_queries)):
        client.get(reverse("dashboard"), {"month": MARCH})


def test_rollups_of_an_older_version_are_recomputed(client, leadership, march):
    old = {"jobs_ended": 4, "preemptions_total": 2}  # what version 1 stored: KPIs missing
    MonthlyRollup.objects.filter(month=dt.date(2025, 3, 1)).update(data=old, version=1)
    MonthlyRollup.objects.create(
        month=dt.date(2025, 1, 1),
        scope="all",
        data=old,
        version=1,
        computed_at=dt.datetime.now(dt.UTC),
    )
    client.force_login(leadership)
    response = client.get(reverse("dashboard"), {"month": MARCH})
    assert response.status_code == 200
    # The shown month is recomputed on read; an older month is a gap until the beat.
    assert "turnaround_s" in response.context["current"]
    assert {card["key"] for card in response.context["kpis"]} >= {"turnaround_p50", "goodput"}
    march_all = MonthlyRollup.objects.get(month=dt.date(2025, 3, 1), scope="all")
    assert march_all.version == SIGNALS_VERSION and "turnaround_s" in march_all.data
    assert not MonthlyRollup.objects.filter(month=dt.date(2025, 3, 1), version=1).exists()
    trend = dict(response.context["trend"])
    assert trend[dt.date(2025, 1, 1)] is None
    assert rollups_refresh_stale() == [dt.date(2025, 1, 1)]
    row = MonthlyRollup.objects.get(month=dt.date(2025, 1, 1), scope="all")
    assert row.version == SIGNALS_VERSION and "turnaround_s" in row.data
    assert rollups_refresh_stale() == []


def test_rollups_of_a_newer_version_are_read_as_they_are(client, leadership, march):
    # During a rolling deploy a newer worker may have stored a month: it holds every
    # figure this version reads, and recomputing it here would undo its new ones.
    row = MonthlyRollup.objects.get(month=dt.date(2025, 3, 1), scope="all")
    newer = {**row.data, "a_figure_of_the_next_release": 7}
    MonthlyRollup.objects.filter(pk=row.pk).update(data=newer, version=SIGNALS_VERSION + 1)
    client.force_login(leadership)
    response = client.get(reverse("dashboard"), {"month": MARCH})
    assert response.status_code == 200
    assert response.context["current"]["a_figure_of_the_next_release"] == 7
    assert rollups_refresh_stale() == []
