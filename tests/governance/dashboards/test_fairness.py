"""Fairness is compared queue by queue (formulas.fairness_by_queue): a team's part of
what a queue delivered over its part of that queue's entitlement. Another queue's
capacity, idle or busy, is never in the divisor."""

from __future__ import annotations

import pytest

from governance.dashboards.formulas import DEFINITIONS, fairness, fairness_by_queue


def share(queue: str, team: str, delivered: float, entitled: float) -> dict:
    ids = {"busy": 1, "idle": 2, "ann": 10, "bob": 11, "cy": 12}
    return {
        "queue_id": ids[queue],
        "queue_name": queue,
        "team_id": ids[team],
        "team_name": team,
        "delivered_gpu_hours": delivered,
        "entitled_gpu_hours": entitled,
    }


# ann runs everything in `busy` on half its entitlement (two shares there); `idle`, ten
# times bigger, runs nothing (cy's share, and one of bob's).
SHARES = [
    share("busy", "ann", 30.0, 4.0),
    share("busy", "ann", 10.0, 6.0),
    share("busy", "bob", 0.0, 10.0),
    share("idle", "cy", 0.0, 100.0),
    share("idle", "bob", 0.0, 100.0),
]


def test_a_team_is_compared_with_its_entitlement_in_each_queue():
    rows = {(r["queue_name"], r["team_name"]): r for r in fairness_by_queue(SHARES)}
    assert list(rows) == [("busy", "ann"), ("busy", "bob"), ("idle", "bob"), ("idle", "cy")]
    ann = rows["busy", "ann"]
    assert (ann["delivered_gpu_hours"], ann["entitled_gpu_hours"]) == (40.0, 10.0)
    assert (ann["queue_delivered_gpu_hours"], ann["queue_entitled_gpu_hours"]) == (40.0, 20.0)
    assert ann["delivered_fraction"] == 1.0 and ann["entitled_fraction"] == 0.5
    assert ann["ratio"] == pytest.approx(2.0)
    assert rows["busy", "bob"]["ratio"] == 0.0
    # Nothing ran in the idle queue: no one's fairness to compare there.
    assert rows["idle", "bob"]["ratio"] is None and rows["idle", "cy"]["ratio"] is None
    # Divided by every queue's entitlement instead (the pack's old figure), ann's part
    # of the entitlement is 10 of 220, and 2.0 becomes 22.0 only because an idle queue
    # exists.
    everywhere = fairness(delivered=40.0, delivered_total=40.0, entitled=10.0, entitled_total=220)
    assert everywhere["ratio"] == pytest.approx(22.0)


def test_the_definition_says_fairness_is_per_queue():
    """The text the dashboard, the API and the pack print for the figure."""
    text = " ".join(DEFINITIONS["fairness"].split())
    assert text.startswith("Fairness, queue by queue:")
    assert "The totals are the queue's own, never those of every queue" in text
