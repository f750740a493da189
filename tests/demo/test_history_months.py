"""The demo's months of history: the Philly trace's three months replayed onto the demo
queue once for this module (some 200 s of replay and rollups), then read by each test.

The history is written inside a transaction that the module's end rolls back; each test
runs in a savepoint of it (pytest-django's `db`), so what a test writes goes with it and
nothing of the history reaches another module.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction
from django.urls import reverse

from demo.history import (
    HISTORY_CONTRACTS,
    HISTORY_DEFAULT_CONTRACT,
    HISTORY_PREFIX,
    seed_history,
)
from demo.organisation import seed_demo
from engine import CONTRACT_FIELDS, result_to_json, simulate
from fleet.bridge import engine_id
from fleet.models import Job, JobEvent, JobQueue
from fleet.selectors import queue_document
from governance.dashboards.selectors.reads import dashboard_rollups
from governance.models import ExceptionRequest, MonthlyRollup, PolicyChange
from governance.whatif import services
from tests.governance.whatif.conftest import run_now
from tests.governance.whatif.test_demo_philly import DRAFT, headline, live_and_draft_shares

# The three replayed months end at a fixed month, so the figures are the same whatever
# today's date (the demo itself ends them at the current month's start).
END = dt.datetime(2025, 6, 15, tzinfo=dt.UTC)
SAME = "Both policies give the same outcome"

# One worker seeds the history once for the module (pytest-xdist: one group).
pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.xdist_group("history")]


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    """The demo organisation and its three replayed months (users, summary)."""
    with django_db_blocker.unblock(), transaction.atomic():
        users = seed_demo(password="pw-for-tests-1")
        summary = seed_history(months=3, end=END)
        yield users, summary
        transaction.set_rollback(True)


def test_seed_history_writes_three_months_once(client, history):
    users, summary = history
    assert summary.months == [dt.date(2025, 3, 1), dt.date(2025, 4, 1), dt.date(2025, 5, 1)]
    assert summary.jobs > 50_000
    jobs = Job.objects.filter(name__startswith=HISTORY_PREFIX)
    assert jobs.count() == summary.jobs
    # Nothing replayed is left for the live scheduler, nothing is in the future.
    assert not jobs.filter(state__in=Job.LIVE_STATES).exists()
    replayed = JobEvent.objects.filter(job__name__startswith=HISTORY_PREFIX)
    assert not replayed.filter(at__gte=dt.datetime(2025, 6, 1, tzinfo=dt.UTC)).exists()
    assert JobEvent.objects.filter(type="PREEMPTED", cause="reclaim").exists()
    assert JobEvent.objects.filter(type="PREEMPTED", cause="capacity_change").exists()
    assert ExceptionRequest.objects.filter(state="DENIED").exists()
    assert PolicyChange.objects.filter(cause="exception", created_at__lt=END).exists()
    for month in summary.months:
        data = dashboard_rollups(month=month)["current"]
        assert data["jobs_ended"] > 1000
        assert data["preemptions_total"] > 0
        assert data["policy_edits"] > 0
        assert data["exceptions"]["filed"] > 0
    rows = MonthlyRollup.objects.count()

    # The seeded prices cost the replayed months: the dashboard's cost table has figures
    # on the first start (philly.gpu at 2.20 USD per instance-hour, one GPU each).
    client.force_login(users["leader"])
    page = client.get(reverse("dashboard"), {"month": summary.months[-1].strftime("%Y-%m")})
    assert "philly.gpu 2.2000 USD" in page.content.decode()
    teams = {row["name"]: row for row in page.context["cost"]["teams"]}
    busiest = teams["vc-ee9e8c"]
    assert busiest["cost"]["within_limit"] > 0
    assert busiest["cost"]["within_limit"] == pytest.approx(
        busiest["gpu_hours"]["within_limit"] * 2.2, rel=1e-6
    )

    again = seed_history(months=3, end=END)
    assert again.skipped
    assert Job.objects.filter(name__startswith=HISTORY_PREFIX).count() == summary.jobs
    assert MonthlyRollup.objects.count() == rows


def test_the_replayed_months_show_reclaim_evidence(capsys, history):
    _, summary = history
    replayed = Job.objects.filter(name__startswith=HISTORY_PREFIX)
    for share, (name, contract) in HISTORY_CONTRACTS.items():
        jobs = replayed.filter(share__name=share)
        assert jobs.exists(), share
        assert not jobs.exclude(workload_class=name).exists()
        assert jobs.filter(grace=contract.get("grace", 0)).count() == jobs.count()
    others = replayed.exclude(share__name__in=HISTORY_CONTRACTS)
    assert others.exists()
    assert not others.exclude(workload_class=HISTORY_DEFAULT_CONTRACT[0]).exists()
    events = JobEvent.objects.filter(job__name__startswith=HISTORY_PREFIX)
    assert events.filter(type="STOPPED", detail__saved_on_notice=True).exists()
    assert events.filter(type="STOPPED", detail__saved_on_notice=False).exists()
    assert replayed.filter(protected_blocks__gt=0).exists()
    assert events.filter(type="STARTED", detail__reclaim_wait__gt=0).exists()
    for month in summary.months:
        data = dashboard_rollups(month=month)["current"]
        with capsys.disabled():
            print(
                f"\n{month:%Y-%m}: preemptions {data['preemptions']}, time to reclaim "
                f"{data['reclaim_time_s']}, lender wait {data['time_to_reclaim_s']}, stops "
                f"{data['stops']['total']}, lost by stop "
                f"{data['lost_gpu_hours_by_stop']['total']}, "
                f"avoided {data['preemptions_avoided']}"
            )
    # The busiest month (the trace's first weeks) has plenty of reclaims, and they are
    # not instantaneous: borrowers with contracts make lenders wait.
    busiest = dashboard_rollups(month=summary.months[0])["current"]
    assert busiest["reclaim_time_s"]["n"] > 30
    assert busiest["reclaim_time_s"]["p90"] > 0
    assert busiest["stops"]["total"]["checkpointed_on_notice"] > 0
    assert busiest["preemptions_avoided"]["avoided"] > 0
    # The figures of the last month, per share, for the record (pytest -s shows them).
    stored = dashboard_rollups(month=summary.months[0])
    with capsys.disabled():
        print(f"\nTime to reclaim, {summary.months[0]:%B %Y}: (n, p50, p90, max) seconds")
        ttr = stored["current"]["reclaim_time_s"]
        print(f"  all shares: {ttr['n']}, {ttr.get('p50')}, {ttr.get('p90')}, {ttr.get('max')}")
        for share in stored["shares"]:
            ttr = share["reclaim_time_s"]
            if ttr["n"]:
                print(
                    f"  {share['share_name']}: {ttr['n']}, {ttr['p50']}, {ttr['p90']}, {ttr['max']}"
                )
        for name, figures in stored["current"]["by_class"].items():
            ttr = figures["reclaim_time_s"]
            print(
                f"  class {name or '(none)'}: ttr n={ttr['n']} p50={ttr.get('p50')} "
                f"p90={ttr.get('p90')} max={ttr.get('max')}; stops {figures['stops']}; "
                f"lost {figures['lost_gpu_hours_by_stop']}; "
                f"avoided {figures['preemptions_avoided']}"
            )


def test_the_demos_default_what_if_shows_what_the_draft_changes(capsys, history):
    """A newcomer's first what-if on the demo's Philly queue (the recorded jobs of the
    default period, scale 1) with the issue's draft: the queue is sized to the trace's
    demand, so the replay contends and the verdict is not "the same outcome"; its
    figures are those of `simulate` of the same document."""
    users, _ = history
    admin, philly = users["admin"], JobQueue.objects.get(name="philly")
    comparison = services.comparison_create(actor=admin, queue=philly)

    # The default period: the 30 days up to the last replayed submission (the replayed
    # months end at the start of END's month).
    recorded = Job.objects.filter(queue=philly)
    last = recorded.order_by("-submitted_at").values_list("submitted_at", flat=True).first()
    assert last < dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
    end = last.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    start = end - dt.timedelta(days=30)
    assert comparison.workload_description.startswith(
        f"{recorded.filter(submitted_at__gte=start).count()} jobs recorded on philly from "
        f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"
    )
    for edit in DRAFT:
        services.draft_share_edit(actor=admin, comparison=comparison, edit=edit)
    comparison = run_now(comparison)
    assert comparison.status == "DONE", comparison.error
    results = comparison.results

    # Contention: the fleet is busy, jobs wait, and the draft makes a difference.
    assert results["current"]["overall"]["utilisation"] > 0.1
    assert results["current"]["overall"]["waiting_mean"] > 0
    assert not any(line.startswith(SAME) for line in results["sentences"])
    assert (
        results["draft"]["overall"]["waiting_mean"] > results["current"]["overall"]["waiting_mean"]
    )

    live, draft = live_and_draft_shares(philly)
    for key, shares in (("current", live), ("draft", draft)):
        result = result_to_json(simulate(recorded_document(philly, shares, start, end, key)))
        figures = results[key]["overall"]
        expected = headline(result)
        assert {name: figures.get(name, results[key].get(name)) for name in expected} == (
            expected
        ), key
        for name, share in results[key]["shares"].items():
            mine = [job for job in result["jobs"].values() if job["share"] == name]
            assert share["jobs"] == len(mine), (key, name)
            if mine:
                waiting = round(sum(job["waiting_time"] for job in mine) / len(mine))
                assert share["waiting_mean"] == waiting, (key, name)
    with capsys.disabled():
        print(f"\n{comparison.workload_description}")
        for key in ("current", "draft"):
            overall = results[key]["overall"]
            print(
                f"  {key}: mean wait {overall['waiting_mean']} s, busy "
                f"{overall['utilisation']:.0%}, preemptions {overall['preemptions']}"
            )
        print("  " + " ".join(results["sentences"]))


def recorded_document(queue, policy_shares, start, end, name):
    """The scenario a recorded what-if should replay, built from the Job rows without
    the what-if's code: the queue's jobs submitted in [start, end), in submission order,
    their seconds from the first one, with the contract fields each copied."""
    rows = list(
        Job.objects.filter(queue=queue, submitted_at__gte=start, submitted_at__lt=end)
        .select_related("share", "instance_type")
        .order_by("submitted_at", "id")
    )
    origin = int(rows[0].submitted_at.timestamp())
    jobs = []
    for row in rows:
        job = {
            "id": engine_id(row.pk),
            "share": row.share.name,
            "priority": row.priority,
            "instance_type": row.instance_type.name,
            "instances": row.instances,
            "submit_at": int(row.submitted_at.timestamp()) - origin,
            "duration": row.expected_duration,
            "restart_overhead": row.restart_overhead,
        }
        if row.checkpoint_interval:
            job["checkpoint_interval"] = row.checkpoint_interval
        if row.preemption_retries is not None:
            job["preemption_retries"] = row.preemption_retries
        for field in CONTRACT_FIELDS:
            if getattr(row, field):
                job[field] = getattr(row, field)
        jobs.append(job)
    return {"name": name, "queue": queue_document(queue), "shares": policy_shares, "jobs": jobs}
