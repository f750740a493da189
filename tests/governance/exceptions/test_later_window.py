"""A window that starts later is previewed at its start, on the jobs expected then
(running jobs end after their expected duration; waiting jobs start at the scheduler's
median start estimate), not on the jobs running now."""

from datetime import timedelta

import pytest

from fleet.models import Job
from governance.exceptions.services import exception_impact, expected_snapshot
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def full(scene):
    """The queue is full: qs1 runs vision-train (ends in 30 min), qs2 and qs3 one job each
    for two days; qs1's vision-sweep waits."""
    for share, name in ((scene.qs2, "nlp-a"), (scene.queue.shares.get(name="qs3"), "speech-a")):
        JobFactory(
            share=share,
            instance_type=scene.g5,
            name=name,
            state=Job.State.RUNNING,
            started_at=scene.now,
            start_seq=3,
            expected_duration=2 * 86400,
        )
    Job.objects.filter(pk=scene.waiting.pk).update(expected_duration=2 * 86400)
    return scene


def test_a_window_starting_now_is_previewed_on_the_jobs_running_now(full):
    request = full.file(full.jobs(jobs=[full.waiting]))

    texts = [line.text for line in exception_impact(request=request, now=full.now)]

    assert "job vision-sweep (share qs1) would start now" in texts
    assert not any(text.startswith("previewed at the window's start") for text in texts)


def test_a_window_starting_tomorrow_is_previewed_at_its_start(full):
    start = full.now + timedelta(days=1)
    request = full.file(
        full.jobs(jobs=[full.waiting], window_start=start, window_end=start + timedelta(hours=4))
    )

    lines = exception_impact(request=request, now=full.now)

    assert lines[0].kind == "expected"
    assert lines[0].text.startswith("previewed at the window's start")
    assert "in 1 d 00 h" in lines[0].text
    assert "3 running and 0 waiting" in lines[0].text
    assert (
        "1 should have ended" in lines[0].text and "1 waiting should have started" in lines[0].text
    )
    texts = [line.text for line in lines[1:]]
    # vision-train will have ended and vision-sweep started: nothing to preempt or start.
    assert not any("vision-train" in text for text in texts)
    assert not any("would start now" in text for text in texts)
    assert texts == [
        "a scheduling pass at the window's start would decide nothing differently; the "
        "exception matters when contention arises during its window"
    ]


def test_the_expected_snapshot_ends_and_starts_jobs_by_their_estimates(full):
    at = full.now + timedelta(hours=1)

    snapshot, at_s, line = expected_snapshot(full.queue, at=at, now=full.now)

    running = {int(job.id) for job in snapshot.running}
    assert full.running.pk not in running  # started 30 min ago, expected 1 h
    assert full.waiting.pk in running  # the forecast starts it when vision-train ends
    assert not snapshot.pending
    assert at_s == int(at.timestamp())
    assert "previewed at the window's start" in line.text
