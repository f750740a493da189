"""The impact preview comes from the engine, on the queue's current jobs."""

import pytest

from fleet.models import Job
from governance.exceptions.services import exception_impact
from governance.models import ExceptionRequest
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_temporary_capacity_preview_is_the_engines_share_change_assessment(scene):
    # qs1 runs one job within its limit of 1 and borrows a second instance.
    JobFactory(
        share=scene.qs1,
        instance_type=scene.g5,
        name="vision-borrowed",
        state=Job.State.RUNNING,
        started_at=scene.now,
        start_seq=2,
    )
    request = scene.file()
    lines = exception_impact(request=request)
    assert lines[0].kind == "exception"
    assert lines[0].text == (
        "share qs1's ml.g5.xlarge limit would go from 1 to 2 until the window ends"
    )
    kinds = {line.kind for line in lines[1:]}
    # The borrowed job is now within the limit: it can no longer be reclaimed.
    assert "no_longer_reclaimable" in kinds
    assert any("vision-borrowed" in line.jobs for line in lines)


def test_priority_raise_preview_shows_what_a_pass_would_do_now(scene):
    # The queue is full: qs1's running job holds its share; qs2 and qs3 run theirs.
    for share, name in ((scene.qs2, "nlp-a"), (scene.queue.shares.get(name="qs3"), "speech-a")):
        JobFactory(
            share=share,
            instance_type=scene.g5,
            name=name,
            state=Job.State.RUNNING,
            started_at=scene.now,
            start_seq=3,
        )
    # qs1 has in-share preemption: raising the waiting sweep above the running job
    # makes a pass stop the running job for it.
    request = scene.file(scene.jobs(jobs=[scene.waiting]))
    lines = exception_impact(request=request, now=scene.now)
    texts = [line.text for line in lines]
    assert "job vision-sweep (share qs1) would start now" in texts
    assert any(
        text.startswith("job vision-train (share qs1) would be preempted now by priority")
        for text in texts
    )


def test_protection_preview_names_the_protected_jobs(scene):
    request = scene.file(scene.jobs(kind=ExceptionRequest.Kind.PREEMPTION_PROTECTION))
    lines = exception_impact(request=request, now=scene.now)
    assert lines[0].kind == "protected"
    assert lines[0].jobs == ("vision-train",)
