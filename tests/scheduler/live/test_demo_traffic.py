"""The demo's traffic on aws-sample: qs1 borrows, qs2 reclaims, the cycle repeats; every
job runs one of the demo's job definitions."""

import pytest

from demo.jobs import SAMPLE_DEFINITIONS, demo_traffic, seed_definitions
from fleet.models import Job, JobEvent
from scheduler.services.passes import scheduling_pass

pytestmark = pytest.mark.django_db


@pytest.fixture
def sample_definitions(queue, admin):
    return seed_definitions(actor=admin, queue=queue, names=SAMPLE_DEFINITIONS)


def test_one_cycle_shows_a_borrow_a_reclaim_and_then_waits(queue, clock, sample_definitions):
    first = demo_traffic(now=clock(0))
    scheduling_pass(queue_id=queue.pk, now=clock(0))

    assert [job.share.name for job in first] == ["qs1", "qs1", "qs1"]
    assert [job.definition_revision for job in first] == [sample_definitions["vision-train"]] * 3
    assert first[0].argv == ["python", "train_vision.py", "--model", "vit-b16", "--epochs", "30"]
    assert (first[0].expected_duration, first[0].checkpoint_interval) == (1800, 600)
    borrowed = Job.objects.get(queue=queue, state=Job.State.RUNNING, borrowed=True)

    (reclaimer,) = demo_traffic(now=clock(60))
    scheduling_pass(queue_id=queue.pk, now=clock(60))

    assert reclaimer.share.name == "qs2"
    assert reclaimer.parameters == {"base": "bert-base", "dataset": "squad-v2"}
    preempted = JobEvent.objects.get(type=JobEvent.Type.PREEMPTED)
    assert (preempted.job_id, preempted.cause, preempted.by_id) == (
        borrowed.pk,
        "reclaim",
        reclaimer.pk,
    )
    assert demo_traffic(now=clock(120)) == [], "nothing more while the cycle runs"


def test_without_the_sample_queue_or_its_definitions_it_does_nothing(queue, admin):
    assert demo_traffic() == []  # the queue has no demo definitions
    seed_definitions(actor=admin, queue=queue, names=SAMPLE_DEFINITIONS)
    queue.name = "renamed"
    queue.save()
    assert demo_traffic() == []


def test_the_seeded_sample_jobs_run_registered_definitions(admin, team_lead):
    from demo.organisation import seed_aws_sample

    queue = seed_aws_sample(admin, team_lead)
    seed_aws_sample(admin, team_lead)

    jobs = list(Job.objects.filter(queue=queue).select_related("definition_revision__definition"))
    assert len(jobs) == 3
    assert {job.definition_revision.definition.name for job in jobs} == {"vision-train"}
    assert all(job.argv[:2] == ["python", "train_vision.py"] for job in jobs)
    definitions = queue.job_definitions.order_by("name")
    assert [d.name for d in definitions] == ["nlp-finetune", "vision-train"]
    assert all(d.revisions.count() == 1 for d in definitions), "seeded once"
