"""What-if of interruption contracts (issue 24 point 4): the same workload replayed with
grace 0 and with grace 120 s (or a minimum runtime) on the borrowers, compared on lost
GPU-hours, lender wait and time to reclaim; the numbers are simulate's own."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.errors import InvalidInput
from engine import simulate
from governance.whatif import services
from governance.whatif.compare import compare_policies, scenario_for, with_contracts
from tests.governance.whatif.conftest import lend_and_borrow_qs2, run_now

POLICY = {
    "queue": {"capacity": {"g": 2}},
    "shares": [
        {"name": "lender", "capacity_limits": {"g": 1}, "strategy": "LEND"},
        {"name": "borrower", "capacity_limits": {"g": 1}, "strategy": "LEND_AND_BORROW"},
    ],
}


def job(id_, share, submit_at, duration, **extra):
    return {
        "id": id_,
        "share": share,
        "instance_type": "g",
        "instances": 1,
        "submit_at": submit_at,
        "duration": duration,
        "checkpoint_interval": 300,
        **extra,
    }


# b2 borrows from 0 and checkpoints every 300 s; l1 wants the lender's instance at 100.
# Grace 0: b2 stops at 100 and loses its 100 s; l1 starts at once (time to reclaim 0).
# Grace 120 with a 60 s save on notice: b2 saves and stops at 160, nothing lost, and l1
# waits 60 s. Grace 120 without a save: b2 stops at 220 and loses 220 s; l1 waits 120 s.
JOBS = [
    job("b1", "borrower", 0, 5000),
    job("b2", "borrower", 0, 600),
    job("l1", "lender", 100, 200),
]
GRACE_0 = {"borrower": {"grace": 0}}
GRACE_120 = {"borrower": {"grace": 120, "checkpoint_on_notice": 60}}


def engine_run(contracts):
    jobs = with_contracts(JOBS, contracts)
    names = [share["name"] for share in POLICY["shares"]]
    return simulate(scenario_for(POLICY, jobs, names=names, name="direct"))


def test_grace_trades_lost_work_for_time_to_reclaim():
    results = compare_policies(
        current=POLICY,
        draft=POLICY,
        jobs=JOBS,
        gpus_per_instance={"g": 8},
        contracts={"current": GRACE_0, "draft": GRACE_120},
    )
    before, after = results["current"]["interruptions"], results["draft"]["interruptions"]
    assert before["time_to_reclaim"] == {"n": 1, "p50": 0, "p90": 0, "max": 0}
    assert after["time_to_reclaim"] == {"n": 1, "p50": 60, "p90": 60, "max": 60}
    assert (before["lost_gpu_seconds"], after["lost_gpu_seconds"]) == (100 * 8, 0)
    assert (before["lender_wait_gpu_seconds"], after["lender_wait_gpu_seconds"]) == (0, 60 * 8)
    assert before["stops"]["immediate"] == 1
    assert after["stops"]["checkpointed_on_notice"] == 1
    assert after["notice_gpu_seconds"] == 60 * 8
    # The engine's own figures, run directly.
    for contracts, figures in ((GRACE_0, before), (GRACE_120, after)):
        direct = engine_run(contracts)
        engine = direct.time_to_reclaim
        assert (figures["time_to_reclaim"]["n"], figures["time_to_reclaim"]["max"]) == (
            engine["count"],
            engine["max"],
        )
        assert figures["time_to_reclaim"]["p50"] == engine["p50"]
        assert figures["lost_gpu_seconds"] == 8 * sum(j.lost_work for j in direct.jobs)
    assert results["contracts"] == {"current": GRACE_0, "draft": GRACE_120}


def test_grace_without_a_save_loses_more_and_waits_the_whole_grace():
    results = compare_policies(
        current=POLICY,
        draft=POLICY,
        jobs=JOBS,
        gpus_per_instance={"g": 1},
        contracts={"current": GRACE_0, "draft": {"borrower": {"grace": 120}}},
    )
    after = results["draft"]["interruptions"]
    assert after["time_to_reclaim"]["max"] == 120
    assert after["lost_gpu_seconds"] == 220
    assert after["stops"]["stopped_without_checkpoint"] == 1


def test_a_minimum_runtime_delays_the_reclaim_until_it_ends():
    results = compare_policies(
        current=POLICY,
        draft=POLICY,
        jobs=JOBS,
        gpus_per_instance={"g": 1},
        contracts={"current": {}, "draft": {"borrower": {"min_runtime_reclaim": 1800}}},
    )
    before, after = results["current"]["interruptions"], results["draft"]["interruptions"]
    assert before["time_to_reclaim"]["max"] == 0
    # b2 (the newest borrower) is protected until 1800, but b2 finishes at 600: l1
    # starts then, without a preemption; the protection blocked b2 once at 100.
    direct = engine_run({"borrower": {"min_runtime_reclaim": 1800}})
    assert after["time_to_reclaim"]["max"] == direct.time_to_reclaim["max"] == 500
    assert after["protected_blocks"] == sum(j.protected_blocks for j in direct.jobs) >= 1
    assert after["lost_gpu_seconds"] == 0


def test_without_contracts_the_results_are_as_before():
    results = compare_policies(current=POLICY, draft=POLICY, jobs=JOBS, gpus_per_instance={})
    assert "interruptions" not in results["current"]
    assert results["contracts"] is None


@pytest.mark.django_db
def test_contracts_on_a_comparison_are_checked_and_replayed(comparison, client):
    with pytest.raises(InvalidInput) as error:
        services.comparison_set_contracts(
            actor=comparison.author,
            comparison=comparison,
            contracts={"draft": {"qs2": {"grace": -5, "checkpoint_on_notice": 0}, "nope": {}}},
        )
    assert set(error.value.errors) == {
        "contracts.draft.qs2.grace",
        "contracts.draft.qs2.checkpoint_on_notice",
        "contracts.draft.nope",
    }
    comparison.refresh_from_db()
    assert comparison.contracts == {}
    # The draft lets qs2 borrow, with 120 s of notice: qs1's reclaim waits for it.
    comparison = lend_and_borrow_qs2(comparison)
    services.comparison_set_contracts(
        actor=comparison.author,
        comparison=comparison,
        contracts={"current": {"qs2": {"grace": 0}}, "draft": {"qs2": {"grace": 120}}},
    )
    comparison.refresh_from_db()
    comparison = run_now(comparison)
    assert comparison.status == "DONE"
    figures = comparison.results["draft"]["interruptions"]
    assert figures["time_to_reclaim"]["n"] >= 1
    assert figures["stops"]["stopped_without_checkpoint"] >= 1
    # What the task stored is the pure comparison of the same inputs.
    direct = compare_policies(
        current=comparison.current_policy,
        draft=comparison.draft_policy,
        jobs=comparison.workload_jobs,
        gpus_per_instance=services.gpus_per_instance(policy=comparison.current_policy),
        contracts=comparison.contracts,
    )
    for run in ("current", "draft"):
        assert comparison.results[run]["interruptions"] == direct[run]["interruptions"]
    assert comparison.results["contracts"]["draft"] == {"qs2": {"grace": 120}}
    client.force_login(comparison.author)
    page = client.get(reverse("whatif-detail", args=[comparison.pk])).content.decode()
    assert "lost work against lender wait and time to reclaim" in page
    assert "qs2: grace 2 m 00 s" in page


@pytest.mark.django_db
def test_the_page_sets_a_share_contract_and_refuses_bad_input(comparison, client):
    client.force_login(comparison.author)
    url = reverse("whatif-contracts", args=[comparison.pk])
    response = client.post(url, {"run": "draft", "share": "qs2", "grace": "-1"})
    assert response.status_code == 400
    assert "Ensure this value is greater than or equal to 0" in response.content.decode()
    response = client.post(url, {"run": "draft", "share": "qs9", "grace": "120"})
    assert response.status_code == 400
    comparison.refresh_from_db()
    assert comparison.contracts == {}
    response = client.post(
        url, {"run": "draft", "share": "qs2", "grace": "120", "checkpoint_on_notice": "30"}
    )
    assert response.status_code == 302
    comparison.refresh_from_db()
    assert comparison.contracts == {"draft": {"qs2": {"grace": 120, "checkpoint_on_notice": 30}}}
    page = client.get(reverse("whatif-detail", args=[comparison.pk])).content.decode()
    assert "Draft policy: qs2: grace 2 m 00 s, checkpoint on notice 30 s" in page
    # All fields blank removes the share's contract.
    assert client.post(url, {"run": "draft", "share": "qs2"}).status_code == 302
    comparison.refresh_from_db()
    assert comparison.contracts == {}


@pytest.mark.django_db
def test_the_api_takes_contracts_and_names_a_bad_field(admin, aws_queue, client):
    client.force_login(admin)
    bad = {
        "queue": aws_queue.pk,
        "run": False,
        "contracts": [{"run": "draft", "share": "qs2", "grace": -1}],
    }
    response = client.post("/api/v1/what-if/", bad, content_type="application/json")
    assert response.status_code == 400
    assert "grace" in response.content.decode()
    response = client.post(
        "/api/v1/what-if/",
        {**bad, "contracts": [{"run": "draft", "share": "nope", "grace": 1}]},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "contracts.draft.nope" in response.content.decode()
    good = {**bad, "contracts": [{"run": "draft", "share": "qs2", "grace": 120}]}
    response = client.post("/api/v1/what-if/", good, content_type="application/json")
    assert response.status_code == 201
    assert response.json()["contracts"] == {"draft": {"qs2": {"grace": 120}}}
