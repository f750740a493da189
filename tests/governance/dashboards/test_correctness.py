"""The dashboard's numbers equal figures computed by hand from the `simulate` result.

Each scenario is simulated, written into Jobs and JobEvents by the loader the history
replay uses, rolled up, and read back the way the dashboard reads it. The expected
values below are computed from the result JSON only (its per-job fields and events),
independently of the selectors' code path.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pytest

from engine.trace import TraceOptions, build_scenario, read_trace, read_vc_sizes
from fleet.models import Job, JobEvent
from governance.dashboards.page import kpi_values
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.reads import dashboard_rollups
from tests.governance.dashboards.conftest import load_into_db, scenario_document

MARCH = dt.date(2025, 3, 1)


def rank(values, percent):
    """Nearest-rank percentile, written out: the smallest value with at least
    `percent` % of the values at or below it."""
    ordered = sorted(values)
    for index, value in enumerate(ordered, start=1):
        if index * 100 >= percent * len(ordered):
            return value
    return None


def expected_figures(result: dict, document: dict, origin: dt.datetime, month: dt.date) -> dict:
    """The signals of `month` from the result JSON, by hand: each figure in the month it
    was settled (a finish, a first start, a preemption, an hour of running)."""
    month_start = dt.datetime.combine(month, dt.time(), tzinfo=dt.UTC)
    month_end = dt.datetime.combine(
        (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1), dt.time(), tzinfo=dt.UTC
    )
    lo = (month_start - origin).total_seconds()
    hi = (month_end - origin).total_seconds()

    def in_month(seconds):
        return seconds is not None and lo <= seconds < hi

    instances = {job["id"]: job["instances"] for job in document["jobs"]}
    # One instance type per scenario here, and no action changes a limit.
    assert not any(a["type"] == "update_share" for a in document.get("actions", []))
    limits = {share["name"]: sum(share["capacity_limits"].values()) for share in document["shares"]}
    jobs = result["jobs"]
    events_of = defaultdict(list)
    for event in result["events"]:
        events_of[event["job"]].append(event)

    succeeded = {j: job for j, job in jobs.items() if job["state"] == "SUCCEEDED"}
    finished = {j: job for j, job in succeeded.items() if in_month(job["finished_at"])}
    turnaround = {j: job["finished_at"] - job["submitted_at"] for j, job in finished.items()}
    first_starts = {
        j: job["first_started_at"] - job["submitted_at"]
        for j, job in jobs.items()
        if in_month(job["first_started_at"])
    }
    ended = {
        j: job
        for j, job in jobs.items()
        if job["state"] in ("SUCCEEDED", "FAILED") and in_month(job["finished_at"])
    }
    preempted_ended = [j for j, job in ended.items() if job["preemptions"] > 0]
    month_preemptions = [
        e for e in result["events"] if e["type"] == "PREEMPTED" and in_month(e["t"])
    ]
    gaps = []
    for job_id in jobs:
        waiting_since = None
        for event in events_of[job_id]:
            # A victim with notice (spec v2) stops running at its STOPPED event.
            if event["type"] == "STOPPED" or (
                event["type"] == "PREEMPTED" and "grace_until" not in event
            ):
                waiting_since = event["t"]
            elif event["type"] == "STARTED" and waiting_since is not None:
                if in_month(event["t"]):
                    gaps.append(event["t"] - waiting_since)
                waiting_since = None
            elif event["type"] == "FAILED":
                waiting_since = None
    # Capacity held: each share's usage over time, split at its limit, clipped to the
    # month (no scenario here changes a limit).
    usage_changes = []
    holding = set()
    for event in result["events"]:
        if event["type"] == "STARTED":
            holding.add(event["job"])
            usage_changes.append((event["t"], event["share"], instances[event["job"]]))
        elif event["job"] in holding and (
            event["type"] in ("STOPPED", "SUCCEEDED", "FAILED")
            or (event["type"] == "PREEMPTED" and "grace_until" not in event)
        ):
            holding.discard(event["job"])
            usage_changes.append((event["t"], event["share"], -instances[event["job"]]))
    within = borrowed = 0.0
    usage = defaultdict(int)
    last = defaultdict(lambda: lo)
    for t, share, delta in usage_changes:
        a, b = max(last[share], lo), min(t, hi)
        if b > a:
            within += min(usage[share], limits[share]) * (b - a)
            borrowed += max(0, usage[share] - limits[share]) * (b - a)
        last[share] = t
        usage[share] += delta
    completed_preempted = [j for j in preempted_ended if ended[j]["state"] == "SUCCEEDED"]
    return {
        "jobs_finished": len(finished),
        "jobs_failed": sum(job["state"] == "FAILED" for job in ended.values()),
        "turnaround_p50": rank(turnaround.values(), 50),
        "turnaround_p90": rank(turnaround.values(), 90),
        "borrowed_p50": rank(
            [turnaround[j] for j, job in finished.items() if job["ran_borrowed"]], 50
        ),
        "within_p50": rank(
            [turnaround[j] for j, job in finished.items() if not job["ran_borrowed"]], 50
        ),
        "within_n": sum(not job["ran_borrowed"] for job in finished.values()),
        "wait_n": len(first_starts),
        "wait_p50": rank(first_starts.values(), 50),
        "wait_p90": rank(first_starts.values(), 90),
        "preemptions": {
            cause: sum(e["cause"] == cause for e in month_preemptions)
            for cause in ("reclaim", "priority", "capacity_change")
        },
        "jobs_preempted": len({e["job"] for e in month_preemptions}),
        "wait_after_interruption_p50": rank(gaps, 50),
        "wait_after_interruption_n": len(gaps),
        "preempted_ended": len(preempted_ended),
        "preempted_succeeded": len(completed_preempted),
        "completion_rate_preempted": (
            len(completed_preempted) / len(preempted_ended) if preempted_ended else None
        ),
        "retries_exhausted": sum(
            job["state"] == "FAILED" and job["reason"] == "retries_exhausted"
            for job in ended.values()
        ),
        "repeated_yielders": sorted(j for j, job in ended.items() if job["preemptions"] >= 3),
        "stops": expected_stops(result, document, in_month),
        "preemptions_avoided": sum(job.get("protected_blocks", 0) for job in ended.values()),
        "within_instance_hours": within / 3600,
        "borrowed_instance_hours": borrowed / 3600,
        "priority_changes": sum(
            action["type"] == "set_priority"
            and in_month(action["at"])
            and action["job"] in result["jobs"]
            for action in document.get("actions", [])
        ),
    }


def expected_stops(result: dict, document: dict, in_month) -> dict:
    """Spec v2: how each preempted job stopped, from the events and the job's contract
    (it saves when checkpoint_on_notice <= grace, unless a capacity cut stopped it)."""
    contract = {job["id"]: job for job in document["jobs"]}
    stops = dict.fromkeys(("immediate", "stopped_without_checkpoint", "checkpointed_on_notice"), 0)
    for event in result["events"]:
        if not in_month(event["t"]) or event.get("cause") not in ("reclaim", "priority"):
            continue
        if event["type"] == "PREEMPTED" and "grace_until" not in event:
            stops["immediate"] += 1
        elif event["type"] == "STOPPED":
            spec = contract[event["job"]]
            saves = spec.get("checkpoint_on_notice") is not None and spec[
                "checkpoint_on_notice"
            ] <= spec.get("grace", 0)
            stops["checkpointed_on_notice" if saves else "stopped_without_checkpoint"] += 1
    return stops


def assert_dashboard_matches(expected: dict, data: dict) -> None:
    assert data["jobs_finished"] == expected["jobs_finished"]
    assert data["jobs_failed"] == expected["jobs_failed"]
    assert data["turnaround_s"].get("p50") == expected["turnaround_p50"]
    assert data["turnaround_s"].get("p90") == expected["turnaround_p90"]
    by_borrowing = data["turnaround_by_borrowing_s"]
    assert by_borrowing["within"]["n"] == expected["within_n"]
    assert by_borrowing["within"].get("p50") == expected["within_p50"]
    assert by_borrowing["borrowed"].get("p50") == expected["borrowed_p50"]
    assert data["wait_s"]["n"] == expected["wait_n"]
    assert data["wait_s"].get("p50") == expected["wait_p50"]
    assert data["wait_s"].get("p90") == expected["wait_p90"]
    assert data["preemptions"] == expected["preemptions"]
    assert data["capacity_change_preemptions"] == expected["preemptions"]["capacity_change"]
    assert data["jobs_preempted"] == expected["jobs_preempted"]
    assert data["wait_after_interruption_s"]["n"] == expected["wait_after_interruption_n"]
    assert data["wait_after_interruption_s"].get("p50") == expected["wait_after_interruption_p50"]
    assert data["preempted_ended"] == expected["preempted_ended"]
    assert data["preempted_succeeded"] == expected["preempted_succeeded"]
    assert data["completion_rate_preempted"] == pytest.approx(expected["completion_rate_preempted"])
    assert data["retries_exhausted"] == expected["retries_exhausted"]
    assert data["instance_hours"]["within_limit"] == pytest.approx(
        expected["within_instance_hours"]
    )
    assert data["instance_hours"]["borrowed"] == pytest.approx(expected["borrowed_instance_hours"])
    assert data["priority_changes"] == expected["priority_changes"]
    for kind, count in expected["stops"].items():
        assert sum(data["stops"]["by_cause"][c][kind] for c in ("reclaim", "priority")) == count
    assert data["preemptions_avoided"]["avoided"] == expected["preemptions_avoided"]


SCENARIOS = (
    # borrow, reclaim, in-share preemption after a priority raise
    "01-walkthrough-borrow-reclaim-priority.json",
    # preemption with checkpoints, restart overhead, lost work
    "25-restart-overhead-and-checkpoints.json",
    # retries exhausted
    "03-retries-exhausted.json",
    # preemptions caused by a capacity change
    "19-set-capacity-preemption-order.json",
)
# Spec v2 (interruption contracts): notice and STOPPED, protection and its blocks,
# checkpoint on notice, a capacity cut and a terminate during notice, retries spent at
# the stop, a stopping job that completes, and two reclaim episodes.
CONTRACT_SCENARIOS = (
    "41-grace-notice-keeps-capacity.json",
    "42-min-runtime-protection.json",
    "43-checkpoint-on-notice.json",
    "44-min-runtime-wake-up-events.json",
    "45-reclaim-bound-sum-of-maxima.json",
    "46-freed-capacity-held-for-the-waiting-starter.json",
    "47-terminating-the-waiting-starter.json",
    "48-capacity-cut-stops-a-stopping-job.json",
    "49-terminating-a-stopping-job.json",
    "50-retries-exhausted-at-the-stop.json",
    "51-stopping-job-that-completes-succeeds.json",
    "52-in-share-wake-up.json",
    "53-time-to-reclaim.json",
)


@pytest.mark.django_db
@pytest.mark.parametrize("name", SCENARIOS + CONTRACT_SCENARIOS)
def test_dashboard_numbers_equal_hand_computed_figures(name):
    document = scenario_document(name)
    result, _, queue = load_into_db(document)
    rollups_refresh(month=MARCH)
    expected = expected_figures(result, document, dt.datetime(2025, 3, 3, tzinfo=dt.UTC), MARCH)
    instances = {job["id"]: job["instances"] for job in document["jobs"]}

    for queue_id in (None, queue.pk):
        data = dashboard_rollups(month=MARCH, queue_id=queue_id)["current"]
        assert_dashboard_matches(expected, data)
        # A scenario's events all fall in one month: lost work is the jobs' total (the
        # work since a checkpoint at each preemption or stop; terminated jobs apart).
        lost = sum(job["lost_work"] * instances[j] for j, job in result["jobs"].items())
        preempted_lost = sum(
            data["lost_instance_hours"][c] for c in ("reclaim", "priority", "capacity_change")
        )
        assert preempted_lost * 3600 == pytest.approx(lost)
        overhead = sum(job["restart_overhead"] * instances[j] for j, job in result["jobs"].items())
        assert data["restart_overhead_instance_hours"] * 3600 == pytest.approx(overhead)
        assert (
            sorted(y["name"] for y in dashboard_yielders(queue_id))
            == (expected["repeated_yielders"])
        )
        # Time to reclaim is the engine's (V12): its count, max and lower median.
        if "time_to_reclaim" in result:
            engine = result["time_to_reclaim"]
            ttr = data["reclaim_time_s"]
            assert (ttr["n"], ttr.get("max"), ttr.get("p50")) == (
                engine["count"],
                engine["max"],
                engine["p50"],
            )
        kpis = kpi_values(data)
        assert kpis["turnaround_p50"] == (expected["turnaround_p50"], expected["jobs_finished"])
        assert data["preemptions_total"] == sum(expected["preemptions"].values())


def dashboard_yielders(queue_id):
    shares = dashboard_rollups(month=MARCH, queue_id=queue_id)["shares"]
    return [y for share in shares for y in share["yielders"]]


@pytest.mark.django_db
@pytest.mark.parametrize("name", SCENARIOS + CONTRACT_SCENARIOS)
def test_loader_writes_what_the_result_says(name):
    """Job counters and lifecycle events as the live scheduler writes them."""
    document = scenario_document(name)
    result, summary, _ = load_into_db(document)
    jobs = {job.name: job for job in Job.objects.all()}
    assert set(jobs) == set(result["jobs"])
    for job_id, outcome in result["jobs"].items():
        job = jobs[job_id]
        assert job.state == outcome["state"]
        assert job.preemptions == outcome["preemptions"]
        assert job.lost_work == outcome["lost_work"]
        assert job.restart_overhead_spent == outcome["restart_overhead"]
        assert job.waiting_time == outcome["waiting_time"]
        assert job.ran_borrowed == outcome["ran_borrowed"]
    lifecycle = list(
        JobEvent.objects.filter(type__in=(*JobEvent.LIFECYCLE, JobEvent.Type.STOPPED))
        .order_by("at", "id")
        .values_list("job__name", "type", "cause", "by__name", "borrowed")
    )
    assert lifecycle == [
        (
            e["job"],
            e["type"],
            e.get("cause") or "",
            e.get("by"),
            bool(e.get("borrowed")),
        )
        for e in result["events"]
    ]
    # The lost work of each preemption (or stop after notice) adds up to the job's counter.
    lost = defaultdict(int)
    for name_, kind, detail in JobEvent.objects.filter(
        type__in=("PREEMPTED", "STOPPED")
    ).values_list("job__name", "type", "detail"):
        assert ("lost_work" in detail) != ("grace_until" in detail), (kind, detail)
        lost[name_] += detail.get("lost_work", 0)
    for job_id, outcome in result["jobs"].items():
        assert lost.get(job_id, 0) == outcome["lost_work"]
        assert jobs[job_id].notice_time == outcome.get("notice_time", 0)
        assert jobs[job_id].protected_blocks == outcome.get("protected_blocks", 0)
    # Each start that ended a reclaim episode carries its wait: they are the engine's.
    waits = sorted(
        detail["reclaim_wait"]
        for detail in JobEvent.objects.filter(type="STARTED").values_list("detail", flat=True)
        if "reclaim_wait" in detail
    )
    if "time_to_reclaim" in result:
        engine = result["time_to_reclaim"]
        assert len(waits) == engine["count"]
        assert (waits[-1] if waits else None) == engine["max"]
        assert (waits[(len(waits) - 1) // 2] if waits else None) == engine["p50"]
    else:
        assert waits == []  # a v1 document has no episodes (spec V2)


# Our own scenario with many jobs: four days of the Philly trace from 30 March, so the
# record spans two months; scaled down for contention, with checkpoints, restart
# overhead, priorities (in-share preemptions), a retry bound and a capacity dip.
def many_jobs_document() -> dict:
    options = TraceOptions(
        scale=0.05,
        seed=7,
        in_share_preemption=True,
        checkpoint_interval=1200,
        restart_overhead=120,
        start=dt.datetime(2017, 10, 16),
        days=4,
        name="philly-four-days",
    )
    document = build_scenario(read_trace(), read_vc_sizes(), options)
    document["queue"]["default_preemption_retries"] = 4
    capacity = document["queue"]["capacity"]["gpu"]
    document["actions"] = [
        {"at": 86400, "type": "set_capacity", "capacity": {"gpu": capacity * 2 // 3}},
        {"at": 86400 + 7200, "type": "set_capacity", "capacity": {"gpu": capacity}},
    ]
    priorities = [job for job in document["jobs"] if job["submit_at"] > 40000][:5]
    document["actions"] += [
        {"at": job["submit_at"] + 60, "type": "set_priority", "job": job["id"], "priority": 9}
        for job in priorities
    ]
    document["actions"].sort(key=lambda action: action["at"])
    return document


@pytest.mark.slow
@pytest.mark.django_db
def test_many_jobs_across_a_month_boundary():
    document = many_jobs_document()
    origin = dt.datetime(2025, 3, 30, tzinfo=dt.UTC)
    result, summary, queue = load_into_db(document, origin=origin, queue_name="philly-four")
    assert len(result["jobs"]) > 1000
    assert sum(job["preemptions"] for job in result["jobs"].values()) > 100
    april = dt.date(2025, 4, 1)
    for month in (MARCH, april):
        rollups_refresh(month=month)
    for month in (MARCH, april):
        expected = expected_figures(result, document, origin, month)
        assert expected["jobs_finished"] > 0
        data = dashboard_rollups(month=month, queue_id=queue.pk)["current"]
        assert_dashboard_matches(expected, data)
    # Per share: each share's turnaround median, by hand.
    data = dashboard_rollups(month=april, queue_id=queue.pk)
    april_start = dt.datetime(2025, 4, 1, tzinfo=dt.UTC)
    may_start = dt.datetime(2025, 5, 1, tzinfo=dt.UTC)
    for share in data["shares"]:
        by_hand = [
            job["finished_at"] - job["submitted_at"]
            for job in result["jobs"].values()
            if job["share"] == share["share_name"]
            and job["state"] == "SUCCEEDED"
            and april_start <= origin + dt.timedelta(seconds=job["finished_at"]) < may_start
        ]
        assert share["turnaround_s"].get("p50") == rank(by_hand, 50)


@pytest.mark.slow
@pytest.mark.django_db
def test_many_jobs_every_second_of_run_is_progress_lost_or_overhead():
    """Summed over the months, GPU-hours delivered are the work of the jobs that
    succeeded, the work lost (preemptions, failures) and the restart overhead."""
    document = many_jobs_document()
    origin = dt.datetime(2025, 3, 30, tzinfo=dt.UTC)
    result, _, queue = load_into_db(document, origin=origin, queue_name="philly-four")
    last = origin + dt.timedelta(seconds=result["makespan"])
    months = [MARCH]
    while months[-1] < last.date().replace(day=1):
        months.append((months[-1] + dt.timedelta(days=32)).replace(day=1))
    for month in months:
        rollups_refresh(month=month)
    rows = [dashboard_rollups(month=m, queue_id=queue.pk)["current"] for m in months]
    instances = {job["id"]: job["instances"] for job in document["jobs"]}
    durations = {job["id"]: job["duration"] for job in document["jobs"]}
    assert all(job["state"] != "RUNNABLE" for job in result["jobs"].values())
    useful = sum(
        durations[j] * instances[j]
        for j, job in result["jobs"].items()
        if job["state"] == "SUCCEEDED"
    )
    delivered = sum(row["delivered_instance_hours"] for row in rows) * 3600
    lost = sum(sum(row["lost_instance_hours"].values()) for row in rows) * 3600
    overhead = sum(row["restart_overhead_instance_hours"] for row in rows) * 3600
    assert delivered == pytest.approx(useful + lost + overhead)
    # The preemptions' lost work is the jobs' total, month by month together.
    preempted = sum(
        row["lost_instance_hours"][c]
        for row in rows
        for c in ("reclaim", "priority", "capacity_change")
    )
    assert preempted * 3600 == pytest.approx(
        sum(job["lost_work"] * instances[j] for j, job in result["jobs"].items())
    )
    for row in rows:
        parts = sum(row["lost_gpu_hours"].values()) + row["restart_overhead_gpu_hours"]
        assert row["goodput"] == pytest.approx(1 - parts / row["delivered_gpu_hours"])
