"""A team's fairness over several queues (formulas.fairness_across_queues): its ratio in
each queue where it has a share, against that queue's totals, combined by its fair part
there; never its use divided by every queue's entitlement. The dashboard's "All queues"
view, the signals API's `team:` scope, the team CSV and the pack say the same."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from fleet.models import QuotaShare, Team
from governance.dashboards.formulas import fairness_across_queues, fairness_by_queue
from governance.dashboards.rollups import rollups_refresh
from tests.governance.dashboards.conftest import load_into_db
from tests.governance.dashboards.test_fairness import share
from tests.governance.dashboards.test_pack_layout import IDLE_FLEET, pack_reader, pdf_text
from tests.governance.dashboards.test_signals import A_ORIGIN, APRIL, LEND_BORROW

BORROWER = "lend-borrow-borrower"


def test_an_idle_queue_weighs_nothing_in_a_teams_combined_ratio():
    """ann and bob each hold half of `busy` (ann ran all its 40 GPU-hours) and a share
    ten times bigger in `idle`, where nothing ran."""
    shares = [
        share("busy", "ann", 40.0, 10.0),
        share("busy", "bob", 0.0, 10.0),
        share("idle", "bob", 0.0, 100.0),
        share("idle", "ann", 0.0, 100.0),
    ]
    rows = [r for r in fairness_by_queue(shares) if r["team_name"] == "ann"]
    ann = fairness_across_queues(rows)
    # busy: ann's fair part is 10/20 of the 40 delivered = 20; she got 40: 2.0. The idle
    # queue (nothing delivered) adds no fair part. Against every queue's entitlement
    # (10 of 220) the same use would read 22.0.
    assert ann["fair_gpu_hours"] == pytest.approx(20.0)
    assert ann["ratio"] == pytest.approx(2.0)
    assert ann["queues"] == 1
    assert (ann["delivered_fraction"], ann["entitled_fraction"]) == (1.0, 0.5)
    assert [(q["queue_name"], q["ratio"]) for q in ann["by_queue"]] == [
        ("busy", pytest.approx(2.0)),
        ("idle", None),
    ]
    bob = fairness_across_queues([r for r in fairness_by_queue(shares) if r["team_name"] == "bob"])
    assert bob["ratio"] == 0.0 and bob["fair_gpu_hours"] == pytest.approx(20.0)


def test_two_busy_queues_combine_by_the_fair_part_in_each():
    """By hand: queue a delivers 30 (ann 30 of it, entitled 10 of 30: fair 10, ratio
    3.0); queue b delivers 100 (ann 10, entitled 50 of 100: fair 50, ratio 0.2).
    Combined: (30 + 10) / (10 + 50) = 0.667, not the mean of the ratios (1.6)."""
    shares = [
        {**share("busy", "ann", 30.0, 10.0), "queue_id": 1, "queue_name": "a"},
        {**share("busy", "bob", 0.0, 20.0), "queue_id": 1, "queue_name": "a"},
        {**share("idle", "ann", 10.0, 50.0), "queue_id": 2, "queue_name": "b"},
        {**share("idle", "cy", 90.0, 50.0), "queue_id": 2, "queue_name": "b"},
    ]
    ann = fairness_across_queues([r for r in fairness_by_queue(shares) if r["team_name"] == "ann"])
    assert [q["ratio"] for q in ann["by_queue"]] == [pytest.approx(3.0), pytest.approx(0.2)]
    assert ann["fair_gpu_hours"] == pytest.approx(60.0)
    assert ann["ratio"] == pytest.approx(40 / 60)
    assert ann["queues"] == 2
    assert ann["delivered_fraction"] is None and ann["entitled_fraction"] is None


@pytest.fixture
def two_queues(db, settings, tmp_path):
    """Scenario A's busy queue (the borrower ran everything on half its entitlement:
    2.0 there) and an idle queue ten times bigger where the borrower's team also has a
    share: divided by every queue's entitlement, its figure would read 7.33."""
    settings.MEDIA_ROOT = tmp_path / "media"
    load_into_db(LEND_BORROW, origin=A_ORIGIN, gpu_count=8)
    load_into_db(IDLE_FLEET, origin=A_ORIGIN, gpu_count=8)
    team = Team.objects.get(name=BORROWER)
    QuotaShare.objects.filter(queue__name="idle-fleet", name="t00").update(team=team)
    rollups_refresh(month=APRIL)
    return team


def test_the_page_compares_a_team_in_each_queue_not_across_all(client, leadership, two_queues):
    client.force_login(leadership)
    for params in ({"month": "2025-04"}, {"month": "2025-04", "team": two_queues.pk}):
        response = client.get(reverse("dashboard"), params)
        assert response.status_code == 200
        row = next(r for r in response.context["teams"] if r["name"] == BORROWER)
        assert row["fairness"]["ratio"] == pytest.approx(2.0), params
        assert row["fairness_text"] == "2.00"
        assert {q["queue_name"] for q in row["fairness"]["by_queue"]} == {
            "lend-borrow",
            "idle-fleet",
        }
        html = response.content.decode()
        assert "7.33" not in html
    # The team CSV of "All queues" carries the same figure.
    response = client.get(reverse("dashboard-csv", args=["teams"]), {"month": "2025-04"})
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    team = {row[0]: dict(zip(rows[0], row, strict=True)) for row in rows[2:]}
    assert float(team[BORROWER]["fairness ratio"]) == pytest.approx(2.0)
    assert float(team[BORROWER]["fair GPU-hours"]) == pytest.approx(
        float(team[BORROWER]["GPU-hours delivered"]) / 2
    )


def test_the_api_team_scope_compares_in_each_queue(client, leadership, two_queues):
    client.force_login(leadership)
    body = client.get("/api/v1/signals/", {"month": "2025-04", "scope": f"team:{BORROWER}"}).json()
    fairness = body["fairness"]
    assert fairness["ratio"] == pytest.approx(2.0)
    assert fairness["queues"] == 1
    assert fairness["delivered_fraction"] == 1.0 and fairness["entitled_fraction"] == 0.5
    by_queue = {q["queue_name"]: q for q in fairness["by_queue"]}
    assert by_queue["lend-borrow"]["ratio"] == pytest.approx(2.0)
    assert by_queue["idle-fleet"]["ratio"] is None
    assert by_queue["idle-fleet"]["fair_gpu_hours"] == 0.0
    # A share within its queue; a queue or the organisation has none.
    share = client.get(
        "/api/v1/signals/", {"month": "2025-04", "scope": "share:lend-borrow/borrower"}
    ).json()
    assert share["fairness"]["ratio"] == pytest.approx(2.0)
    queue = client.get("/api/v1/signals/", {"month": "2025-04", "scope": "queue:idle-fleet"})
    assert queue.json()["fairness"] is None


def test_the_pack_team_table_shows_the_same_ratio(two_queues):
    text = pdf_text(pack_reader())
    assert "7.33" not in text
    # The borrower's row of the Teams table ends with its fairness.
    assert f"{BORROWER} 75.2" in text
    row = text.split(f"{BORROWER} 75.2", 1)[1].split("Fairness:", 1)[0]
    assert "2.00" in row
