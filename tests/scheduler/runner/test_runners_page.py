"""The runners page: what `/healthz/` judges, with each runner named, for admins."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from fleet.models import Job
from scheduler import tasks
from scheduler.models import Runner
from scheduler.selectors import runner_overview
from scheduler.services.runners import runner_register, runner_stopped

pytestmark = pytest.mark.django_db

GPU = "ml.g5.xlarge"


@pytest.fixture(autouse=True)
def own_liveness_cache(settings):
    settings.CACHES = {
        **settings.CACHES,
        "liveness": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"liveness-{uuid.uuid4()}",
        },
    }
    settings.RUNNER_BEAT_SECONDS = 5
    settings.RUNNER_CLOCK_SKEW_LIMIT_SECONDS = 2


def register(name, *, pid, offset=0.1, at=None, host="gpu-1"):
    return runner_register(
        name=name,
        hostname=host,
        pid=pid,
        instance_types=[GPU],
        clock_offset=offset,
        now=at or timezone.now(),
    )


def row(overview, name):
    (found,) = [row for row in overview["rows"] if row.name == name]
    return found


def test_live_gone_and_stopped_runners_with_clock_problems_and_running_jobs(process_queue, submit):
    tasks.tick()
    now = timezone.now()
    register("runner@gpu-1", pid=11)
    register("runner@gpu-2", pid=12, offset=-60.0)
    register("runner@gpu-3", pid=13, at=now - dt.timedelta(minutes=5))
    register("runner@gpu-4", pid=14)
    runner_stopped(name="runner@gpu-4", pid=14)
    Runner.objects.filter(name="runner@gpu-1").update(
        problems=["nobody cannot execute the interpreter /venv/bin/python"]
    )
    job = submit("qs1", "a", command="python -c pass")
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, started_at=now, worker="gpu-1:11")

    overview = runner_overview()

    assert [r.status for r in overview["rows"]] == ["live", "live", "stopped", "gone"]
    first, second = row(overview, "runner@gpu-1"), row(overview, "runner@gpu-2")
    assert first.running_jobs == 1 and second.running_jobs == 0
    assert first.problems == ["nobody cannot execute the interpreter /venv/bin/python"]
    assert not first.clock_skewed and second.clock_skewed
    assert row(overview, "runner@gpu-3").last_seen_seconds >= 299
    # The page agrees with /healthz/: degraded by the skew and the problem.
    assert overview["status"] == "degraded"
    assert overview["clock"]["skewed"] == 1 and overview["live"] == 2


def test_the_page_names_the_runners_for_admins_only(client, admin, team_lead, process_queue):
    tasks.tick()
    register("runner@gpu-1", pid=11, offset=-60.0)

    client.force_login(team_lead)
    assert client.get("/jobs/runners/").status_code == 403

    client.force_login(admin)
    page = client.get("/jobs/runners/").content.decode()
    assert "runner@gpu-1" in page and "gpu-1, pid 11" in page
    assert "Degraded." in page and "-60.0 s" in page and "skewed" in page
    assert 'href="/jobs/runners/"' in client.get("/jobs/").content.decode()


def test_all_well_and_an_empty_page_say_so(client, admin, process_queue):
    client.force_login(admin)
    assert "No runner yet" in client.get("/jobs/runners/").content.decode()

    tasks.tick()
    register("runner@gpu-1", pid=11)
    page = client.get("/jobs/runners/").content.decode()
    assert "All well: 1 live runner," in page
