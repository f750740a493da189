"""`fleet.metrics`: the scrape parses as Prometheus's text format, its per-share figures
are the queue page's (`queue_usage`), its preemption counters and time to reclaim come
from the scheduler's own events (real passes on the AWS sample queue), an unlimited
borrow limit is +Inf with its flag, and the query count does not grow with the shares.

The AWS sample queue: 3 ml.g5.xlarge; qs1 (LEND_AND_BORROW, 200 %), qs2 (LEND) and qs3
(RESERVE) each have a limit of 1.
"""

from __future__ import annotations

import datetime as dt
import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet.metrics import metrics_exposition
from fleet.models import InstanceType, Job, QuotaShare
from fleet.selectors import queue_usage
from scheduler.services.jobs import JobData, job_submit
from scheduler.services.passes import scheduling_pass
from tests.factories import (
    CapacityLimitFactory,
    InstanceTypeFactory,
    JobFactory,
    JobQueueFactory,
    QueueCapacityFactory,
    QuotaShareFactory,
    TeamFactory,
    job_definition,
)

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.UTC)
G5 = "ml.g5.xlarge"


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def samples(now: dt.datetime | None = None) -> dict[str, dict[tuple, float]]:
    """The scrape as {sample name: {sorted labels: value}}, through the official parser."""
    body, content_type = metrics_exposition(now=now)
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    text = body.decode()
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def share_key(queue: str, share: str, **extra) -> tuple:
    return tuple(sorted({"queue": queue, "share": share, "instance_type": G5, **extra}.items()))


@pytest.fixture(autouse=True)
def real_time_speed(settings):
    """Simulated jobs do their work in real time, so none ends during the test's passes."""
    settings.SIMULATED_SECONDS_PER_SECOND = 1


@pytest.fixture
def submit(aws_queue):
    revision = job_definition(aws_queue)
    shares = {share.name: share for share in aws_queue.shares.all()}
    g5 = InstanceType.objects.get(name=G5)

    def submit(share: str, name: str, seconds: int = 0, **fields):
        fields.setdefault("expected_duration", 3600)
        data = JobData(
            share=shares[share], name=name, revision=revision, instance_type=g5, **fields
        )
        return job_submit(data=data, submitted_by=None, now=at(seconds))

    return submit


@pytest.fixture
def borrowing(aws_queue, submit):
    """qs1 runs one job within its limit and borrows qs2's idle instance for another;
    a third waits (qs1 may not take qs3's reserved instance)."""
    submit("qs1", "own", priority=5)
    submit("qs1", "borrower", priority=1)
    submit("qs1", "third", priority=1)
    scheduling_pass(queue_id=aws_queue.pk, now=at(0))
    return aws_queue


def test_the_per_share_figures_are_the_queue_pages(borrowing):
    got = samples()
    usage = queue_usage(borrowing)
    names = {
        "quota_share_limit_instances": "limit",
        "quota_share_in_use_within_limit_instances": "within",
        "quota_share_borrowed_instances": "borrowed",
        "quota_share_lent_out_instances": "lent",
        "quota_share_lendable_instances": "lendable",
    }
    for row in usage.shares:
        (bar,) = row.bars
        for metric, field in names.items():
            assert got[metric][share_key("aws-sample", row.share.name)] == getattr(bar, field)
    figures = {
        metric: {
            share: got[metric][share_key("aws-sample", share)] for share in ("qs1", "qs2", "qs3")
        }
        for metric in names
    }
    # What that is: qs1 holds 1 within and 1 borrowed; qs2's idle instance is the one it
    # borrows (lent 1, lendable 0); qs3 holds its idle instance (RESERVE: lends nothing).
    assert figures["quota_share_in_use_within_limit_instances"] == {"qs1": 1, "qs2": 0, "qs3": 0}
    assert figures["quota_share_borrowed_instances"] == {"qs1": 1, "qs2": 0, "qs3": 0}
    assert figures["quota_share_lent_out_instances"] == {"qs1": 0, "qs2": 1, "qs3": 0}
    assert figures["quota_share_lendable_instances"] == {"qs1": 0, "qs2": 0, "qs3": 0}
    assert got["quota_share_waiting_jobs"][share_key("aws-sample", "qs1")] == 1
    assert got["quota_share_waiting_jobs"][share_key("aws-sample", "qs2")] == 0
    queue_key = tuple(sorted({"queue": "aws-sample", "instance_type": G5}.items()))
    assert got["quota_queue_capacity_instances"][queue_key] == 3
    assert got["quota_queue_free_instances"][queue_key] == 1
    # qs1's borrow limit of 200 % of 1 instance; the others cannot borrow.
    assert got["quota_share_borrow_limit_instances"][share_key("aws-sample", "qs1")] == 2
    assert got["quota_share_borrow_limit_instances"][share_key("aws-sample", "qs2")] == 0
    assert got["quota_share_borrow_unlimited"][share_key("aws-sample", "qs1")] == 0


def test_an_idle_lender_is_lendable_not_lent(aws_queue):
    got = samples()
    assert got["quota_share_lendable_instances"][share_key("aws-sample", "qs2")] == 1
    assert got["quota_share_lent_out_instances"][share_key("aws-sample", "qs2")] == 0
    # qs1 lends too (LEND_AND_BORROW); qs3 holds its idle instance.
    assert got["quota_share_lendable_instances"][share_key("aws-sample", "qs1")] == 1
    assert got["quota_share_lendable_instances"][share_key("aws-sample", "qs3")] == 0


