"""gunicorn.conf.py: past `threads + queue` requests in hand, a worker answers 503 with
Retry-After at once instead of queueing; an invalid GUNICORN_* value stops start-up."""

import http.client
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def gunicorn_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return {**env, **values}


@pytest.fixture
def slow_server(request):
    """gunicorn serving tests/ops/slow_app.py with one thread; the test parametrizes the
    queue limit and the longest wait."""
    queue, max_wait = request.param
    port = free_port()
    env = gunicorn_env(
        GUNICORN_BIND=f"127.0.0.1:{port}",
        GUNICORN_WORKERS="1",
        GUNICORN_THREADS="1",
        GUNICORN_QUEUE=str(queue),
        GUNICORN_MAX_WAIT=str(max_wait),
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "tests.ops.slow_app:app"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Up once a request is served; the worker is then idle again.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            assert get(port)[0] == 200
            break
        except OSError:
            assert server.poll() is None, server.stderr.read()
            time.sleep(0.1)
    yield port
    server.terminate()
    _, errors = server.communicate(timeout=40)
    assert "Traceback" not in errors, errors


def get(port: int) -> tuple[int, str | None, float]:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    # No keep-alive: a kept connection, once closed, would be one more piece of work in
    # hand for a moment (gunicorn reads its end), which the counts below do not expect.
    connection.request("GET", "/", headers={"Connection": "close"})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status, response.getheader("Retry-After"), time.monotonic() - started


@pytest.mark.parametrize("slow_server", [(1, 5)], indirect=True)
def test_past_threads_plus_queue_requests_are_refused_at_once(slow_server):
    # One thread and a queue of one, a second per request: of six requests at once, two
    # are served (the second after the first, ~2 s) and four are refused within
    # milliseconds.
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: get(slow_server), range(6)))
    served = [r for r in results if r[0] == 200]
    refused = [r for r in results if r[0] == 503]
    assert len(served) == 2 and len(refused) == 4, results
    assert all(retry == "1" for _, retry, _ in refused)
    assert max(seconds for _, _, seconds in refused) < 0.5
    assert max(seconds for _, _, seconds in served) >= 1.9
    # Once the queue has drained, requests are served again.
    assert get(slow_server)[0] == 200


@pytest.mark.parametrize("slow_server", [(5, 0.3)], indirect=True)
def test_a_request_that_waited_too_long_for_a_thread_is_refused(slow_server):
    # One thread, room to queue, but at most 0.3 s of waiting: of three requests at once,
    # the first is served (1 s); the others are refused when the thread takes them,
    # having waited the second the first took, rather than served a second late.
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda _: get(slow_server), range(3)))
    assert sorted(status for status, _, _ in results) == [200, 503, 503], results
    assert all(0.9 < seconds < 1.6 for status, _, seconds in results if status == 503)


def test_the_configuration_sizes_itself_from_the_cpus():
    code = (
        "import runpy; c = runpy.run_path('gunicorn.conf.py'); "
        "print(c['workers'], c['threads'], c['worker_class'].queue_limit, c['backlog'], "
        "c['timeout'], c['max_requests'], c['max_requests_jitter'])"
    )
    env = gunicorn_env()
    for name in [k for k in env if k.startswith("GUNICORN_")]:
        env.pop(name)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    workers, threads, queue, backlog, timeout, max_requests, jitter = map(
        int, result.stdout.split()
    )
    assert workers == os.cpu_count() + 1
    assert threads >= 2 and queue >= 1
    assert 0 < backlog <= 1024
    assert timeout == 30 and max_requests > 0 and 0 < jitter < max_requests


def test_an_invalid_value_stops_start_up_naming_it():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "gunicorn.conf.py",
            "--check-config",
            "config.wsgi",
        ],
        cwd=ROOT,
        env=gunicorn_env(GUNICORN_THREADS="many"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "GUNICORN_THREADS='many'" in result.stdout + result.stderr
