"""A Redis outage under gunicorn (issue 23, point 5): while the Redis that is cache,
broker and result store is stopped, token-authenticated submissions and reads keep
being answered (201/200, never 500), a token revoked meanwhile is refused, /healthz/
answers 200 "degraded"; once Redis is back with what it held before, the cache is used
again and the revoked token stays refused.

The test starts its own redis-server (never the shared one) and a gunicorn of two
workers on the test's PostgreSQL database. It prints the outage's figures:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_outage DJANGO_SECURE=0 \\
      python -m pytest tests/ops/test_redis_outage.py -q -s
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import pickle
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from accounts.tokens import token_issue
from fleet.models import InstanceType, Job
from scheduler.models import QueuePassState
from tests.conftest import REQUIRE_SERVICES
from tests.factories import UserFactory, aws_sample_queue, job_definition
from tests.ops.test_gunicorn import free_port, gunicorn_env

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
OUTAGE_SECONDS = 8
KEY_PREFIX = "qg:1:"  # the cache's KEY_PREFIX and version (config/settings.py)


class OwnRedis:
    """A redis-server of the test's own on a free port, stopped and started by it. It
    stops with SHUTDOWN SAVE and starts from that file: it comes back holding what it
    held, as after a network partition, the case where stale entries could be trusted."""

    def __init__(self, directory: Path):
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--dbfilename",
                "dump.rdb",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client().ping()
                return
            except redis.exceptions.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        with contextlib.suppress(redis.exceptions.ConnectionError):  # it hangs up as it goes
            self.client().shutdown(save=True)
        self.process.wait(timeout=10)

    def pause(self) -> None:
        """Hang, as a Redis does on a lost network: connections open, nothing answers."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # SIGKILL ends a stopped process too
            self.process.wait(timeout=10)


@pytest.fixture
def own_redis(tmp_path):
    if shutil.which("redis-server") is None:
        message = "needs redis-server on PATH (apt-get install redis-server)"
        if REQUIRE_SERVICES:
            pytest.fail(f"REQUIRE_SERVICES=1 but it {message}", pytrace=False)
        pytest.skip(message)
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def web(own_redis, transactional_db, django_db_blocker):
    """gunicorn with two workers on the test database, its Redis the test's own."""
    from django.db import connection

    database = connection.settings_dict
    port = free_port()
    env = gunicorn_env(
        DATABASE_URL=(
            f"postgres://{database['USER']}:{database['PASSWORD'] or ''}"
            f"@{database['HOST'] or '127.0.0.1'}:{database['PORT'] or 5432}/{database['NAME']}"
        ),
        REDIS_URL=own_redis.url,
        CELERY_RESULT_BACKEND=own_redis.url,
        DJANGO_SECURE="0",
        GUNICORN_BIND=f"127.0.0.1:{port}",
        GUNICORN_WORKERS="2",
        GUNICORN_THREADS="4",
        # The writers send about 1,700 writes a minute. During the outage each worker
        # counts on its own (accounts/throttling.py), and at the default 120 a minute
        # the worker that happened to get more of them answered 429 (CI: 2 of 227): a
        # right answer, but not what this test measures.
        API_THROTTLE_WRITES_PER_MINUTE="100000",
    )
    log = open(own_redis.directory / "gunicorn.log", "w+")  # noqa: SIM115 - read at the end
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "config.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if call(port, "GET", "/healthz/")[0] == 200:
                break
        except OSError:
            pass
        assert server.poll() is None, log_text(log)
        assert time.monotonic() < deadline, log_text(log)
        time.sleep(0.2)
    yield port, log
    server.terminate()
    server.wait(timeout=40)
    log.close()


def log_text(log) -> str:
    log.flush()
    log.seek(0)
    return log.read()


def call(port, method, path, *, key=None, body=None, timeout=30):
    """(status, parsed body or None, Retry-After, seconds)."""
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Connection": "close", "Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Token {key}"
    connection.request(method, path, body=json.dumps(body) if body else None, headers=headers)
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return response.status, parsed, response.getheader("Retry-After"), time.monotonic() - started


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def cached_identity(client: redis.Redis, key: str):
    """(generation, token) kept for `key`, or None."""
    raw = client.get(f"{KEY_PREFIX}identity:token:{digest(key)}")
    return None if raw is None else pickle.loads(raw)


def generation(client: redis.Redis):
    raw = client.get(f"{KEY_PREFIX}identity:generation")
    return None if raw is None else pickle.loads(raw)


def summary(label: str, results: list[tuple[str, int, float]]) -> str:
    lines = [f"{label}: {len(results)} calls"]
    for kind, status in sorted({(kind, status) for kind, status, _ in results}):
        seconds = [s for k, code, s in results if (k, code) == (kind, status)]
        lines.append(
            f"    {kind} {status}: {len(seconds)}, seconds p50 {statistics.median(seconds):.3f}"
            f" max {max(seconds):.3f}"
        )
    return "\n".join(lines)


