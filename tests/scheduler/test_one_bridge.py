"""One bridge from the database to the engine: for the same rows, the live pass, the
impact preview and the what-if replay give the engine the same shares, capacity, job
ids and job order (fleet.bridge is the only module that translates them)."""

from __future__ import annotations

import datetime as dt
from unittest import mock

import pytest
from django.utils import timezone

from engine import assess_policy_change, load_scenario
from fleet.bridge import BORROW_UNLIMITED, engine_id, queue_policy, queue_state
from fleet.models import QuotaShare
from fleet.selectors import share_document
from governance.policy import impact
from governance.whatif import services as whatif
from governance.whatif.compare import scenario_for
from tests.factories import (
    CapacityLimitFactory,
    InstanceTypeFactory,
    JobFactory,
    JobQueueFactory,
    QueueCapacityFactory,
    QuotaShareFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows():
    """A queue of three shares (one borrows without a stored limit: NULL) and five
    waiting jobs. Jobs 99 and 100 are submitted in one second, 100 after 99: as text
    `job-100` sorts before `job-99`. Job 101 comes 0.4 s after job 99 but in the next
    whole second."""
    queue = JobQueueFactory(name="bridge", default_preemption_retries=2)
    big = InstanceTypeFactory(name="ml.g5.12xlarge", gpu_count=4)
    small = InstanceTypeFactory(name="ml.g5.xlarge", gpu_count=1)
    QueueCapacityFactory(queue=queue, instance_type=big, instances=2)
    QueueCapacityFactory(queue=queue, instance_type=small, instances=3)
    shares = {}
    for position, (name, strategy, borrow) in enumerate(
        [
            ("unbounded", QuotaShare.Strategy.LEND_AND_BORROW, None),
            ("capped", QuotaShare.Strategy.LEND_AND_BORROW, 50),
            ("lender", QuotaShare.Strategy.LEND, None),
        ]
    ):
        shares[name] = QuotaShareFactory(
            queue=queue, name=name, strategy=strategy, borrow_limit=borrow, position=position
        )
        CapacityLimitFactory(share=shares[name], instance_type=small, max_instances=1)
    CapacityLimitFactory(share=shares["capped"], instance_type=big, max_instances=1)
    second = (timezone.now() - dt.timedelta(hours=1)).replace(microsecond=0)
    for pk, share, itype, offset, priority in [
        (99, "unbounded", small, 0.3, 0),
        (100, "unbounded", small, 0.6, 0),
        (101, "unbounded", small, 1.1, 0),
        (102, "capped", big, 0.9, 5),
        (103, "lender", small, 2.0, 0),
    ]:
        JobFactory(
            pk=pk,
            share=shares[share],
            instance_type=itype,
            instances=2,
            priority=priority,
            submitted_at=second + dt.timedelta(seconds=offset),
        )
    return queue


def _order(jobs, origin: int) -> list[str]:
    """The engine's queue order of waiting jobs: priority, whole second, then id."""
    return [
        job_id for _, _, job_id in sorted((-p, submitted - origin, i) for p, submitted, i in jobs)
    ]


def test_live_impact_and_whatif_feed_the_engine_the_same_inputs(rows, admin):
    queue = rows
    now = timezone.now()
    live = queue_state(queue, now=now, policy=queue_policy(queue))

    # The impact preview of keeping the policy as it is: what it hands the engine.
    with mock.patch.object(impact, "assess_policy_change", wraps=assess_policy_change) as spy:
        impact.policy_impact(
            queue=queue,
            share_docs=[share_document(share) for share in queue.shares.order_by("position")],
            capacity=live.snapshot.queue.capacity,
        )
    (preview_snapshot,), preview = spy.call_args

    # The what-if replay of the jobs recorded on the queue.
    comparison = whatif.comparison_create(actor=admin, queue=queue, now=now)
    names = [share["name"] for share in comparison.current_policy["shares"]]
    replay = load_scenario(
        scenario_for(
            comparison.current_policy, comparison.workload_jobs, names=names, name="replay"
        )
    )

    # Shares, the NULL borrow limit read as unlimited by all three.
    assert live.snapshot.shares[0].borrow_limit == BORROW_UNLIMITED
    assert preview_snapshot.shares == live.snapshot.shares
    assert tuple(preview["shares"]) == live.snapshot.shares
    assert replay.shares == live.snapshot.shares
    # Capacity and the queue's settings.
    assert preview_snapshot.queue == live.snapshot.queue
    assert preview["capacity"] == live.snapshot.queue.capacity
    assert replay.queue == live.snapshot.queue
    # Jobs: the same ids, and the same order in the engine's queue.
    assert preview_snapshot.pending == live.snapshot.pending
    assert [job.id for job in replay.jobs] == [engine_id(pk) for pk in (99, 100, 102, 101, 103)]
    origin = min(job.submitted_at for job in live.snapshot.pending)
    live_order = _order([(j.priority, j.submitted_at, j.id) for j in live.snapshot.pending], origin)
    replay_order = _order([(j.priority, j.submit_at, j.id) for j in replay.jobs], 0)
    assert replay_order == live_order
    assert live_order == [engine_id(pk) for pk in (102, 99, 100, 101, 103)]
    live_jobs = {job.id: job for job in live.snapshot.pending}
    for job in replay.jobs:
        twin = live_jobs[job.id]
        assert (job.share, job.priority, job.instance_type, job.instances) == (
            twin.share,
            twin.priority,
            twin.instance_type,
            twin.instances,
        )
        assert job.submit_at == twin.submitted_at - origin
