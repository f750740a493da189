"""Background work measured (scheduler.metrics): each pass writes one JSON log line and
counts its duration, starts and preemptions; each task run counts by outcome with its
duration; `/metrics` shows both. On Redis (REDIS_URL) the figures are shared by every
process, a real worker's included; without it, they are this process's own, and the
scrape says which.

The AWS sample queue: 3 ml.g5.xlarge; qs1 (LEND_AND_BORROW), qs2 (LEND) and qs3
(RESERVE) each have a limit of 1.
"""

from __future__ import annotations

import json
import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.celery import app
from fleet.models import JobQueue
from scheduler.metrics import counters
from scheduler.services.passes import scheduling_pass
from tests.scheduler.live.conftest import wait_for

TOKEN = "background-scrape-token-0123456789"


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    """Each test starts from no figures and may scrape /metrics with the token."""
    settings.METRICS_TOKEN = TOKEN
    counters().clear()
    yield
    counters().clear()


def scrape(client) -> dict[str, dict[tuple, float]]:
    """/metrics as {sample name: {sorted labels: value}}."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def labels(**values) -> tuple:
    return tuple(sorted(values.items()))


def pass_lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "scheduler.pass"]


@pytest.mark.django_db
def test_a_pass_logs_one_line_and_counts_its_starts_and_preemptions(
    queue, submit, clock, client, caplog, settings
):
    caplog.set_level(logging.INFO, logger="scheduler.pass")
    submit("qs1", "own", priority=5)
    submit("qs1", "borrower", priority=1)
    submit("qs1", "third", priority=1)
    # qs1 runs one job within its limit and borrows qs2's idle instance; third waits.
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    # qs2's owner reclaims its instance: the borrower is stopped at once (no grace).
    submit("qs2", "owner", at=100)
    scheduling_pass(queue_id=queue.pk, now=clock(100))

    first, second = pass_lines(caplog)
    common = {"queue": "aws-sample", "queue_id": queue.pk, "finished": 0, "failed": 0}
    assert first == {
        **common,
        "read": "full",  # the queue's first pass: no policy judged yet
        "waiting": 1,
        "started": 2,
        "preempted": 0,
        "duration_ms": first["duration_ms"],
    }
    assert second == {
        **common,
        "read": "heads",
        "waiting": 2,  # third, and the borrower again
        "started": 1,
        "preempted": 1,
        "duration_ms": second["duration_ms"],
    }
    assert first["duration_ms"] > 0 and second["duration_ms"] > 0

    got = scrape(client)
    aws = labels(queue="aws-sample")
    assert got["quota_pass_runs_total"] == {aws: 2}
    assert got["quota_pass_jobs_started_total"] == {aws: 3}
    assert got["quota_pass_preemptions_total"] == {aws: 1}
    assert got["quota_pass_duration_seconds_count"] == {aws: 2}
    assert got["quota_pass_duration_seconds_bucket"][labels(queue="aws-sample", le="+Inf")] == 2
    seconds = got["quota_pass_duration_seconds_sum"][aws]
    logged = (first["duration_ms"] + second["duration_ms"]) / 1000
    assert seconds == pytest.approx(logged, abs=0.001)
    # Shared when Redis is there, this process's own otherwise, and the scrape says so.
    assert got["quota_background_metrics_shared"] == {(): float(bool(settings.REDIS_URL))}


@pytest.mark.django_db
def test_a_deleted_queue_leaves_no_figures(queue, clock, client):
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    assert scrape(client)["quota_pass_runs_total"] == {labels(queue="aws-sample"): 1}
    JobQueue.objects.filter(pk=queue.pk).delete()
    assert scrape(client).get("quota_pass_runs_total", {}) == {}


@pytest.mark.django_db
def test_task_runs_count_by_outcome_with_their_duration(queue, client):
    """Celery's own tracer, in this process (`apply`): the signals fire as in a worker."""
    run_pass = app.tasks["scheduler.run_pass"]
    assert run_pass.apply((queue.pk,)).successful()
    assert run_pass.apply((queue.pk,)).successful()
    assert run_pass.apply(("no-such-queue",)).failed()

    got = scrape(client)
    runs = got["quota_task_runs_total"]
    assert runs[labels(task="scheduler.run_pass", outcome="success")] == 2
    assert runs[labels(task="scheduler.run_pass", outcome="failure")] == 1
    task = labels(task="scheduler.run_pass")
    assert got["quota_task_duration_seconds_count"][task] == 3
    assert got["quota_task_duration_seconds_sum"][task] > 0
    buckets = {
        dict(key)["le"]: value
        for key, value in got["quota_task_duration_seconds_bucket"].items()
        if dict(key)["task"] == "scheduler.run_pass"
    }
    assert buckets["+Inf"] == 3
    assert list(buckets.values()) == sorted(buckets.values())  # cumulative


@pytest.mark.django_db
def test_a_transient_error_counts_a_retry_then_the_run_that_succeeds(queue, client, monkeypatch):
    """The database dropped the connection once: the project's retry policy retries the
    pass (eagerly here, as `apply` does), and each run is counted by its outcome."""
    from django.db import OperationalError

    from scheduler.services import passes

    real_pass, calls = passes.scheduling_pass, []

    def dropped_once(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real_pass(**kwargs)

    monkeypatch.setattr(passes, "scheduling_pass", dropped_once)
    assert app.tasks["scheduler.run_pass"].apply((queue.pk,)).successful()

    runs = scrape(client)["quota_task_runs_total"]
    assert runs == {
        labels(task="scheduler.run_pass", outcome="retry"): 1,
        labels(task="scheduler.run_pass", outcome="success"): 1,
    }


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_workers_tasks_and_passes_show_in_the_webs_metrics(queue, start_worker, client):
    start_worker(queues="interactive,celery", name="metrics")
    run_pass = app.tasks["scheduler.run_pass"]
    run_pass.apply_async((queue.pk,), ignore_result=True)
    run_pass.apply_async(("no-such-queue",), ignore_result=True)

    success = labels(task="scheduler.run_pass", outcome="success")
    failure = labels(task="scheduler.run_pass", outcome="failure")

    def both_counted():
        runs = scrape(client).get("quota_task_runs_total", {})
        return runs.get(success) == 1 and runs.get(failure) == 1

    wait_for(both_counted, timeout=30, what="the worker's two runs in /metrics")
    got = scrape(client)
    assert got["quota_task_duration_seconds_count"][labels(task="scheduler.run_pass")] == 2
    # The pass ran in the worker, and the web process reads its figures.
    assert got["quota_pass_runs_total"] == {labels(queue="aws-sample"): 1}
    assert got["quota_background_metrics_shared"] == {(): 1.0}