@pytest.mark.parametrize("outage", ["stopped", "hung"])
def test_token_calls_survive_a_redis_outage_and_a_revocation_made_during_it(outage, own_redis, web):
    port, log = web
    queue = aws_sample_queue()
    share = queue.shares.get(name="qs1")
    job_definition(queue, instance_type=InstanceType.objects.get(name="ml.g5.xlarge"))
    lead = UserFactory(username="lin", roles=["team_leads"])
    share.team.leads.add(lead)
    _, key = token_issue(user=lead, name="kept")
    doomed, doomed_key = token_issue(user=lead, name="revoked during the outage")
    store = own_redis.client()

    def submit(n):
        body = {"definition": "sample-work", "share": share.pk, "name": f"job-{n}"}
        return call(port, "POST", "/api/v1/jobs/", key=key, body=body)

    # Before: both tokens work and are kept in the cache.
    for token_key in (key, doomed_key):
        assert call(port, "GET", "/api/v1/queues/", key=token_key)[0] == 200
    first = submit(0)
    assert first[0] == 201, first
    old_generation = generation(store)
    assert old_generation is not None
    assert cached_identity(store, doomed_key)[0] == old_generation

    # No worker runs here: as if the pass that submission asked for had begun, so the
    # first submission of the outage asks the broker for another.
    QueuePassState.objects.filter(queue=queue).update(pass_requested_at=None)
    own_redis.stop() if outage == "stopped" else own_redis.pause()
    results: list[tuple[str, int, float]] = []
    lock = threading.Lock()
    outage_started = time.monotonic()

    def record(kind, outcome):
        with lock:
            results.append((kind, outcome[0], outcome[3]))
        return outcome

    def writer():
        n = 1
        while time.monotonic() - outage_started < OUTAGE_SECONDS:
            record("POST /jobs/", submit(n))
            n += 1
            time.sleep(0.05)

    def reader():
        paths = [
            "/api/v1/queues/",
            "/api/v1/jobs/",
            f"/api/v1/shares/{share.pk}/",
            f"/api/v1/queues/{queue.pk}/pending/",
        ]
        n = 0
        while time.monotonic() - outage_started < OUTAGE_SECONDS:
            path = paths[n % len(paths)]
            record(f"GET {path.removeprefix('/api/v1/')}", call(port, "GET", path, key=key))
            n += 1
            time.sleep(0.02)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(1)
    revoked = record("DELETE tokens", call(port, "DELETE", f"/api/v1/tokens/{doomed.pk}/", key=key))
    refused = record("GET (revoked)", call(port, "GET", "/api/v1/queues/", key=doomed_key))
    health = call(port, "GET", "/healthz/")
    for thread in threads:
        thread.join(timeout=60)
    seconds = time.monotonic() - outage_started

    print()
    print(f"Redis {outage} for {seconds:.1f} s, gunicorn 2 workers x 4 threads:")
    print(summary("  during", results))
    statuses = Counter(status for _, status, _ in results)
    assert statuses[500] == 0 and not set(statuses) - {200, 201, 204, 401, 503}, results
    assert revoked[0] == 204 and refused[0] == 401, (revoked, refused)
    assert health[0] == 200 and health[1]["status"] == "degraded", health
    submitted = sum(1 for kind, status, _ in results if kind.startswith("POST") and status == 201)
    assert submitted > 0
    assert Job.objects.filter(share=share).count() == 1 + submitted  # every 201 is a job

    # After: Redis is back holding the entry of the revoked token, of the generation
    # that was current when it was kept (nobody could set a new one during the outage).
    restarted = time.monotonic()
    own_redis.start() if outage == "stopped" else own_redis.resume()
    entry = cached_identity(store, doomed_key)
    assert entry is not None and entry[1].revoked_at is None
    assert generation(store) == old_generation
    after = []
    while time.monotonic() - restarted < 4:
        after.append(("GET (revoked)", *call(port, "GET", "/api/v1/queues/", key=doomed_key)))
        after.append(("GET queues", *call(port, "GET", "/api/v1/queues/", key=key)))
        after.append(("POST /jobs/", *submit(len(after) + 10_000)))
        time.sleep(0.1)
    print(summary("  after Redis returned (4 s)", [(k, s, t) for k, s, _, _, t in after]))
    assert all(status == 401 for kind, status, *_ in after if kind == "GET (revoked)"), after
    assert all(status in (200, 201) for kind, status, *_ in after if kind != "GET (revoked)")
    # The cache is used again: a new generation, the kept token cached under it, and
    # the throttle counting in Redis.
    assert generation(store) not in (None, old_generation)
    assert cached_identity(store, key)[0] == generation(store)
    assert any(store.scan_iter(match=f"{KEY_PREFIX}throttle_*"))
    assert "Internal Server Error" not in log_text(log)
