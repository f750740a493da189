"""The demo's replayed months carry the interruption contracts of some teams' workload
classes, so the dashboard's reclaim evidence is not 0 s: lenders wait for notice and
protection to run out, some stops save on notice, protection spares jobs."""

from __future__ import annotations

import datetime as dt

import pytest

from demo.history import HISTORY_CONTRACTS, HISTORY_DEFAULT_CONTRACT, HISTORY_PREFIX, seed_history
from demo.organisation import seed_demo
from fleet.models import Job, JobEvent
from governance.dashboards.selectors.reads import dashboard_rollups

END = dt.datetime(2025, 6, 15, tzinfo=dt.UTC)


@pytest.mark.django_db
def test_the_replayed_months_show_reclaim_evidence(capsys):
    seed_demo(password="pw-for-tests-1")
    summary = seed_history(months=3, end=END)
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
