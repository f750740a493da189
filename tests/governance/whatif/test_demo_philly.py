"""The what-if on the demo's Philly queue (issue 26 point 1): every trace job lands in its
team's share (`6c71a0` in `vc-6c71a0`, not handed out in turn), the team no share is
named for is listed and left out until the admin names one, and the headline figures
are those of `engine.simulate` run on the same document, built here from the trace."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from demo.history import seed_workload_classes
from demo.organisation import seed_philly
from engine import result_to_json, simulate
from engine.stats import nearest_rank
from engine.trace import DEFAULT_TRACE, read_trace
from fleet.bridge import engine_share_document
from fleet.selectors import queue_document, share_document
from governance.whatif import services
from tests.governance.whatif.conftest import run_now

pytestmark = pytest.mark.django_db

# Two days with every big team and one of the four tiny ones (795a4c, 3 jobs), which
# the demo folds into vc-other: no share is named like it.
START, DAYS = dt.date(2017, 11, 1), 2
TINY = "795a4c"
# The draft: reserve one share, cap another's borrowing at 25 %, make a third
# lend-only.
DRAFT = (
    {"name": "vc-11cb48", "strategy": "RESERVE"},
    {"name": "vc-6214e9", "borrow_limit": 25},
    {"name": "vc-6c71a0", "strategy": "LEND"},
)


def live_and_draft_shares(queue) -> tuple[list[dict], list[dict]]:
    """The queue's shares as the engine reads them, today and with DRAFT applied."""
    live = [
        engine_share_document(share_document(share))
        for share in queue.shares.select_related("team").prefetch_related("limits__instance_type")
    ]
    draft = []
    for share in live:
        edit = next((item for item in DRAFT if item["name"] == share["name"]), {})
        changed = {**share, **edit}
        if changed["strategy"] != "LEND_AND_BORROW":
            changed.pop("borrow_limit", None)
        draft.append(changed)
    return live, draft


@pytest.fixture
def philly(admin):
    seed_workload_classes(admin)
    return seed_philly(admin)


def window_rows():
    origin = dt.datetime.combine(START, dt.time())
    end = origin + dt.timedelta(days=DAYS)
    rows = [row for row in read_trace(DEFAULT_TRACE) if origin <= row.submitted < end]
    return origin, sorted(rows, key=lambda row: (row.submitted, row.position))


def philly_comparison(admin, queue, *, mapping=None):
    comparison = services.comparison_create(actor=admin, queue=queue)
    services.comparison_set_workload(
        actor=admin,
        comparison=comparison,
        kind="PHILLY",
        start=START,
        days=DAYS,
        scale=1,
        mapping=mapping,
    )
    comparison.refresh_from_db()
    return comparison


def test_every_job_of_a_philly_window_lands_in_its_teams_share(admin, philly):
    comparison = philly_comparison(admin, philly)
    _origin, rows = window_rows()
    shares = set(philly.shares.values_list("name", flat=True))
    expected = {
        f"j{number:05d}": f"vc-{row.vc}"
        for number, row in enumerate(rows)
        if f"vc-{row.vc}" in shares
    }
    assert {job["id"]: job["share"] for job in comparison.workload_jobs} == expected
    by_share = {job["share"] for job in comparison.workload_jobs}
    assert {"vc-6c71a0", "vc-6214e9", "vc-11cb48"} <= by_share
    # The team named for no share is listed, with its jobs, and left out.
    tiny_jobs = sum(1 for row in rows if row.vc == TINY)
    assert tiny_jobs == 3
    entries = {entry["team"]: entry for entry in comparison.share_mapping["teams"]}
    assert entries[TINY] == {
        "team": TINY,
        "jobs": 3,
        "default": None,
        "matched": "",
        "chosen": False,
        "share": None,
    }
    assert entries["6c71a0"]["share"] == "vc-6c71a0"
    assert entries["6c71a0"]["matched"] == "share named …-6c71a0"
    assert len(comparison.workload_jobs) == len(rows) - tiny_jobs
    assert comparison.workload_description.endswith(
        "; 3 jobs of 1 team mapped to no share are left out"
    )

    # The admin names the demo's share for the tiny clusters: now every job is in.
    services.comparison_set_mapping(actor=admin, comparison=comparison, mapping={TINY: "vc-other"})
    comparison.refresh_from_db()
    expected = {
        f"j{number:05d}": f"vc-{row.vc}" if row.vc != TINY else "vc-other"
        for number, row in enumerate(rows)
    }
    assert {job["id"]: job["share"] for job in comparison.workload_jobs} == expected
    chosen = [entry["team"] for entry in comparison.share_mapping["teams"] if entry["chosen"]]
    assert chosen == [TINY]


def document(policy_shares, queue, origin, rows, name):
    """The scenario the what-if should replay, built from the trace and the live policy
    without the what-if's code: one instance per GPU (philly.gpu), the trace's seconds."""
    jobs = [
        {
            "id": f"j{number:05d}",
            "share": f"vc-{row.vc}" if row.vc != TINY else "vc-other",
            "priority": 0,
            "instance_type": "philly.gpu",
            "instances": max(1, row.gpus),
            "submit_at": int((row.submitted - origin).total_seconds()),
            "duration": max(1, math.ceil(row.duration)),
        }
        for number, row in enumerate(rows)
    ]
    return {"name": name, "queue": queue, "shares": policy_shares, "jobs": jobs}


def headline(result: dict) -> dict:
    """The figures the result page leads with, computed from the engine's result."""
    outcomes = list(result["jobs"].values())
    turnarounds = sorted(
        job["finished_at"] - job["submitted_at"] for job in outcomes if job["state"] == "SUCCEEDED"
    )
    return {
        "jobs": len(outcomes),
        "succeeded": sum(job["state"] == "SUCCEEDED" for job in outcomes),
        "waiting_mean": round(sum(job["waiting_time"] for job in outcomes) / len(outcomes)),
        "preemptions": sum(job["preemptions"] for job in outcomes),
        "reclaims": sum(
            1
            for event in result["events"]
            if event["type"] == "PREEMPTED" and event.get("cause") == "reclaim"
        ),
        "turnaround_p90": nearest_rank(turnarounds, 90),
        "makespan": result["makespan"],
    }


def test_the_headline_figures_equal_simulate_of_the_same_document(admin, philly):
    comparison = philly_comparison(admin, philly, mapping={TINY: "vc-other"})
    for edit in DRAFT:
        services.draft_share_edit(actor=admin, comparison=comparison, edit=edit)
    comparison = run_now(comparison)
    assert comparison.status == "DONE", comparison.error
    assert comparison.results["left_out"] == {"teams": [], "jobs": 0}

    origin, rows = window_rows()
    queue = queue_document(philly)
    live, draft = live_and_draft_shares(philly)
    simulated = {
        key: result_to_json(simulate(document(shares, queue, origin, rows, key)))
        for key, shares in (("current", live), ("draft", draft))
    }
    for key, result in simulated.items():
        figures = comparison.results[key]["overall"]
        expected = headline(result)
        assert {
            name: figures.get(name, comparison.results[key].get(name)) for name in expected
        } == (expected), key
        for name, share in comparison.results[key]["shares"].items():
            mine = [job for job in result["jobs"].values() if job["share"] == name]
            assert share["jobs"] == len(mine), (key, name)
            if mine:
                waiting = round(sum(job["waiting_time"] for job in mine) / len(mine))
                assert share["waiting_mean"] == waiting, (key, name)
