"""The demo's traffic on aws-sample: qs1 borrows, qs2 reclaims, the cycle repeats."""

import pytest

from scheduler.models import Job, JobEvent
from scheduler.services.demo import demo_traffic
from scheduler.services.passes import scheduling_pass

pytestmark = pytest.mark.django_db


def test_one_cycle_shows_a_borrow_a_reclaim_and_then_waits(queue, clock):
    first = demo_traffic(now=clock(0))
    scheduling_pass(queue_id=queue.pk, now=clock(0))

    assert [job.share.name for job in first] == ["qs1", "qs1", "qs1"]
    borrowed = Job.objects.get(queue=queue, state=Job.State.RUNNING, borrowed=True)

    (reclaimer,) = demo_traffic(now=clock(60))
    scheduling_pass(queue_id=queue.pk, now=clock(60))

    assert reclaimer.share.name == "qs2"
    preempted = JobEvent.objects.get(type=JobEvent.Type.PREEMPTED)
    assert (preempted.job_id, preempted.cause, preempted.by_id) == (
        borrowed.pk,
        "reclaim",
        reclaimer.pk,
    )
    assert demo_traffic(now=clock(120)) == [], "nothing more while the cycle runs"


def test_without_the_sample_queue_it_does_nothing(db):
    assert demo_traffic() == []
