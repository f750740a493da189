"""Positions, blockers and start estimates of waiting jobs, from the database
(scheduler.services.estimates): the AWS sample queue, three ml.g5.xlarge; qs1
LEND_AND_BORROW (borrow limit 200 %, in-share preemption), qs2 LEND, qs3 RESERVE; one
instance each. Simulated jobs run one compute second per second here."""

import datetime as dt

import pytest

from engine.types import BLOCKED_BEHIND_HEAD, WAITING_FOR_CAPACITY
from fleet.models import Job, JobEvent
from scheduler.services.estimates.calibration import NO_RECORD
from scheduler.services.estimates.clock import queue_clock
from scheduler.services.estimates.reads import queue_estimates, submission_estimate
from scheduler.services.jobs import JobData, JobError
from scheduler.services.passes import scheduling_pass
from tests.factories import job_definition

pytestmark = pytest.mark.django_db


def everything():
    return (
        list(Job.objects.order_by("pk").values()),
        list(JobEvent.objects.order_by("pk").values()),
    )


def test_waiting_jobs_get_positions_blockers_and_exact_estimates(queue, submit, clock):
    first = submit("qs1", "first", expected_duration=600)
    borrower = submit("qs1", "borrower", expected_duration=900)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    head = submit("qs1", "head", at=10, expected_duration=100)
    behind = submit("qs1", "behind", at=20, expected_duration=100)
    scheduling_pass(queue_id=queue.pk, now=clock(20))

    found = queue_estimates(queue, now=clock(30)).by_job()
    assert set(found) == {head.pk, behind.pk}
    assert (found[head.pk].position, found[behind.pk].position) == (1, 2)
    assert found[head.pk].reason == WAITING_FOR_CAPACITY
    assert found[behind.pk].reason == BLOCKED_BEHIND_HEAD
    # qs3 (RESERVE) holds its idle instance; the borrower holds qs2's.
    words = found[head.pk].blocker
    assert "needs 1 ml.g5.xlarge; 1 is free" in words
    assert "share qs1 already uses 2 with a limit of 1, so it must borrow" in words
    assert "qs3 (RESERVE) holds 1 idle for its own jobs" in words
    assert found[head.pk].borrow_position == 1
    assert "number 2 of 2 in share qs1's queue" in found[behind.pk].blocker
    assert f"the first being job {head.pk} (head)" in found[behind.pk].blocker
    # No history: the declared durations are taken as they are, so the range is one
    # instant. `first` ends at 600 and the head takes its place (borrowing qs2's
    # instance beside the borrower); it ends at 700 and `behind` follows.
    assert found[head.pk].estimate.forecast_p50 == clock(600)
    assert found[head.pk].estimate.forecast_p90 == clock(600)
    assert found[head.pk].estimate.wait_p50 == NO_RECORD.waits(570)[1]  # no record yet
    assert found[behind.pk].estimate.forecast_p50 == clock(700)
    assert [entry.job_id for entry in queue_estimates(queue, now=clock(30)).entries] == [
        head.pk,
        behind.pk,
    ]

    # The live scheduler agrees with the estimate.
    scheduling_pass(queue_id=queue.pk, now=clock(600))
    assert Job.objects.get(pk=head.pk).state == Job.State.RUNNING
    scheduling_pass(queue_id=queue.pk, now=clock(699))
    assert Job.objects.get(pk=behind.pk).state == Job.State.RUNNABLE
    scheduling_pass(queue_id=queue.pk, now=clock(700))
    assert Job.objects.get(pk=behind.pk).state == Job.State.RUNNING
    assert borrower.pk and first.pk


def test_history_widens_the_range(queue, submit, clock, shares):
    # Five finished jobs of qs2 that ran twice as long as they declared.
    for number in range(5):
        job = submit("qs2", f"old-{number}", at=-10_000, expected_duration=100)
        Job.objects.filter(pk=job.pk).update(
            state=Job.State.SUCCEEDED,
            attempt=1,
            started_at=clock(-10_000),
            first_started_at=clock(-10_000),
            finished_at=clock(-10_000 + 200 + 100 * number),
        )
    running = submit("qs2", "running", expected_duration=1000)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    filler = submit("qs1", "filler", expected_duration=10_000)
    other = submit("qs3", "other", expected_duration=10_000)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    waiting = submit("qs2", "waiting", at=5, expected_duration=100)
    entry = queue_estimates(queue, now=clock(10)).by_job()[waiting.pk]
    # Ratios 2, 3, 4, 5, 6 (all ran the same definition): the median says the running
    # job's 1000 declared seconds take 4000, the 90th percentile 5600.
    assert entry.estimate.basis == "definition"
    assert entry.estimate.forecast_p50 == clock(4000)
    assert entry.estimate.forecast_p90 == clock(5600)
    assert filler.pk and other.pk and running.pk


def test_if_you_submit_this_now_stores_nothing(queue, submit, clock, shares):
    submit("qs1", "first", expected_duration=600)
    submit("qs1", "borrower", expected_duration=900)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    before = everything()
    revision = job_definition(queue)
    from fleet.models import InstanceType

    itype = InstanceType.objects.get(name="ml.g5.xlarge")
    data = JobData(
        share=shares["qs2"],
        name="what-if",
        revision=revision,
        instance_type=itype,
        expected_duration=50,
    )
    answer = submission_estimate(data=data, now=clock(10))
    assert everything() == before
    # qs2's own instance is borrowed by qs1: it reclaims it at once.
    assert answer.estimate.forecast_p50 == clock(10)
    assert answer.within_limit is True and answer.reclaimable_by == []

    data = JobData(
        share=shares["qs1"],
        name="more",
        revision=revision,
        instance_type=itype,
        expected_duration=50,
    )
    answer = submission_estimate(data=data, now=clock(10))
    assert answer.within_limit is False
    assert answer.reclaimable_by == ["qs2"]
    assert answer.estimate.forecast_p50 == clock(600)
    assert answer.position == 1

    too_big = JobData(
        share=shares["qs3"],
        name="huge",
        revision=revision,
        instance_type=itype,
        instances=4,
        expected_duration=50,
    )
    answer = submission_estimate(data=too_big, now=clock(10))
    assert answer.too_big and answer.estimate.never
    assert "has 3" in answer.warnings[0]

    with pytest.raises(JobError) as refused:
        submission_estimate(
            data=JobData(share=shares["qs1"], name="", revision=revision), now=clock(10)
        )
    assert "name" in refused.value.errors
    assert everything() == before


def test_a_simulated_queue_estimates_in_its_own_clock(queue, submit, clock, settings):
    settings.SIMULATED_SECONDS_PER_SECOND = 60
    submit("qs1", "first", expected_duration=600)
    submit("qs2", "owner", expected_duration=6000)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    waiting = submit("qs1", "waiting", at=1, expected_duration=60)
    entry = queue_estimates(queue, now=clock(2)).by_job()[waiting.pk]
    # `first` needs 600 compute seconds: 10 real seconds at 60x.
    assert entry.estimate.forecast_p50 == clock(10)
    assert entry.estimate.wait_p50 == NO_RECORD.waits(600 - 120)[1]
    assert queue_clock(queue).simulated
    assert dt.timedelta(0) <= entry.estimate.start_p50 - clock(0)
