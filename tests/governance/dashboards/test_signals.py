"""Every signal equals a hand computation on small scenarios written from the semantics
(shared spec: scenario format and the definitions in governance.dashboards.formulas).

Each scenario below is short enough to play out on paper: the comment above it walks
through what the scheduler does, and the expected figures are that walk's arithmetic,
not the code's output. Shares exist from the history's first instant (the loader says
so), so a month's hours start there.
"""

from __future__ import annotations

import datetime as dt

import pytest

from fleet.models import Job, QuotaShare, Team
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.reads import rollup_scope
from tests.governance.dashboards.conftest import load_into_db

HOUR = 3600
MARCH, APRIL, MAY = dt.date(2025, 3, 1), dt.date(2025, 4, 1), dt.date(2025, 5, 1)


def job(id_, share, instances, submit_at, duration, **extra):
    return {
        "id": id_,
        "share": share,
        "instance_type": "gpu",
        "instances": instances,
        "submit_at": submit_at,
        "duration": duration,
        **extra,
    }


def stored(month, scope="all"):
    row = rollup_scope(month=month, scope=scope)
    assert row is not None, f"no rollup for {scope} in {month}"
    return row[0]


def share_scope(name: str) -> str:
    share = QuotaShare.objects.get(name=name)
    return f"q{share.queue_id}/s{share.pk}"


def team_scope(name: str) -> str:
    return f"t{Team.objects.get(name=name).pk}"


# Scenario A: a lender and a borrower across the month boundary, 8 GPUs per instance.
# Second 0 is 31 March 22:00 UTC, so 1 April starts at second 7200.
#   0     b1 (borrower, 4 instances) borrows: its limit is 2, the lender's 2 are idle.
#   3600  l1 (lender, 2) fits its limit; no free capacity, the borrower is over its
#         limit: lent out. Reclaim: b1 is stopped (progress 3600, checkpoint every 2400
#         -> keeps 2400, loses 1200 s x 4 instances); l1 starts at once.
#   7200  l1 succeeds (1 April 00:00); b1 restarts (60 s overhead) from 2400 and needs
#         8400 more: it succeeds at 7200 + 60 + 8400 = 15660.
LEND_BORROW = {
    "name": "lend-borrow",
    "queue": {"capacity": {"gpu": 4}},
    "shares": [
        {"name": "lender", "capacity_limits": {"gpu": 2}, "strategy": "LEND"},
        {
            "name": "borrower",
            "capacity_limits": {"gpu": 2},
            "strategy": "LEND_AND_BORROW",
            "borrow_limit": -1,
        },
    ],
    "jobs": [
        job("b1", "borrower", 4, 0, 10800, checkpoint_interval=2400, restart_overhead=60),
        job("l1", "lender", 2, 3600, 3600),
    ],
}
A_ORIGIN = dt.datetime(2025, 3, 31, 22, tzinfo=dt.UTC)


@pytest.fixture
def lend_borrow(db):
    load_into_db(LEND_BORROW, origin=A_ORIGIN, gpu_count=8)
    rollups_refresh(month=MARCH)
    rollups_refresh(month=APRIL)


def test_capacity_use_splits_at_the_month_boundary(lend_borrow):
    march = stored(MARCH)
    # 22:00-23:00 borrower runs 4 (2 within, 2 borrowed), lender idle 2;
    # 23:00-24:00 lender runs 2 within, borrower idle 2.
    assert march["instance_hours"] == pytest.approx(
        {"within_limit": 4, "borrowed": 2, "idle_lendable": 4, "idle_reserved": 0}
    )
    assert march["gpu_hours"] == pytest.approx(
        {"within_limit": 32, "borrowed": 16, "idle_lendable": 32, "idle_reserved": 0}
    )
    assert march["delivered_gpu_hours"] == pytest.approx(48)
    april = stored(APRIL)
    b1_run = 15660 - 7200  # seconds
    assert april["instance_hours"]["within_limit"] == pytest.approx(2 * b1_run / HOUR)
    assert april["instance_hours"]["borrowed"] == pytest.approx(2 * b1_run / HOUR)
    # The lender idle all 30 days; the borrower's limit idle outside b1's run.
    idle = 2 * 720 + 2 * (720 * HOUR - b1_run) / HOUR
    assert april["instance_hours"]["idle_lendable"] == pytest.approx(idle)
    lender = stored(MARCH, share_scope("lender"))
    assert lender["entitlement_use"] == pytest.approx(0.5)  # 2 of its 4 instance-hours


