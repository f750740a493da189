"""The live pass reads only what it can decide on (fleet.bridge.fed_queue_state)
and decides what the pass over every waiting job decides (`full=True`).

Random queues evolve over a dozen instants (submissions with ties within a second,
simulated jobs finishing, priority changes, misconfigured jobs, a runnable_time_limit,
RESERVE, lending and borrowing shares, in-share preemption, pages of two jobs so heads
come in several pages): at each instant the full pass runs and is rolled back, then the
lazily fed pass runs on the same rows; both must write the same rows and events.
"""

from __future__ import annotations

import random

import pytest
from django.db import transaction

from fleet.models import CapacityLimit, InstanceType, Job, JobEvent, QueueCapacity, QuotaShare
from scheduler.models import QueuePassState
from scheduler.services.jobs import job_set_priority
from scheduler.services.passes import DECIDED_FIELDS, scheduling_pass

pytestmark = pytest.mark.django_db

STRATEGIES = ["RESERVE", "LEND", "LEND_AND_BORROW", "LEND_AND_BORROW"]


def picture(queue):
    jobs = list(Job.objects.filter(queue=queue).order_by("pk").values("pk", *DECIDED_FIELDS))
    events = list(
        JobEvent.objects.filter(job__queue=queue)
        .order_by("pk")
        .values_list("job_id", "at", "type", "cause", "by_id", "borrowed", "attempt", "detail")
    )
    return jobs, events


def randomize_policy(rng: random.Random, queue) -> None:
    QueueCapacity.objects.filter(queue=queue).update(instances=rng.randint(2, 8))
    queue.runnable_time_limit = rng.choice([None, 25, 60])
    queue.save(update_fields=["runnable_time_limit"])
    for share in queue.shares.all():
        strategy = rng.choice(STRATEGIES)
        QuotaShare.objects.filter(pk=share.pk).update(
            strategy=strategy,
            borrow_limit=rng.choice([None, 0, 50, 200]) if strategy == "LEND_AND_BORROW" else None,
            in_share_preemption=rng.random() < 0.5,
        )
        limit = rng.randint(0, 4)
        if limit:
            itype = InstanceType.objects.get(name="ml.g5.xlarge")
            CapacityLimit.objects.update_or_create(
                share=share, instance_type=itype, defaults={"max_instances": limit}
            )
        else:
            CapacityLimit.objects.filter(share=share).delete()


def compare_one_instant(queue, now, page):
    sid = transaction.savepoint()
    full = scheduling_pass(queue_id=queue.pk, now=now, full=True)
    expected = picture(queue)
    transaction.savepoint_rollback(sid)
    fed = scheduling_pass(queue_id=queue.pk, now=now, page=page)
    assert (fed.finished, fed.started, fed.preempted, fed.failed) == (
        full.finished,
        full.started,
        full.preempted,
        full.failed,
    )
    assert picture(queue) == expected
    return fed


def reclaiming_policy(rng: random.Random, queue) -> None:
    """A random policy under which shares borrow and reclaim, and preempt in-share."""
    QueueCapacity.objects.filter(queue=queue).update(instances=rng.randint(3, 5))
    itype = InstanceType.objects.get(name="ml.g5.xlarge")
    for share, strategy in zip(
        queue.shares.order_by("position"),
        ["LEND_AND_BORROW", "LEND", "LEND_AND_BORROW"],
        strict=True,
    ):
        QuotaShare.objects.filter(pk=share.pk).update(
            strategy=strategy,
            borrow_limit=-1 if strategy == "LEND_AND_BORROW" else None,
            in_share_preemption=True,
        )
        CapacityLimit.objects.update_or_create(
            share=share, instance_type=itype, defaults={"max_instances": rng.randint(1, 2)}
        )


def random_contract(rng: random.Random) -> dict:
    """An interruption contract (spec v2), none a third of the time."""
    if rng.random() < 0.33:
        return {}
    return {
        "grace": rng.choice([0, 5, 15, 25]),
        "checkpoint_on_notice": rng.choice([None, 3, 20]),
        "min_runtime_reclaim": rng.choice([0, 0, 15]),
        "min_runtime_preempt": rng.choice([0, 0, 25]),
    }


def evolve(seed, queue, shares, submit, clock, run_pass, contracts=False) -> None:
    """Twelve instants of a random queue; `run_pass(now, page)` runs each one's pass.
    With `contracts`, jobs have random interruption contracts: victims get notice,
    STOPPING jobs hold their capacity, starters wait and hold what is freed for them."""
    rng = random.Random(seed)
    if contracts:
        reclaiming_policy(rng, queue)
    else:
        randomize_policy(rng, queue)
    names = list(shares)
    for instant in range(12):
        now = instant * 10
        if instant == 7 and rng.random() < 0.5:
            randomize_policy(rng, queue)  # a policy change: the next pass reads everything
        for number in range(rng.randint(0, 6)):
            job = submit(
                rng.choice(names),
                f"j{instant}-{number}",
                at=now - rng.randint(0, 1),
                priority=rng.randint(0, 3),
                instances=rng.choice([1, 1, 2] if contracts else [1, 1, 1, 2, 2, 3, 5]),
                expected_duration=rng.randint(30, 120) if contracts else rng.randint(10, 90),
            )
            if contracts:
                Job.objects.filter(pk=job.pk).update(**random_contract(rng))
        waiting = list(
            Job.objects.filter(queue=queue, state="RUNNABLE").values_list("pk", flat=True)
        )
        if waiting and rng.random() < 0.4:
            job_set_priority(job_id=rng.choice(waiting), priority=rng.randint(0, 4), now=clock(now))
        run_pass(clock(now), rng.choice([1, 2, 3]))


