"""A job's network and what its account can execute, with this test process as the
runner: real subprocesses in real network namespaces, the real account switch (when
root).

A connect probe tries TCP connections to the addresses it is given and writes what
happened into its checkpoint directory and its log.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings

from fleet.models import Job, JobEvent
from scheduler.executors.process import run as process
from scheduler.executors.process import sandbox_check
from scheduler.executors.process.run import run_job
from scheduler.executors.run_area import JobAccount, job_path
from tests.scheduler.live.conftest import wait_for
from tests.scheduler.runner.conftest import AS_ROOT, JOB_USER, job_files, python

pytestmark = pytest.mark.django_db

CONNECT = """
import json, os, socket, sys
results = {}
for address in sys.argv[1:]:
    host, port = address.rsplit(':', 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        results[address] = 'connected'
    except OSError as error:
        results[address] = f'failed: {error}'
    print(address, results[address], flush=True)
with open(os.path.join(os.environ['JOB_CHECKPOINT_DIR'], 'connect.json'), 'w') as out:
    json.dump(results, out)
"""


def connect_results(checkpoints, job) -> dict:
    return json.loads((job_files(checkpoints, job.pk) / "checkpoint" / "connect.json").read_text())


def log_of(checkpoints, job) -> str:
    return (job_files(checkpoints, job.pk) / "attempt-1.log").read_text()


@pytest.fixture
def listener():
    """A TCP server on 127.0.0.1 of this test's own that accepts every connection."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


def address_of(url: str, default_port: int) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or '127.0.0.1'}:{parts.port or default_port}"


def test_a_job_without_network_reaches_nothing_on_the_runners_loopback(
    runner_settings, started, checkpoints, listener
):
    job = started("no-network", [*python(CONNECT), listener])

    assert run_job(job.pk, 1) == "exited 0"

    result = connect_results(checkpoints, job)[listener]
    assert result.startswith("failed: ") and "Network is unreachable" in result
    assert f"{listener} failed" in log_of(checkpoints, job)


def test_a_job_whose_definition_allows_network_connects(
    runner_settings, started, checkpoints, listener
):
    job = started("with-network", [*python(CONNECT), listener], network=True)

    assert run_job(job.pk, 1) == "exited 0"

    assert connect_results(checkpoints, job) == {listener: "connected"}


@pytest.mark.postgres
@pytest.mark.redis
def test_a_job_cannot_connect_to_postgresql_or_redis_unless_its_definition_allows_network(
    runner_settings, started, checkpoints
):
    targets = [
        address_of(os.environ["DATABASE_URL"], 5432),
        address_of(os.environ["REDIS_URL"], 6379),
    ]
    isolated = started("db-probe", [*python(CONNECT), *targets])
    assert run_job(isolated.pk, 1) == "exited 0"
    networked = started("db-probe-network", [*python(CONNECT), *targets], network=True)
    assert run_job(networked.pk, 1) == "exited 0"

    refused = connect_results(checkpoints, isolated)
    assert all(result.startswith("failed: ") for result in refused.values()), refused
    log = log_of(checkpoints, isolated)
    assert all(f"{target} failed" in log for target in targets)
    assert connect_results(checkpoints, networked) == dict.fromkeys(targets, "connected")


def test_the_isolated_job_keeps_its_group_lock_and_parent_death_signal(
    runner_settings, started, checkpoints
):
    # What the sandbox promises besides the network, seen from inside the namespace.
    code = """
import ctypes, fcntl, json, os
libc = ctypes.CDLL(None)
signal = ctypes.c_int()
libc.prctl(2, ctypes.byref(signal))  # PR_GET_PDEATHSIG
lock = os.path.join(os.path.dirname(os.environ['JOB_CHECKPOINT_DIR']), 'lock')
held = [fd for fd in map(int, os.listdir('/proc/self/fd'))
        if os.path.realpath(f'/proc/self/fd/{fd}') == lock]
out = {'pdeathsig': signal.value, 'own_group': os.getpgrp() == os.getpid(),
       'lock_inherited': bool(held), 'uid': os.getuid(),
       'netns': os.readlink('/proc/self/ns/net')}
with open(os.path.join(os.environ['JOB_CHECKPOINT_DIR'], 'inside.json'), 'w') as f:
    json.dump(out, f)
"""
    job = started("inside", python(code))

    assert run_job(job.pk, 1) == "exited 0"

    inside = json.loads((job_files(checkpoints, job.pk) / "checkpoint" / "inside.json").read_text())
    assert inside["pdeathsig"] == 9 and inside["own_group"] and inside["lock_inherited"]
    assert inside["netns"] != os.readlink("/proc/self/ns/net")
    if AS_ROOT:
        import pwd

        assert inside["uid"] == pwd.getpwnam(JOB_USER).pw_uid


