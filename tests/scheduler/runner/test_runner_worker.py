"""A Celery worker as a runner: its jobs see none of its environment, it registers and
beats, it stops its runs and gives them back on a warm shutdown, and it refuses to
start when jobs would run as root."""

from __future__ import annotations

import json
import signal

import pytest

from fleet.models import Job, JobEvent
from scheduler.models import Runner
from scheduler.selectors import instance_types_without_runner, runner_wait_reason
from tests.scheduler.live.conftest import Worker, checkpoint_root, wait_for
from tests.scheduler.runner.conftest import AS_ROOT, python, train
from tests.scheduler.runner.procs import processes_of

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

RUNNERS_ONLY = "instances.ml.g5.xlarge"
CANARY = "canary-5b1e0c7a-application-secret"
DUMP = (
    "import json, os\n"
    "def readable(path):\n"
    "    try:\n"
    "        return bool(open(path, 'rb').read())\n"
    "    except OSError:\n"
    "        return False\n"
    "out = open(os.path.join(os.environ['JOB_CHECKPOINT_DIR'], 'env.json'), 'w')\n"
    "json.dump({'environ': dict(os.environ), 'uid': os.getuid(),\n"
    "           'runner_environ': readable(f'/proc/{os.getppid()}/environ')}, out)\n"
)


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_a_job_on_a_worker_sees_none_of_the_workers_environment(worker_env, start_worker, started):
    worker_env.update(DJANGO_SECRET_KEY=CANARY, AWS_SECRET_ACCESS_KEY=CANARY)
    start_worker(name="runner", queues=RUNNERS_ONLY)
    job = started("dump-env", python(DUMP), environment={"MODEL": "resnet"})

    wait_for(lambda: fresh(job).state == "SUCCEEDED", timeout=30, what="the dump")

    dump = json.loads(
        (checkpoint_root(worker_env) / f"job-{job.pk}" / "checkpoint" / "env.json").read_text()
    )
    leaked = {name for name in worker_env if name in dump["environ"]} - {"PATH", "HOME", "LANG"}
    assert leaked == set()  # DJANGO_SECRET_KEY, DATABASE_URL, REDIS_URL, ... none of them
    assert set(dump["environ"]) == {
        "MODEL",
        "PATH",
        "HOME",
        "LANG",
        "JOB_ID",
        "JOB_ATTEMPT",
        "JOB_CHECKPOINT_DIR",
        "JOB_STATUS_FILE",
    }
    assert CANARY not in json.dumps(dump)
    assert worker_env["DATABASE_URL"] not in json.dumps(dump)
    # Not through /proc either: another account, or a runner that made itself undumpable.
    assert not dump["runner_environ"]
    if AS_ROOT:
        assert dump["uid"] != 0


def test_a_runner_registers_beats_and_is_known_gone_when_killed(
    runner_settings, worker_env, start_worker, started, process_queue
):
    assert instance_types_without_runner() == ["ml.g5.xlarge"]
    runner = start_worker(name="runner", queues=RUNNERS_ONLY)

    row = wait_for(lambda: Runner.objects.filter(pid=runner.process.pid).first(), what="it")
    assert row.name.startswith("runner@") and row.instance_types == ["ml.g5.xlarge"]
    first_seen = row.last_seen_at
    wait_for(lambda: Runner.objects.get(pk=row.pk).last_seen_at > first_seen, what="a second beat")
    assert instance_types_without_runner() == []
    job = started("waits-for-nothing", train(5000))
    assert runner_wait_reason(job) == ""

    runner.kill()

    wait_for(lambda: instance_types_without_runner() == ["ml.g5.xlarge"], what="it to be gone")
    assert runner_wait_reason(fresh(job)) == "no runner is serving ml.g5.xlarge"
    assert Runner.objects.get(pk=row.pk).stopped_at is None  # killed: it could not say so


def test_a_warm_shutdown_stops_the_runs_gives_the_jobs_back_and_marks_it_stopped(
    worker_env, start_worker, started
):
    runner = start_worker(name="runner", queues=RUNNERS_ONLY)
    job = started("interrupted", train(5000))
    wait_for(lambda: fresh(job).progress >= 12, what="the run to pass a checkpoint")

    runner.process.send_signal(signal.SIGTERM)  # what docker stop sends

    requeued = wait_for(
        lambda: fresh(job).state == "RUNNABLE" and fresh(job), timeout=20, what="the requeue"
    )
    assert runner.process.wait(timeout=30) == 0
    assert processes_of(job.pk) == []
    event = JobEvent.objects.get(job=job, type="REQUEUED")
    assert event.cause == "runner_stopped"
    assert requeued.requeues == 1 and requeued.checkpointed >= 10
    log = checkpoint_root(worker_env) / f"job-{job.pk}" / "attempt-1.log"
    assert "SIGTERM at step" in log.read_text()
    assert Runner.objects.get(pid=runner.process.pid).stopped_at is not None


@pytest.mark.parametrize(
    ("runner_user", "why"),
    [
        ("root", "RUNNER_USER='root' is root"),
        pytest.param(
            "",
            "the runner runs as root and RUNNER_USER is not set",
            marks=pytest.mark.skipif(not AS_ROOT, reason="the worker must be root"),
        ),
    ],
)
def test_a_runner_that_would_run_jobs_as_root_does_not_start(
    worker_env, tmp_path, runner_user, why
):
    env = {**worker_env, "RUNNER_USER": runner_user, "RUNNER_ALLOW_ROOT": "0"}
    refused = Worker(queues=RUNNERS_ONLY, tmp_path=tmp_path, name="unsafe").start(env)
    try:
        assert refused.process.wait(timeout=60) != 0
        assert f"runner refuses to start: {why}" in refused.output()
    finally:
        refused.stop()


def test_a_scheduling_worker_is_no_runner_and_may_run_as_anyone(worker_env, start_worker):
    worker_env.update(RUNNER_USER="root", RUNNER_ALLOW_ROOT="0")  # a runner would refuse
    scheduler = start_worker(name="scheduler", queues="celery")

    assert scheduler.process.poll() is None
    assert not Runner.objects.filter(pid=scheduler.process.pid).exists()