@pytest.mark.parametrize("seed", range(12))
def test_the_fed_pass_writes_what_the_full_pass_writes(seed, queue, shares, submit, clock):
    decided = []

    def both(now, page):
        outcome = compare_one_instant(queue, now, page)
        decided.extend(outcome.started + outcome.preempted + outcome.failed)

    evolve(seed, queue, shares, submit, clock, both)
    assert decided, "the random queue decided nothing"


@pytest.mark.parametrize("seed", range(12))
def test_the_fed_pass_writes_what_the_full_pass_writes_with_contracts(
    seed, queue, shares, submit, clock
):
    decided = []

    def both(now, page):
        outcome = compare_one_instant(queue, now, page)
        decided.extend(outcome.started + outcome.noticed + outcome.stopped)

    evolve(seed, queue, shares, submit, clock, both, contracts=True)
    assert decided, "the random queue decided nothing"
    print(f"seed {seed}: {JobEvent.objects.filter(type='STOPPED').count()} stops after notice")


@pytest.mark.slow
def test_the_comparison_covers_what_matters(queue, shares, submit, clock):
    """The random queues of the comparison reclaim, preempt in-share, borrow, fail on
    the time limit and hold misconfigured jobs."""
    kinds = set()
    for seed in range(12):
        sid = transaction.savepoint()
        evolve(
            seed,
            queue,
            shares,
            submit,
            clock,
            lambda now, page: scheduling_pass(queue_id=queue.pk, now=now, page=page),
        )
        events = JobEvent.objects.filter(job__queue=queue)
        kinds |= {f"{t}:{c}" for t, c in events.values_list("type", "cause")}
        if events.filter(type="STARTED", borrowed=True).exists():
            kinds.add("borrowed")
        if Job.objects.filter(queue=queue, misconfigured_since__isnull=False).exists():
            kinds.add("misconfigured")
        transaction.savepoint_rollback(sid)
    assert {
        "PREEMPTED:reclaim",
        "PREEMPTED:priority",
        "FAILED:time_limit",
        "borrowed",
        "misconfigured",
    } <= kinds, kinds


def test_a_policy_change_that_cures_misconfigured_jobs_starts_them_next_pass(
    queue, shares, submit, clock
):
    big = submit("qs2", "needs-two", instances=2)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    big.refresh_from_db()
    assert big.reason == "QUOTA_MANAGEMENT_LIMIT_EXCEEDED" and big.misconfigured_since
    # Passes under the same policy neither read nor change it.
    for second in (1, 2):
        submit("qs3", f"small-{second}", at=second)
        scheduling_pass(queue_id=queue.pk, now=clock(second))
    big.refresh_from_db()
    assert (big.state, big.misconfigured_since) == ("RUNNABLE", clock(0))

    CapacityLimit.objects.filter(share=shares["qs2"]).update(max_instances=2)
    outcome = scheduling_pass(queue_id=queue.pk, now=clock(3))

    assert big.pk in outcome.started
    big.refresh_from_db()
    assert (big.state, big.reason, big.misconfigured_since) == ("RUNNING", "", None)


def test_misconfigured_jobs_are_not_read_while_the_policy_holds(
    queue, shares, submit, clock, django_assert_max_num_queries
):
    """Thousands of misconfigured jobs and a long queue cost a pass nothing once judged."""
    from scheduler.services.jobs import JobData, jobs_submit
    from tests.factories import job_definition

    revision = job_definition(queue)
    kind = {
        "revision": revision,
        "instance_type": InstanceType.objects.get(name="ml.g5.xlarge"),
        "expected_duration": 3600,
    }
    items = [
        JobData(share=shares["qs2"], name=f"big-{n}", instances=2, **kind) for n in range(400)
    ] + [JobData(share=shares["qs1"], name=f"small-{n}", **kind) for n in range(400)]
    jobs_submit(items=items, now=clock(0))
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    scheduling_pass(queue_id=queue.pk, now=clock(1))
    assert QueuePassState.objects.get(queue=queue).policy_key
    assert Job.objects.filter(reason="QUOTA_MANAGEMENT_LIMIT_EXCEEDED").count() == 400

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        scheduling_pass(queue_id=queue.pk, now=clock(2))
    # No query of the pass reads waiting jobs without a bound: every read of them is by
    # its partial index's condition and a LIMIT, or of the few that need a look.
    read = [q["sql"] for q in queries.captured_queries if 'FROM "scheduler_job"' in q["sql"]]
    assert read
    for sql in read:
        assert (
            "LIMIT" in sql
            or "\"state\" = 'RUNNING'" in sql
            # The jobs that hold capacity (running or STOPPING): bounded by capacity.
            or "\"state\" IN ('RUNNING', 'STOPPING')" in sql
            or "\"state\" = 'STOPPING'" in sql
            or 'NOT ("scheduler_job"."reason" IN' in sql
        ), sql