def test_a_reclaim_is_lending_keeping_its_promise(lend_borrow):
    march = stored(MARCH)
    assert march["preemptions"] == {"reclaim": 1, "priority": 0, "capacity_change": 0}
    # l1 was entitled and lent out; it started the instant it became runnable.
    assert march["entitlement_honoured"] == {"fraction": 1.0, "n": 1, "honoured": 1}
    assert march["time_to_reclaim_s"]["n"] == 1
    assert march["time_to_reclaim_s"]["p50"] == march["time_to_reclaim_s"]["p90"] == 0
    # b1 never fitted its limit: not an entitled start, in either month.
    assert stored(APRIL)["entitlement_honoured"]["n"] == 0
    assert march["lost_instance_hours"]["reclaim"] == pytest.approx(1200 * 4 / HOUR)
    assert march["lost_gpu_hours"]["reclaim"] == pytest.approx(1200 * 4 * 8 / HOUR)


def test_each_figure_counts_in_the_month_it_was_settled(lend_borrow):
    march, april = stored(MARCH), stored(APRIL)
    # Both first starts (b1 at 0, l1 at 3600) waited nothing, in March.
    assert march["wait_s"] == pytest.approx(
        {"n": 2, "mean": 0, "min": 0, "q1": 0, "p50": 0, "q3": 0, "p90": 0, "max": 0}
    )
    assert april["wait_s"] == {"n": 0}
    # l1 succeeded at 1 April 00:00: its turnaround (3600) is April's; b1's 15660 too.
    assert march["jobs_finished"] == 0
    assert april["jobs_finished"] == 2
    assert (april["turnaround_s"]["p50"], april["turnaround_s"]["p90"]) == (3600, 15660)
    assert april["turnaround_by_borrowing_s"]["borrowed"]["p50"] == 15660
    assert april["turnaround_by_borrowing_s"]["within"]["p50"] == 3600
    # At 31 March 24:00, b1 had been waiting since its preemption at 23:00.
    assert march["jobs_waiting_at_end"] == {
        "n": 1,
        "age_p50_s": 3600,
        "age_p90_s": 3600,
        "oldest_s": 3600,
    }
    assert april["jobs_waiting_at_end"]["n"] == 0
    # b1's restart: waited 3600 after its preemption, started again in April.
    assert april["wait_after_interruption_s"]["p50"] == 3600
    assert april["restart_overhead_instance_hours"] == pytest.approx(60 * 4 / HOUR)
    assert april["completion_rate_preempted"] == 1.0
    assert april["preempted_ended"] == 1


def test_goodput_and_rates_per_thousand(lend_borrow):
    march, april = stored(MARCH), stored(APRIL)
    # March: 6 instance-hours delivered (21600 s), 4800 s lost.
    assert march["goodput"] == pytest.approx((21600 - 4800) / 21600)
    assert march["lost_gpu_hours_per_1000"] == pytest.approx(4800 * 8 / HOUR / 48 * 1000)
    assert march["preemptions_per_1000"] == pytest.approx(1 / 48 * 1000)
    # April: b1 ran 4 instances for 8460 s, 60 s x 4 of them restarting.
    delivered = 4 * 8460
    assert april["goodput"] == pytest.approx((delivered - 240) / delivered)
    # Over both months every second delivered is kept work, lost work or overhead.
    kept = sum(
        (stored(m)["delivered_instance_hours"] - sum(stored(m)["lost_instance_hours"].values()))
        * HOUR
        - stored(m)["restart_overhead_instance_hours"] * HOUR
        for m in (MARCH, APRIL)
    )
    assert kept == pytest.approx(10800 * 4 + 3600 * 2)


