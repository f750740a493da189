"""`/healthz/`: 503 only without a database; otherwise 200, "degraded" when the scheduler
does not tick or an instance type of a process queue has no live runner."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from fleet.models import Job
from scheduler import tasks
from scheduler.liveness import TICK_KEY, tick_cache
from scheduler.models import Runner
from scheduler.selectors import runner_wait_reason
from scheduler.services.runners import runner_beat, runner_register, runner_stopped

pytestmark = pytest.mark.django_db

GPU = "ml.g5.xlarge"
NO_CLOCK = {"status": "ok", "max_offset_seconds": None, "skewed": 0}


@pytest.fixture(autouse=True)
def own_liveness_cache(settings):
    """A cache of this test's own: other test runs on this machine tick too."""
    settings.CACHES = {
        **settings.CACHES,
        "liveness": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"liveness-{uuid.uuid4()}",
        },
    }
    settings.RUNNER_BEAT_SECONDS = 5
    settings.SCHEDULER_TICK_SECONDS = 2


def health(client) -> dict:
    response = client.get("/healthz/")
    assert response.status_code == 200
    return response.json()


def register(name="runner@gpu-1", types=(GPU,), at=None, offset=None, pid=4242):
    return runner_register(
        name=name,
        hostname="gpu-1",
        pid=pid,
        instance_types=list(types),
        clock_offset=offset,
        now=at,
    )


def test_all_well_once_the_scheduler_ticks_and_every_process_type_has_a_runner(
    client, process_queue
):
    tasks.tick()
    register()

    report = health(client)
    age = report["scheduler"].pop("last_tick_age_seconds")
    assert report == {
        "status": "ok",
        "database": "ok",
        "scheduler": {"status": "ok"},
        "runners": {
            "live": 1,
            "instance_types_without_runner": [],
            "problems": [],
            "clock": {"status": "ok", "max_offset_seconds": None, "skewed": 0},
        },
    }
    assert 0 <= age < 10


def test_degraded_while_an_instance_type_of_a_process_queue_has_no_live_runner(
    client, process_queue
):
    tasks.tick()
    assert health(client)["runners"] == {
        "live": 0,
        "instance_types_without_runner": [GPU],
        "problems": [],
        "clock": NO_CLOCK,
    }
    assert health(client)["status"] == "degraded"

    register(types=("ml.p4d.24xlarge",))  # serves another type
    assert health(client)["runners"]["instance_types_without_runner"] == [GPU]


def test_a_runner_silent_for_three_beats_or_stopped_is_not_live(client, process_queue):
    tasks.tick()
    long_ago = timezone.now() - dt.timedelta(seconds=16)
    register(at=long_ago)
    assert health(client)["runners"] == {
        "live": 0,
        "instance_types_without_runner": [GPU],
        "problems": [],
        "clock": NO_CLOCK,
    }

    runner_beat(name="runner@gpu-1", hostname="gpu-1", pid=4242, instance_types=[GPU])
    assert health(client)["status"] == "ok"

    runner_stopped(name="runner@gpu-1", pid=4242)
    assert health(client)["runners"]["live"] == 0


def test_a_runner_marked_stopped_by_mistake_says_it_is_alive_at_its_next_beat(process_queue):
    runner = register()
    runner_stopped(name=runner.name, pid=runner.pid)

    runner_beat(name=runner.name, hostname="gpu-1", pid=runner.pid, instance_types=[GPU])

    runner.refresh_from_db()
    assert runner.stopped_at is None


def test_simulated_queues_need_no_runner(client, queue):
    tasks.tick()
    assert health(client)["status"] == "ok"


def test_degraded_when_the_scheduler_stopped_ticking(client, queue):
    assert health(client)["scheduler"] == {"status": "unknown", "last_tick_age_seconds": None}
    assert health(client)["status"] == "degraded"

    tick_cache().set(TICK_KEY, (timezone.now() - dt.timedelta(seconds=60)).timestamp())
    scheduler = health(client)["scheduler"]
    assert scheduler["status"] == "late" and scheduler["last_tick_age_seconds"] >= 60


def test_the_health_check_names_no_runner_or_host(client, process_queue):
    tasks.tick()
    register(name="runner@secret-host-17")
    assert "secret-host-17" not in str(health(client))


def test_a_waiting_job_says_no_runner_is_serving_its_instance_type(process_queue, submit):
    job = Job.objects.get(pk=submit("qs1", "waits", command="python3 -m x", at=None).pk)

    assert runner_wait_reason(job) == f"no runner is serving {GPU}"
    register()
    assert runner_wait_reason(job) == ""


def test_a_job_of_a_simulated_queue_waits_for_no_runner(queue, submit):
    assert runner_wait_reason(submit("qs1", "modelled", at=None)) == ""


def test_degraded_past_two_seconds_of_a_live_runners_clock_skew_with_the_offset_shown(
    client, process_queue
):
    tasks.tick()
    register(offset=-1.5)  # within the limit either way
    assert health(client)["status"] == "ok"

    register(name="runner@gpu-2", pid=4343, offset=-60.25)  # 60 s behind the database
    report = health(client)
    assert report["status"] == "degraded"
    assert report["runners"]["clock"] == {
        "status": "degraded",
        "max_offset_seconds": -60.25,
        "skewed": 1,
    }
    assert report["runners"]["live"] == 2  # skewed, yet live: liveness is the database's


def test_a_stopped_runners_clock_does_not_count(client, process_queue):
    tasks.tick()
    register(offset=90.0)
    runner_stopped(name="runner@gpu-1", pid=4242)
    register(name="runner@gpu-2", pid=4343, offset=0.2)
    assert health(client)["runners"]["clock"] == {
        "status": "ok",
        "max_offset_seconds": 0.2,
        "skewed": 0,
    }


def test_a_runner_restarted_under_the_same_name_is_a_row_of_its_own(process_queue):
    first = register(pid=1)
    second = register(pid=2)
    # The first incarnation has no run left: its row goes, the second is the runner.
    assert list(Runner.objects.values_list("pk", "pid")) == [(second.pk, 2)]
    assert first.pk != second.pk
