"""Fixtures of the what-if tests: a comparison of the AWS sample queue with a small
recorded workload, and a helper that runs it as the task does."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from fleet.models import QuotaShare
from governance.models import WhatIfComparison
from governance.whatif import services
from tests.factories import JobFactory

# The AWS sample queue's shares are named for no Philly team: a Philly window replays
# there only with a mapping (the trace's three busiest teams; the others are left out).
AWS_PHILLY_MAPPING = {"6214e9": "qs1", "11cb48": "qs2", "6c71a0": "qs3"}


def record_jobs(queue, *, now: dt.datetime | None = None) -> list:
    """A busy afternoon on the AWS sample queue: qs2 has more work than its one instance,
    then qs1 wants its own instance back."""
    now = now or timezone.now()
    base = now - dt.timedelta(days=2)
    shares = {share.name: share for share in queue.shares.all()}
    itype = queue.capacities.get().instance_type
    plan = [
        ("qs2", 0, 3600, 0),
        ("qs2", 0, 3600, 0),
        ("qs2", 30, 1800, 0),
        ("qs3", 100, 1200, 0),
        ("qs1", 2000, 3600, 0),
        ("qs1", 2100, 1800, 1),
        ("qs2", 6000, 600, 0),
    ]
    jobs = []
    for number, (share, offset, duration, priority) in enumerate(plan):
        jobs.append(
            JobFactory(
                share=shares[share],
                name=f"recorded-{number}",
                instance_type=itype,
                expected_duration=duration,
                priority=priority,
                checkpoint_interval=600,
                restart_overhead=60,
                submitted_at=base + dt.timedelta(seconds=offset),
            )
        )
    return jobs


def lend_and_borrow_qs2(comparison: WhatIfComparison) -> WhatIfComparison:
    """The journey's change: qs2 switches from LEND to LEND_AND_BORROW (unlimited)."""
    index = [s["name"] for s in comparison.draft_policy["shares"]].index("qs2")
    share = QuotaShare.objects.get(queue=comparison.queue, name="qs2")
    data = services.ShareData(
        name="qs2",
        team=share.team,
        strategy=QuotaShare.Strategy.LEND_AND_BORROW,
        borrow_limit=None,
        in_share_preemption=False,
        capacity_limits={"ml.g5.xlarge": 1},
    )
    return services.draft_share_update(
        actor=comparison.author, comparison=comparison, index=index, data=data
    )


def run_now(comparison: WhatIfComparison) -> WhatIfComparison:
    """Queue the run and execute the task body here (no worker in tests)."""
    services.comparison_run(actor=comparison.author, comparison=comparison)
    services.comparison_execute(comparison_id=comparison.pk)
    comparison.refresh_from_db()
    return comparison


@pytest.fixture
def comparison(admin, aws_queue):
    record_jobs(aws_queue)
    return services.comparison_create(actor=admin, queue=aws_queue)