def test_a_reclaim_counts_for_the_share_that_caused_it_and_the_one_that_suffered(borrowing, submit):
    """At 100 qs2's owner reclaims its instance: qs1's borrower (given 120 s of notice)
    stops at 220 and the owner starts then, after a reclaim wait of 120 s."""
    Job.objects.filter(name="borrower").update(grace=120)
    submit("qs2", "owner", seconds=100)
    scheduling_pass(queue_id=borrowing.pk, now=at(100))
    scheduling_pass(queue_id=borrowing.pk, now=at(220))
    assert Job.objects.get(name="owner").state == Job.State.RUNNING

    got = samples(now=at(300))
    caused = got["quota_share_preemptions_caused_total"]
    suffered = got["quota_share_preemptions_suffered_total"]
    assert caused == {share_key("aws-sample", "qs2", cause="reclaim"): 1}
    assert suffered == {share_key("aws-sample", "qs1", cause="reclaim"): 1}
    waits = got["quota_share_reclaim_wait_seconds"]
    assert {dict(key)["stat"]: value for key, value in waits.items()} == {
        "p50": 120,
        "p90": 120,
        "max": 120,
    }
    assert all(dict(key)["share"] == "qs2" for key in waits)
    assert got["quota_share_reclaim_episodes"] == {share_key("aws-sample", "qs2"): 1}
    # Outside the window (24 h by default) the episode is no longer reported.
    later = samples(now=at(300 + 25 * 3600))
    assert later.get("quota_share_reclaim_episodes", {}) == {}


def test_an_unlimited_borrow_limit_is_infinite_with_its_flag(aws_queue):
    QuotaShare.objects.filter(name="qs1").update(borrow_limit=-1)
    got = samples()
    assert got["quota_share_borrow_limit_instances"][share_key("aws-sample", "qs1")] == math.inf
    assert got["quota_share_borrow_unlimited"][share_key("aws-sample", "qs1")] == 1
    assert got["quota_share_borrow_unlimited"][share_key("aws-sample", "qs2")] == 0
    assert b"+Inf" in metrics_exposition()[0]


def test_the_query_count_does_not_grow_with_queues_and_shares(
    aws_queue, django_assert_max_num_queries
):
    g5 = InstanceTypeFactory(name=G5)
    for q in range(5):
        queue = JobQueueFactory(name=f"wide-{q}")
        QueueCapacityFactory(queue=queue, instance_type=g5, instances=100)
        for s in range(20):
            share = QuotaShareFactory(
                queue=queue,
                team=TeamFactory(name=f"team-{q}-{s}"),
                name=f"s{s}",
                strategy=QuotaShare.Strategy.LEND_AND_BORROW,
                borrow_limit=100,
                position=s,
            )
            CapacityLimitFactory(share=share, instance_type=g5, max_instances=5)
            JobFactory(share=share, instance_type=g5, state=Job.State.RUNNING, started_at=T0)
            JobFactory(share=share, instance_type=g5)
    with django_assert_max_num_queries(9):
        got = samples()
    assert len(got["quota_share_limit_instances"]) == 3 + 100
    assert got["quota_share_waiting_jobs"][share_key("wide-4", "s19")] == 1


def test_two_lenders_share_what_is_borrowed_in_proportion_to_their_idle_limits():
    """10 instances; LEND shares a (limit 4) and b (limit 2) idle, c (LEND_AND_BORROW,
    limit 2) runs 5: it borrows 3 of the lenders' pool of 6, which they lend 2 and 1
    (4:2); the other 3 of the pool are free, lendable 2 and 1; a RESERVE share's idle
    limit (r, 1) is neither."""
    g5 = InstanceTypeFactory(name=G5)
    queue = JobQueueFactory(name="pool")
    QueueCapacityFactory(queue=queue, instance_type=g5, instances=10)
    shares = {}
    for position, (name, strategy, limit) in enumerate(
        [
            ("a", QuotaShare.Strategy.LEND, 4),
            ("b", QuotaShare.Strategy.LEND, 2),
            ("c", QuotaShare.Strategy.LEND_AND_BORROW, 2),
            ("r", QuotaShare.Strategy.RESERVE, 1),
        ]
    ):
        shares[name] = QuotaShareFactory(
            queue=queue,
            team=TeamFactory(name=f"team-pool-{name}"),
            name=name,
            strategy=strategy,
            borrow_limit=-1 if strategy == QuotaShare.Strategy.LEND_AND_BORROW else None,
            position=position,
        )
        CapacityLimitFactory(share=shares[name], instance_type=g5, max_instances=limit)
    for _ in range(5):
        JobFactory(share=shares["c"], instance_type=g5, state=Job.State.RUNNING, started_at=T0)

    got = samples()
    lent = {name: got["quota_share_lent_out_instances"][share_key("pool", name)] for name in "abcr"}
    lendable = {
        name: got["quota_share_lendable_instances"][share_key("pool", name)] for name in "abcr"
    }
    assert lent == {"a": 2, "b": 1, "c": 0, "r": 0}
    assert lendable == {"a": 2, "b": 1, "c": 0, "r": 0}
    assert got["quota_share_borrowed_instances"][share_key("pool", "c")] == sum(lent.values())
    bars = {row.share.name: row.bars[0] for row in queue_usage(queue).shares}
    assert {name: (bar.lent, bar.lendable) for name, bar in bars.items()} == {
        name: (lent[name], lendable[name]) for name in "abcr"
    }
