"""GET /api/v1/signals/: every signal of a month and scope in base units, documented
in the OpenAPI schema, bounded inputs, readable by leadership and admins; and the API,
the CSV and the page say the same."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

from fleet.models import Team
from governance.dashboards.rollups import rollups_refresh
from governance.models import MonthlyRollup
from tests.governance.dashboards.conftest import load_into_db
from tests.governance.dashboards.test_signals import A_ORIGIN, APRIL, LEND_BORROW, MARCH

URL = "/api/v1/signals/"


@pytest.fixture
def lend_borrow(db):
    _, _, queue = load_into_db(LEND_BORROW, origin=A_ORIGIN, gpu_count=8)
    return queue


def signals(client, **params):
    return client.get(URL, params)


def test_leadership_reads_every_signal_in_base_units(client, leadership, lend_borrow):
    client.force_login(leadership)
    response = signals(client, month="2025-04", scope="all")
    assert response.status_code == 200
    body = response.json()
    # Computed on first read: the month had no rollups yet.
    assert MonthlyRollup.objects.filter(month=APRIL, scope="all").exists()
    assert body["month"] == "2025-04" and body["scope"] == "all"
    b1_run = 15660 - 7200
    assert body["instance_hours"]["within_limit"] == pytest.approx(2 * b1_run / 3600)
    assert body["gpu_hours"]["borrowed"] == pytest.approx(8 * 2 * b1_run / 3600)
    assert set(body["lost_gpu_hours"]) >= {"reclaim", "priority", "capacity_change", "terminated"}
    assert body["preemptions"] == {"reclaim": 0, "priority": 0, "capacity_change": 0}
    assert body["jobs_finished"] == 2
    assert body["jobs_waiting_at_end"]["n"] == 0
    assert body["turnaround_s"] == {"p50": 3600, "p90": 15660, "n": 2}
    assert body["wait_s"] == {"p50": None, "p90": None, "n": 0}
    assert body["entitlement_honoured"] == {"fraction": None, "n": 0}
    assert body["time_to_reclaim_s"] == {"p50": None, "p90": None, "n": 0}
    assert body["policy_edits"] == 0
    assert set(body["exceptions"]) == {
        "filed",
        "approved",
        "denied",
        "expired",
        "revoked",
        "active",
    }
    assert body["fairness"] is None
    assert "settled" in body["month_rule"]


def test_scopes_by_name(client, admin, lend_borrow):
    client.force_login(admin)
    march = signals(client, month="2025-03", scope="share:lend-borrow/lender").json()
    assert march["entitlement_honoured"] == {"fraction": 1.0, "n": 1}
    assert march["time_to_reclaim_s"] == {"p50": 0, "p90": 0, "n": 1}
    assert march["preemptions"]["reclaim"] == 0  # the borrower was preempted, not the lender
    queue = signals(client, month="2025-03", scope="queue:lend-borrow").json()
    assert queue["preemptions"]["reclaim"] == 1
    assert queue["lost_instance_hours"]["reclaim"] == pytest.approx(4800 / 3600)
    team = signals(client, month="2025-04", scope="team:lend-borrow-borrower").json()
    assert team["fairness"]["ratio"] == pytest.approx(2.0)
    assert team["fairness"]["delivered_fraction"] == 1.0


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({}, "month", "required"),
        ({"month": "March"}, "month", "YYYY-MM"),
        ({"month": "2025-13"}, "month", "no such month"),
        ({"month": "1999-12"}, "month", "from 2000-01"),
        ({"month": "2999-01"}, "month", "to the current month"),
        ({"month": "2025-03", "scope": "queue:nowhere"}, "scope", "unknown queue 'nowhere'"),
        ({"month": "2025-03", "scope": "team:nobody"}, "scope", "unknown team"),
        ({"month": "2025-03", "scope": "share:lend-borrow/x"}, "scope", "unknown share 'x'"),
        ({"month": "2025-03", "scope": "shares"}, "scope", "expected `all`"),
        ({"month": "2025-03", "scope": "x" * 300}, "scope", "250"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    client, leadership, lend_borrow, params, field, message
):
    client.force_login(leadership)
    response = signals(client, **params)
    assert response.status_code == 400
    body = response.json()
    assert list(body["errors"]) == [field]
    assert message in body["detail"]
    assert not MonthlyRollup.objects.exists()  # nothing computed, nothing changed


@pytest.mark.parametrize("role", ["team_lead", "exception_owner", "outsider"])
def test_other_roles_are_refused(client, request, role, db):
    client.force_login(request.getfixturevalue(role))
    assert signals(client, month="2025-03").status_code == 403


def test_anonymous_gets_401(client, db):
    assert signals(client, month="2025-03").status_code == 401


def test_the_schema_documents_the_endpoint_and_its_fields():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/api/v1/signals/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"month", "scope"}
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    fields = component["properties"]
    for name in (
        "instance_hours",
        "gpu_hours",
        "lost_instance_hours",
        "lost_gpu_hours",
        "preemptions",
        "jobs_finished",
        "jobs_succeeded",
        "jobs_failed",
        "jobs_ended",
        "coverage",
        "jobs_waiting_at_end",
        "turnaround_s",
        "wait_s",
        "entitlement_honoured",
        "time_to_reclaim_s",
        "reclaim_time_s",
        "by_class",
        "policy_edits",
        "exceptions",
    ):
        assert name in fields, name
    assert "5 minutes" in fields["entitlement_honoured"]["description"]
    assert "400" in operation["responses"]


def _csv(client, dataset, **params):
    response = client.get(reverse("dashboard-csv", args=[dataset]), params)
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    return rows[0], rows[1], rows[2:]


def test_the_api_the_csv_and_the_page_agree(client, leadership, lend_borrow):
    for month in (MARCH, APRIL):
        rollups_refresh(month=month)
    client.force_login(leadership)
    api = signals(client, month="2025-03", scope="queue:lend-borrow").json()
    params = {"month": "2025-03", "queue": lend_borrow.pk}
    page = client.get(reverse("dashboard"), params).content.decode()
    header, units, rows = _csv(client, "kpis", **params)
    kpis = {row[0]: dict(zip(header, row, strict=True)) for row in rows}

    def card(key):
        match = re.search(
            rf'data-kpi="{key}">.*?kpi__number">([^<]*)</span>(?: <span class="kpi__n">n = (\d+))?',
            page,
            re.S,
        )
        return match.group(1), match.group(2)

    delivered = api["gpu_hours"]["within_limit"] + api["gpu_hours"]["borrowed"]
    assert float(kpis["GPU-hours delivered"]["value"]) == pytest.approx(delivered)
    assert card("delivered_gpu_hours") == (f"{delivered:,.1f}", str(api["goodput"]["n"]))
    assert kpis["Entitlement honoured"]["value"] == str(api["entitlement_honoured"]["fraction"])
    assert kpis["Entitlement honoured"]["n"] == str(api["entitlement_honoured"]["n"])
    assert card("entitlement_honoured") == ("100%", "1")
    assert kpis["Lender wait, p90"]["value"] == str(api["time_to_reclaim_s"]["p90"])
    assert card("time_to_reclaim_p90")[1] == str(api["time_to_reclaim_s"]["n"])
    assert float(kpis["Goodput"]["value"]) == pytest.approx(api["goodput"]["fraction"])
    assert card("goodput") == ("78%", str(api["goodput"]["n"]))
    assert kpis["Still waiting at month end"]["value"] == str(api["jobs_waiting_at_end"]["n"])
    # The capacity CSV per share adds up to the API's queue figures.
    header, units, rows = _csv(client, "capacity", **params)
    assert units[header.index("borrowed GPU-hours")] == "GPU-hours"
    column = header.index("borrowed GPU-hours")
    assert sum(float(row[column]) for row in rows) == pytest.approx(api["gpu_hours"]["borrowed"])
    # And the team table on the page holds the API's team figures.
    team = Team.objects.get(name="lend-borrow-borrower")
    api_team = signals(client, month="2025-03", scope=f"team:{team.name}").json()
    team_delivered = api_team["gpu_hours"]["within_limit"] + api_team["gpu_hours"]["borrowed"]
    assert f"{team_delivered:,.1f}" in page


def test_a_month_stored_by_an_older_version_is_recomputed_before_it_is_served(
    client, leadership, lend_borrow
):
    from governance.dashboards.selectors.signals import SIGNALS_VERSION

    rollups_refresh(month=APRIL)
    # What an older release stored: fewer figures than this one reads.
    MonthlyRollup.objects.filter(month=APRIL).update(data={"jobs_ended": 2}, version=1)
    client.force_login(leadership)
    response = signals(client, month="2025-04", scope="all")
    assert response.status_code == 200
    assert response.json()["turnaround_s"] == {"p50": 3600, "p90": 15660, "n": 2}
    assert set(MonthlyRollup.objects.filter(month=APRIL).values_list("version", flat=True)) == {
        SIGNALS_VERSION
    }