def test_fairness_compares_what_a_team_received_with_its_entitlement(lend_borrow):
    from governance.dashboards.formulas import fairness

    april = stored(APRIL)
    lender = stored(APRIL, team_scope("lend-borrow-lender"))
    borrower = stored(APRIL, team_scope("lend-borrow-borrower"))
    # Equal limits: each is entitled to half; the borrower received everything.
    assert lender["entitled_gpu_hours"] == pytest.approx(borrower["entitled_gpu_hours"])
    fair = fairness(
        delivered=borrower["delivered_gpu_hours"],
        delivered_total=april["delivered_gpu_hours"],
        entitled=borrower["entitled_gpu_hours"],
        entitled_total=april["entitled_gpu_hours"],
    )
    assert fair["delivered_fraction"] == 1.0
    assert fair["entitled_fraction"] == pytest.approx(0.5)
    assert fair["ratio"] == pytest.approx(2.0)
    assert lender["delivered_gpu_hours"] == 0


# Scenario B: a share that lends all month, a reserved one, and a month without data.
# Second 0 is 1 April 00:00. w1 (works, limit 1) needs 2: it borrows one instance of
# `lends` (never of `keeps`, RESERVE) and runs an hour.
LENDS_ALL_MONTH = {
    "name": "lends-all-month",
    "queue": {"capacity": {"gpu": 3}},
    "shares": [
        {"name": "lends", "capacity_limits": {"gpu": 2}, "strategy": "LEND"},
        {"name": "keeps", "capacity_limits": {"gpu": 1}, "strategy": "RESERVE"},
        {"name": "works", "capacity_limits": {"gpu": 1}, "strategy": "LEND_AND_BORROW"},
    ],
    "jobs": [job("w1", "works", 2, 0, 3600)],
}


@pytest.fixture
def lends_all_month(db):
    load_into_db(LENDS_ALL_MONTH, origin=dt.datetime(2025, 4, 1, tzinfo=dt.UTC))
    for month in (MARCH, APRIL, MAY):
        rollups_refresh(month=month)


def test_a_share_that_lends_all_month(lends_all_month):
    lends = stored(APRIL, share_scope("lends"))
    assert lends["instance_hours"] == pytest.approx(
        {"within_limit": 0, "borrowed": 0, "idle_lendable": 2 * 720, "idle_reserved": 0}
    )
    assert lends["entitlement_use"] == 0
    keeps = stored(APRIL, share_scope("keeps"))
    assert keeps["instance_hours"]["idle_reserved"] == pytest.approx(720)
    april = stored(APRIL)
    assert april["instance_hours"] == pytest.approx(
        {"within_limit": 1, "borrowed": 1, "idle_lendable": 2 * 720 + 719, "idle_reserved": 720}
    )
    assert april["borrowed_fraction"] == pytest.approx(0.5)


def test_a_month_without_data(lends_all_month):
    # May: the shares exist, nothing ran: idle hours only, and every n is 0.
    may = stored(MAY)
    assert may["instance_hours"] == pytest.approx(
        {"within_limit": 0, "borrowed": 0, "idle_lendable": 3 * 744, "idle_reserved": 744}
    )
    for key in ("turnaround_s", "wait_s", "time_to_reclaim_s", "wait_after_interruption_s"):
        assert may[key] == {"n": 0}
    assert may["entitlement_honoured"] == {"fraction": None, "n": 0, "honoured": 0}
    assert may["goodput"] is None
    assert may["lost_gpu_hours_per_1000"] is None
    assert (may["runs"], may["jobs_finished"], may["preemptions_total"]) == (0, 0, 0)
    # March: before the shares existed, nothing at all.
    march = stored(MARCH)
    assert march["instance_hours"] == {
        "within_limit": 0.0,
        "borrowed": 0.0,
        "idle_lendable": 0.0,
        "idle_reserved": 0.0,
    }
    assert march["entitlement_use"] is None


# Scenario C: a terminated job, and an entitled job kept waiting by too little capacity.
# Capacity 2, but the limits add up to 4.
#   0     b1 (b, 2 instances, no checkpoints) fits and starts.
#   600   a1 (a, 1) fits a's limit, but nothing is free and nobody borrows: it waits
#         (entitled, not lent out; its 5 minutes run out at 900).
#   2400  b1 is terminated after 2400 s of work (all lost); a1 starts, 1800 s late.
#   4200  a1 succeeds.
SHORTAGE = {
    "name": "shortage",
    "queue": {"capacity": {"gpu": 2}},
    "shares": [
        {"name": "a", "capacity_limits": {"gpu": 2}, "strategy": "LEND"},
        {"name": "b", "capacity_limits": {"gpu": 2}, "strategy": "LEND"},
    ],
    "jobs": [job("b1", "b", 2, 0, 7200), job("a1", "a", 1, 600, 1800)],
    "actions": [{"at": 2400, "type": "terminate", "job": "b1"}],
}