@pytest.mark.skipif(not AS_ROOT, reason="dropping CAP_SYS_ADMIN from a root process")
def test_a_runner_without_cap_sys_admin_finds_it_cannot_isolate():
    # A real runner process without the capability, as in a container without it.
    check = (
        "import django; django.setup(); "
        "from scheduler.executors.process.run import network_isolation_problem as p; print(p())"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_SECURE": "0"}
    out = subprocess.run(
        ["setpriv", "--bounding-set", "-sys_admin", sys.executable, "-c", check],
        capture_output=True,
        text=True,
        env=env,
        cwd=django_settings.BASE_DIR,
        timeout=60,
        check=True,
    ).stdout
    assert "this runner cannot isolate jobs' network (unshare: Operation not permitted)" in out
    assert process.network_isolation_problem() is None  # this process (root) can


CANNOT_ISOLATE = "this runner cannot isolate jobs' network (unshare: Operation not permitted)"


def test_a_runner_that_cannot_isolate_refuses_network_less_jobs_and_says_why(
    runner_settings, started, checkpoints, monkeypatch, listener
):
    # The answer the test above gets from a real runner without CAP_SYS_ADMIN.
    monkeypatch.setattr(process, "network_isolation_problem", lambda: CANNOT_ISOLATE)
    refused = started("refused-offline", [*python(CONNECT), listener])
    assert run_job(refused.pk, 1).startswith("refused")
    allowed = started("allowed-online", [*python(CONNECT), listener], network=True)
    assert run_job(allowed.pk, 1) == "exited 0"

    event = JobEvent.objects.get(job=refused, type="FAILED")
    assert event.cause == "runner_refused"
    assert CANNOT_ISOLATE in event.detail["reason"]
    assert "RUNNER_ALLOW_HOST_NETWORK=1" in event.detail["reason"]
    assert not (job_files(checkpoints, refused.pk) / "attempt-1.log").exists()
    assert connect_results(checkpoints, allowed) == {listener: "connected"}


def test_runner_allow_host_network_runs_them_on_the_runners_network(
    runner_settings, started, checkpoints, monkeypatch, listener
):
    monkeypatch.setattr(process, "network_isolation_problem", lambda: CANNOT_ISOLATE)
    runner_settings.RUNNER_ALLOW_HOST_NETWORK = True
    job = started("demo-online", [*python(CONNECT), listener])

    assert run_job(job.pk, 1) == "exited 0"
    assert connect_results(checkpoints, job) == {listener: "connected"}


# What the job's account can execute.


@pytest.fixture
def private_interpreter():
    """This interpreter behind a directory only root may search, like a virtual
    environment under /root (mode 700)."""
    hidden = Path(tempfile.mkdtemp(prefix="test-private-"))
    hidden.chmod(0o700)
    link = hidden / "python3"
    link.symlink_to(sys.executable)
    yield hidden, link
    link.unlink()
    hidden.rmdir()


def job_account() -> JobAccount:
    return process.job_account()


@pytest.mark.skipif(not AS_ROOT, reason="another account than the runner's needs root")
def test_the_start_check_names_an_interpreter_the_job_account_cannot_execute(
    runner_settings, private_interpreter
):
    hidden, link = private_interpreter

    problem = sandbox_check.interpreter_problem(job_account(), str(link))

    assert problem == (
        f"{JOB_USER} cannot execute the interpreter {link}: "
        f"{hidden} is not searchable by {JOB_USER}"
    )


def test_the_start_check_passes_an_interpreter_the_job_account_can_execute(runner_settings):
    assert sandbox_check.interpreter_problem(job_account(), "/usr/bin/python3") is None


@pytest.mark.skipif(not AS_ROOT, reason="another account than the runner's needs root")
def test_the_start_check_names_registered_programs_the_job_account_cannot_execute(
    runner_settings, definition, private_interpreter, process_queue
):
    hidden, link = private_interpreter
    definition("fine", ["python3", "-c", "pass"])
    definition("hidden", [str(link), "-c", "pass"])
    definition("typo", ["pyhton3", "-c", "pass"])
    served = list(process_queue.capacities.values_list("instance_type__name", flat=True))

    problems = sandbox_check.runner_problems(
        account=job_account(), instance_types=served, interpreter="/usr/bin/python3"
    )

    assert problems == [
        f"{JOB_USER} cannot execute the registered program {link}: "
        f"{hidden} is not searchable by {JOB_USER}",
        f"{JOB_USER} cannot execute the registered program pyhton3: not found on the "
        f"jobs' PATH ({job_path()}) or not executable",
    ]
    assert (
        sandbox_check.runner_problems(
            account=job_account(), instance_types=["no-such-type"], interpreter="/usr/bin/python3"
        )
        == []
    )


@pytest.mark.skipif(not AS_ROOT, reason="another account than the runner's needs root")
def test_a_job_whose_program_the_account_cannot_execute_fails_with_a_cause_not_127(
    runner_settings, started, checkpoints, private_interpreter
):
    hidden, link = private_interpreter
    job = started("hidden-python", [str(link), "-c", "pass"])

    assert run_job(job.pk, 1).startswith("exited") is False

    failed = Job.objects.get(pk=job.pk)
    assert (failed.state, failed.reason) == ("FAILED", "runner_refused")
    event = JobEvent.objects.get(job=job, type="FAILED")
    assert f"cannot execute {str(link)!r} (Permission denied)" in event.detail["reason"]
    assert "cannot start" in log_of(checkpoints, job)


# What a runner reports.


def test_healthz_is_degraded_naming_what_a_live_runner_cannot_run(client, process_queue):
    from scheduler.services.runner_problems import runner_problems_record
    from scheduler.services.runners import runner_register

    runner = runner_register(
        name="runner@gpu-1", hostname="gpu-1", pid=4242, instance_types=["ml.g5.xlarge"]
    )
    problem = "nobody cannot execute the interpreter /root/venv/bin/python: /root is ..."
    runner_problems_record(name="runner@gpu-1", pid=4242, problems=[problem])

    report = client.get("/healthz/").json()

    assert report["status"] == "degraded"
    assert report["runners"]["problems"] == [
        {"runner": runner.pk, "instance_types": ["ml.g5.xlarge"], "problems": [problem]}
    ]
    assert "gpu-1" not in json.dumps(report)  # no host names without a login

    runner_problems_record(name="runner@gpu-1", pid=4242, problems=[])
    assert client.get("/healthz/").json()["runners"]["problems"] == []


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_runner_worker_records_at_start_what_its_job_account_cannot_execute(
    worker_env, start_worker, definition, client
):
    from scheduler.models import Runner

    definition("typo", ["pyhton3", "-c", "pass"])
    runner = start_worker(name="runner", queues="instances.ml.g5.xlarge")

    row = wait_for(
        lambda: Runner.objects.filter(pid=runner.process.pid).first(), what="its registration"
    )
    typo = "cannot execute the registered program pyhton3: not found on the jobs' PATH"
    assert any(typo in problem for problem in row.problems), row.problems
    # Independently of the check: can the job account run this interpreter at all?
    switch = ["runuser", "-u", JOB_USER, "--"]  # setpriv would keep root's capabilities
    direct = subprocess.run(
        [*(switch if AS_ROOT else []), sys.executable, "-c", "pass"], capture_output=True
    )
    about_interpreter = [p for p in row.problems if f"the interpreter {sys.executable}" in p]
    assert bool(about_interpreter) == (direct.returncode != 0), (direct, row.problems)
    health = client.get("/healthz/").json()
    assert health["status"] == "degraded"
    assert health["runners"]["problems"][0]["problems"] == row.problems
