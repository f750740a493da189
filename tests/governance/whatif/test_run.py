"""The run: numbers that match `simulate` on the same inputs, progress, cancel, idempotence."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from engine import result_to_json, simulate
from governance.models import WhatIfComparison
from governance.whatif import services, tasks
from tests.governance.whatif.conftest import AWS_PHILLY_MAPPING, lend_and_borrow_qs2, run_now

pytestmark = pytest.mark.django_db
Status = WhatIfComparison.Status


def nearest_rank(values, percent):
    values = sorted(values)
    return values[max(1, -(-percent * len(values) // 100)) - 1] if values else None


def expected_figures(result: dict, jobs: list[dict], share: str | None, horizon: int, gpus: int):
    """What the page must show, recomputed here from the engine's result document."""
    outcomes = [o for o in result["jobs"].values() if share is None or o["share"] == share]
    size = {job["id"]: job["instances"] for job in jobs}
    ids = [i for i, o in result["jobs"].items() if share is None or o["share"] == share]
    turnaround = [
        o["finished_at"] - o["submitted_at"] for o in outcomes if o["state"] == "SUCCEEDED"
    ]
    held = 0
    started = {}
    for event in result["events"]:
        if event["job"] not in ids:
            continue
        if event["type"] == "STARTED":
            started[event["job"]] = event["t"]
        elif event["type"] in ("PREEMPTED", "SUCCEEDED", "FAILED") and event["job"] in started:
            held += (event["t"] - started.pop(event["job"])) * size[event["job"]]
    return {
        "jobs": len(outcomes),
        "turnaround_p50": nearest_rank(turnaround, 50),
        "turnaround_p90": nearest_rank(turnaround, 90),
        "waiting_mean": round(sum(o["waiting_time"] for o in outcomes) / len(outcomes)),
        "preemptions": sum(o["preemptions"] for o in outcomes),
        "reclaims": sum(
            1
            for e in result["events"]
            if e["type"] == "PREEMPTED" and e["cause"] == "reclaim" and e["job"] in ids
        ),
        "lost_gpu_seconds": sum(result["jobs"][i]["lost_work"] * size[i] for i in ids),
        "restart_gpu_seconds": sum(result["jobs"][i]["restart_overhead"] * size[i] for i in ids),
        "never_ran": sum(o["first_started_at"] is None for o in outcomes),
        "utilisation": held / (gpus * horizon),
    }


def test_comparison_numbers_match_simulate_on_the_same_inputs(comparison):
    lend_and_borrow_qs2(comparison)
    comparison.refresh_from_db()
    comparison = run_now(comparison)
    assert comparison.status == Status.DONE
    assert comparison.progress == 100

    names = [s["name"] for s in comparison.current_policy["shares"]]
    jobs = comparison.workload_jobs
    expected = {}
    for key, policy in (("current", comparison.current_policy), ("draft", comparison.draft_policy)):
        # The scenario built by hand: the policy document without `team`, and the jobs.
        shares = [{k: v for k, v in share.items() if k != "team"} for share in policy["shares"]]
        scenario = {"name": "test", "queue": policy["queue"], "shares": shares, "jobs": jobs}
        expected[key] = result_to_json(simulate(scenario))
    horizon = max(expected["current"]["makespan"], expected["draft"]["makespan"])
    results = comparison.results
    for key in ("current", "draft"):
        stored = results[key]
        assert stored["makespan"] == expected[key]["makespan"]
        assert stored["horizon"] == horizon
        overall = expected_figures(expected[key], jobs, None, horizon, gpus=3)
        assert {k: stored["overall"][k] for k in overall} == pytest.approx(overall)
        for name in names:
            policy = comparison.current_policy if key == "current" else comparison.draft_policy
            limit = next(s for s in policy["shares"] if s["name"] == name)["capacity_limits"]
            figures = expected_figures(expected[key], jobs, name, horizon, sum(limit.values()))
            assert {k: stored["shares"][name][k] for k in figures} == pytest.approx(figures)
    # The draft changes something on this workload, and the page says what in words.
    assert results["current"] != results["draft"]
    assert results["sentences"]
    assert all(line.endswith(".") for line in results["sentences"])


def test_the_task_is_idempotent(comparison):
    services.comparison_run(actor=comparison.author, comparison=comparison)
    assert tasks.run_comparison(comparison.pk) == Status.DONE
    comparison.refresh_from_db()
    finished = comparison.finished_at
    assert tasks.run_comparison(comparison.pk) == Status.DONE  # a second delivery: nothing
    comparison.refresh_from_db()
    assert comparison.finished_at == finished
    assert tasks.run_comparison(999_999) == "missing"


def test_a_queued_run_is_cancelled_at_once(comparison):
    services.comparison_run(actor=comparison.author, comparison=comparison)
    services.comparison_cancel(actor=comparison.author, comparison=comparison)
    comparison.refresh_from_db()
    assert comparison.status == Status.CANCELLED
    assert services.comparison_execute(comparison_id=comparison.pk) == Status.CANCELLED
    comparison.refresh_from_db()
    assert comparison.results is None


def test_a_running_comparison_stops_at_its_next_progress_report(comparison, monkeypatch):
    """Cancel while the engine runs: the progress callback raises, the row says cancelled."""
    # 30 days of the trace: long enough for the engine to report progress mid-replay.
    services.comparison_set_workload(
        actor=comparison.author,
        comparison=comparison,
        kind="PHILLY",
        days=30,
        scale=0.05,
        mapping=AWS_PHILLY_MAPPING,
    )
    services.comparison_run(actor=comparison.author, comparison=comparison)
    seen = []
    real = services._ProgressWriter.__call__

    def cancel_midway(self, fraction, label):
        seen.append(fraction)
        if len(seen) == 2:  # the engine is simulating the current policy
            services.comparison_cancel(actor=comparison.author, comparison=comparison)
        return real(self, fraction, label)

    monkeypatch.setattr(services._ProgressWriter, "__call__", cancel_midway)
    assert services.comparison_execute(comparison_id=comparison.pk) == Status.CANCELLED
    comparison.refresh_from_db()
    assert comparison.status == Status.CANCELLED
    assert comparison.results is None
    assert max(seen) < 0.5  # the draft was never simulated


def test_progress_is_written_on_the_row(comparison, monkeypatch):
    services.comparison_run(actor=comparison.author, comparison=comparison)
    snapshots = []
    real = services._ProgressWriter.__call__

    def spy(self, fraction, label):
        real(self, fraction, label)
        snapshots.append(
            WhatIfComparison.objects.values_list("progress", "progress_label").get(pk=comparison.pk)
        )

    monkeypatch.setattr(services._ProgressWriter, "__call__", spy)
    services.comparison_execute(comparison_id=comparison.pk)
    progress = [p for p, _ in snapshots]
    assert progress == sorted(progress) and progress[-1] == 100
    assert any("draft policy" in label for _, label in snapshots)


def test_an_empty_workload_cannot_run(admin, aws_queue):
    comparison = services.comparison_create(actor=admin, queue=aws_queue)
    assert comparison.workload_jobs == []
    with pytest.raises(InvalidInput, match="no jobs"):
        services.comparison_run(actor=comparison.author, comparison=comparison)