@pytest.fixture
def shortage(db):
    load_into_db(SHORTAGE)
    rollups_refresh(month=MARCH)


def test_a_terminated_job_loses_the_work_of_its_run(shortage):
    # The loader keeps the progress of the run that was terminated (not 0).
    assert Job.objects.get(name="b1").progress == 2400
    march = stored(MARCH)
    assert march["lost_instance_hours"]["terminated"] == pytest.approx(2400 * 2 / HOUR)
    assert march["jobs_failed"] == 1
    # 4800 + 1800 instance-seconds delivered, 4800 of them lost.
    assert march["goodput"] == pytest.approx((6600 - 4800) / 6600)


def test_an_entitled_start_kept_waiting_is_not_honoured(shortage):
    march = stored(MARCH)
    # b1 (at once) and a1 (1800 s late) were entitled; a1 was not lent out.
    assert march["entitlement_honoured"] == {"fraction": 0.5, "n": 2, "honoured": 1}
    assert march["time_to_reclaim_s"] == {"n": 0}
    assert (march["wait_s"]["n"], march["wait_s"]["p50"], march["wait_s"]["p90"]) == (
        2,
        0,
        1800,
    )
    assert march["turnaround_s"]["p50"] == 3600
    a = stored(MARCH, share_scope("a"))
    assert a["entitlement_honoured"]["fraction"] == 0.0


# Scenario D: jobs queued ahead in the same share (the AWS walkthrough). At 0, high,
# med and low (priorities 3, 2, 1) of qs1 (limit 1) are submitted together: only high
# fits its limit with nothing ahead of it. At 100 qs2-job fits qs2's limit while qs1
# borrows the only free instance: lent out, reclaimed at once. At 200 low's raised
# priority preempts high in qs1: high then has low ahead of it, so it is not entitled.
def test_jobs_ahead_in_the_share_count_against_its_limit(db):
    from tests.governance.dashboards.conftest import scenario_document

    load_into_db(scenario_document("01-walkthrough-borrow-reclaim-priority.json"))
    rollups_refresh(month=MARCH)
    march = stored(MARCH)
    assert march["entitlement_honoured"] == {"fraction": 1.0, "n": 2, "honoured": 2}
    assert march["time_to_reclaim_s"]["n"] == 1
    assert stored(MARCH, share_scope("qs1"))["entitlement_honoured"]["n"] == 1
    assert stored(MARCH, share_scope("qs2"))["time_to_reclaim_s"]["n"] == 1


# Scenario E: lent out, and the loan cannot be taken back in full. Capacity 3, limits
# 2 + 2. At 0 b1 (3 instances) runs 2 within its limit and 1 borrowed. At 100 a1 (2)
# fits its limit, but nothing is free and reclaiming b1's one borrowed instance would
# not be enough: the scheduler does not reclaim, and a1 waits for b1 to finish at 1000.
def test_time_to_reclaim_when_the_loan_cannot_be_taken_back(db):
    load_into_db(
        {
            "name": "short-loan",
            "queue": {"capacity": {"gpu": 3}},
            "shares": [
                {"name": "a", "capacity_limits": {"gpu": 2}, "strategy": "LEND"},
                {"name": "b", "capacity_limits": {"gpu": 2}, "strategy": "LEND_AND_BORROW"},
            ],
            "jobs": [job("b1", "b", 3, 0, 1000), job("a1", "a", 2, 100, 500)],
        }
    )
    rollups_refresh(month=MARCH)
    march = stored(MARCH)
    assert march["time_to_reclaim_s"]["n"] == 1
    assert march["time_to_reclaim_s"]["p50"] == march["time_to_reclaim_s"]["p90"] == 900
    # b1 never fitted its limit; a1 did, and started 900 s late.
    assert march["entitlement_honoured"] == {"fraction": 0.0, "n": 1, "honoured": 0}
    assert march["preemptions_total"] == 0
