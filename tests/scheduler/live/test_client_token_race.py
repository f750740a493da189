"""Idempotent submission under concurrency, on PostgreSQL with real threads (each its own
database connection): two requests with one client token make one job."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction
from rest_framework.test import APIClient

from fleet.models import Job
from scheduler.services.jobs import JobData, jobs_submit_outcomes, request_fingerprint
from tests.factories import job_definition

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def train(queue):
    return job_definition(
        queue,
        name="train",
        command=["python", "-m", "train", "--steps", "{steps}"],
        parameters=[{"name": "steps", "type": "integer", "min": 1, "max": 1000}],
        instance_type=queue.capacities.get().instance_type,
    )


def in_thread(function, results: dict, key: str) -> threading.Thread:
    def run():
        try:
            results[key] = function()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            results[key] = error
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_the_loser_of_the_unique_constraint_returns_the_winners_job(lead, shares, train):
    """A commits only once B is blocked inserting the same token: B's insert fails at the
    unique constraint, and B returns A's job instead of an error or a second job."""
    body = {"definition": "train", "share": shares["qs1"].pk, "parameters": {"steps": 5}}
    data = JobData(
        share=shares["qs1"],
        name="race",
        revision=train,
        parameters={"steps": 5},
        client_token="retry-me",
        fingerprint=request_fingerprint(body),
    )
    inserted, release = threading.Event(), threading.Event()
    results: dict = {}

    def first():
        with transaction.atomic():
            (outcome,) = jobs_submit_outcomes(items=[data], submitted_by=lead)
            inserted.set()
            release.wait(timeout=30)
        return outcome

    def second():
        inserted.wait(timeout=30)
        return jobs_submit_outcomes(items=[data], submitted_by=lead)[0]

    threads = [in_thread(first, results, "a"), in_thread(second, results, "b")]
    deadline = time.monotonic() + 30
    while waiting_on_a_lock() == 0:
        assert time.monotonic() < deadline, "the second insert never waited for the first"
        time.sleep(0.02)
    release.set()
    for thread in threads:
        thread.join(timeout=30)

    a, b = results["a"], results["b"]
    assert not isinstance(b, BaseException), b
    assert a.created and not b.created
    assert b.job.pk == a.job.pk
    assert Job.objects.count() == 1


def test_concurrent_identical_api_requests_make_one_job(lead, shares, train):
    body = {
        "definition": "train",
        "share": shares["qs1"].pk,
        "name": "once",
        "parameters": {"steps": 7},
        "client_token": "client-retry-1",
    }
    clients = 6
    start = threading.Barrier(clients)
    results: dict = {}

    def post():
        client = APIClient()
        client.force_authenticate(lead)
        start.wait(timeout=30)
        response = client.post("/api/v1/jobs/", body, format="json")
        return response.status_code, response.json()

    threads = [in_thread(post, results, str(n)) for n in range(clients)]
    for thread in threads:
        thread.join(timeout=60)

    outcomes = list(results.values())
    assert all(not isinstance(outcome, BaseException) for outcome in outcomes), outcomes
    statuses = sorted(status for status, _body in outcomes)
    assert statuses == [200] * (clients - 1) + [201]
    assert len({body["id"] for _status, body in outcomes}) == 1
    assert Job.objects.count() == 1


def test_concurrent_identical_bulk_requests_make_each_job_once(admin, shares, train):
    items = [
        {
            "definition": "train",
            "share": shares["qs1"].pk,
            "name": f"sweep-{n}",
            "parameters": {"steps": n + 1},
            "client_token": f"sweep-{n}",
        }
        for n in range(100)
    ]
    start = threading.Barrier(2)
    results: dict = {}

    def post():
        client = APIClient()
        client.force_authenticate(admin)
        start.wait(timeout=30)
        response = client.post("/api/v1/jobs/bulk/", {"jobs": items}, format="json")
        return response.status_code, response.json()

    threads = [in_thread(post, results, name) for name in ("a", "b")]
    for thread in threads:
        thread.join(timeout=60)

    (status_a, a), (status_b, b) = results["a"], results["b"]
    assert sorted([status_a, status_b]) == [200, 201]
    assert a["ids"] == b["ids"]
    assert Job.objects.count() == 100
