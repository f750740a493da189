"""A worker whose clock is off: leases, beats and liveness are the database's clock, so
it requeues nothing and looks no less alive; it reports its offset, and `/healthz/`
says "degraded" past 2 s; beat messages do not expire on its clock.

The skew is this test process's own: `timezone.now` and `time.time` are shifted (the
services run here, as a runner's thread runs them). The database's clock is not
(SQLite's `'now'` is read by its C library, PostgreSQL's by the server), which is the
point: code that took "now" from the process would write leases a minute off and the
sweep would requeue them. No hook of the product's code is involved.
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid

import pytest
import redis
from django.utils import timezone

from core.celery import app, periodic
from fleet.models import Job
from scheduler.liveness import database_clock_offset, live_runners, served_instance_types
from scheduler.services.passes import scheduling_pass
from scheduler.services.runners import runner_beat, runner_register
from scheduler.services.runs import job_claim_run, job_heartbeat, jobs_requeue_lost
from tests.scheduler.live.conftest import wait_for

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


@pytest.fixture
def skew(monkeypatch):
    """skew(seconds): this process's clocks run `seconds` off the real time."""
    real_now, real_time = timezone.now, time.time

    def shift(seconds: float) -> None:
        monkeypatch.setattr(timezone, "now", lambda: real_now() + dt.timedelta(seconds=seconds))
        monkeypatch.setattr(time, "time", lambda: real_time() + seconds)

    return shift


@pytest.fixture
def running(process_queue, submit):
    job = submit("qs1", "skewed", command="python3 -m train", at=None)
    scheduling_pass(queue_id=process_queue.pk, now=timezone.now())
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    return job


def test_a_runner_60_s_behind_gets_leases_on_the_database_clock_and_nothing_is_requeued(
    running, skew
):
    skew(-60)
    token = job_claim_run(job_id=running.pk, attempt=1, worker="gpu-1:7", lease_seconds=30)
    assert job_heartbeat(
        job_id=running.pk,
        attempt=1,
        lease_token=token,
        progress=5,
        checkpointed=0,
        lease_seconds=30,
    )
    running.refresh_from_db()
    real = timezone.now() + dt.timedelta(seconds=60)
    # 30 s after the database's now (the real time), not after the process's.
    assert abs((running.lease_expires_at - real).total_seconds() - 30) < 5

    assert jobs_requeue_lost(claim_timeout=30) == []  # the runner's own sweep
    skew(+90)
    assert jobs_requeue_lost(claim_timeout=30) == []  # a sweeper 90 s ahead
    running.refresh_from_db()
    assert (running.state, running.requeues) == (Job.State.RUNNING, 0)


def test_a_runner_whose_clock_is_off_is_live_on_the_database_clock(process_queue, skew):
    skew(-60)
    runner_register(name="runner@gpu-1", hostname="gpu-1", pid=7, instance_types=[GPU])
    runner_beat(name="runner@gpu-1", hostname="gpu-1", pid=7, instance_types=[GPU])
    skew(+90)  # whoever reads it is 90 s ahead
    assert live_runners().count() == 1
    assert served_instance_types() == {GPU}


@pytest.mark.postgres
def test_a_runner_reports_its_offset_and_healthz_is_degraded_past_2_s(
    client, process_queue, skew, capsys
):
    from scheduler import tasks

    tasks.tick()
    skew(-60)
    offset = database_clock_offset()
    assert -60.5 < offset < -59.5
    runner_register(
        name="runner@gpu-1", hostname="gpu-1", pid=7, instance_types=[GPU], clock_offset=offset
    )
    skew(0)

    report = client.get("/healthz/").json()
    assert report["status"] == "degraded"
    assert report["runners"]["live"] == 1
    assert report["runners"]["instance_types_without_runner"] == []
    clock = report["runners"]["clock"]
    assert (clock["status"], clock["skewed"]) == ("degraded", 1)
    assert -60.5 < clock["max_offset_seconds"] < -59.5
    with capsys.disabled():
        print(f"\nskew: a runner 60 s behind measures {offset:+.3f} s; /healthz/ {clock}")


def test_an_offset_within_2_s_is_healthy(client, process_queue):
    from scheduler import tasks

    tasks.tick()
    runner_register(
        name="runner@gpu-1", hostname="gpu-1", pid=7, instance_types=[GPU], clock_offset=1.9
    )
    report = client.get("/healthz/").json()
    assert report["status"] == "ok"
    assert report["runners"]["clock"] == {"status": "ok", "max_offset_seconds": 1.9, "skewed": 0}


def test_beat_messages_carry_no_time_and_a_backlog_runs_once_per_half_period(skew):
    sweep = app.tasks["scheduler.sweep"]
    headers = periodic(60.0)["headers"]
    skew(+90)  # a worker ahead of beat: nothing in the message is a time to expire
    first = sweep.apply(headers=headers)
    backlog = [sweep.apply(headers=headers) for _ in range(3)]
    assert first.state == "SUCCESS"
    assert [result.state for result in backlog] == ["IGNORED"] * 3
    # Work sent by hand (no periodic header) always runs.
    assert sweep.apply().state == "SUCCESS"


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_one_of_a_backlog_of_beat_messages(start_worker, worker_env):
    # The worker's liveness cache is Redis: no mark of an earlier run may linger there.
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    for key in client.scan_iter("*periodic:governance.exceptions.sweep*"):
        client.delete(key)
    worker = start_worker(name="scheduling", queues="celery")
    options = app.conf.beat_schedule["exceptions-sweep"]["options"]  # every 60 s
    assert "expires" not in options
    for _ in range(3):  # a backlog, as a worker back from a stop finds it
        app.tasks["governance.exceptions.sweep"].apply_async(**options)

    def handled():
        log = worker.output()
        return log.count("governance.exceptions.sweep[") >= 6 and log  # 3 received, 3 done

    log = wait_for(handled, timeout=30, what="the three messages")
    assert log.count("] succeeded in") == 1
    assert log.count("] ignored") == 2
