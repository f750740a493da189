"""The sandbox of a process job, with this test process as the runner: real
subprocesses, the real account switch (when root), real limits.

A probe definition writes what its process sees (environment, account, working
directory, process group, limits, whether it can read its runner's environment) into
its checkpoint directory; the tests read it back.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import time

import pytest

from fleet.models import Job, JobEvent
from scheduler.executors.process.run import run_job
from tests.scheduler.live.conftest import wait_for
from tests.scheduler.runner.conftest import AS_ROOT, JOB_USER, job_files, python
from tests.scheduler.runner.procs import processes_of

pytestmark = pytest.mark.django_db

PROBE = """
import json, os, resource, sys
def readable(path):
    try:
        open(path, 'rb').read()
        return True
    except OSError:
        return False
probe = {
    'environ': dict(os.environ),
    'argv': sys.argv[1:],
    'uid': os.getuid(), 'gid': os.getgid(), 'groups': os.getgroups(),
    'cwd': os.getcwd(),
    'own_group': os.getpgrp() == os.getpid(), 'own_session': os.getsid(0) == os.getpid(),
    'umask': os.umask(0),
    'as': resource.getrlimit(resource.RLIMIT_AS),
    'cpu': resource.getrlimit(resource.RLIMIT_CPU),
    'runner_environ_readable': readable(f'/proc/{os.getppid()}/environ'),
}
with open(os.path.join(os.environ['JOB_CHECKPOINT_DIR'], 'probe.json'), 'w') as out:
    json.dump(probe, out)
"""

RUNNER_VARIABLES = {"PATH", "HOME", "LANG", "JOB_ID", "JOB_ATTEMPT", "JOB_CHECKPOINT_DIR"}


def probe_of(checkpoints, job) -> dict:
    return json.loads((job_files(checkpoints, job.pk) / "checkpoint" / "probe.json").read_text())


def fresh(job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_the_job_sees_its_definition_and_its_own_variables_and_nothing_else(
    runner_settings, started, checkpoints, monkeypatch
):
    canary = "canary-7f3c9e1d-not-for-jobs"
    monkeypatch.setenv("DJANGO_SECRET_KEY", canary)
    monkeypatch.setenv("DATABASE_URL", f"postgres://owner:{canary}@db/quota")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", canary)
    job = started("probe", python(PROBE), environment={"MODEL": "resnet", "PYTHONHASHSEED": "0"})

    assert run_job(job.pk, 1) == "exited 0"

    probe = probe_of(checkpoints, job)
    env = probe["environ"]
    area = job_files(checkpoints, job.pk)
    assert set(env) == RUNNER_VARIABLES | {"JOB_STATUS_FILE", "MODEL", "PYTHONHASHSEED"}
    assert env["MODEL"] == "resnet" and env["LANG"] == "C.UTF-8"
    assert (env["JOB_ID"], env["JOB_ATTEMPT"]) == (str(job.pk), "1")
    assert env["JOB_CHECKPOINT_DIR"] == str(area / "checkpoint")
    assert env["HOME"] == probe["cwd"] == str(area / "attempt-1")
    assert env["JOB_STATUS_FILE"] == str(area / "attempt-1" / "status.json")
    assert env["PATH"].split(":")[-3:] == ["/usr/local/bin", "/usr/bin", "/bin"]
    assert canary not in json.dumps(probe)
    assert probe["own_group"] and probe["own_session"] and probe["umask"] == 0o077
    assert fresh(job).state == "SUCCEEDED"


@pytest.mark.skipif(not AS_ROOT, reason="switching accounts needs a root runner")
def test_a_root_runner_runs_the_job_as_runner_user_with_no_extra_groups(
    runner_settings, started, checkpoints
):
    import pwd

    job = started("probe-account", python(PROBE))
    run_job(job.pk, 1)

    probe = probe_of(checkpoints, job)
    nobody = pwd.getpwnam(JOB_USER)
    assert (probe["uid"], probe["gid"]) == (nobody.pw_uid, nobody.pw_gid)
    assert set(probe["groups"]) <= {nobody.pw_gid}
    assert not probe["runner_environ_readable"]
    area = job_files(checkpoints, job.pk)
    for mine in ("checkpoint", "attempt-1"):
        assert (area / mine).stat().st_uid == nobody.pw_uid
        assert (area / mine).stat().st_mode & 0o777 == 0o700
    # The runner's own files are not the job's to change.
    assert (area / "lock").stat().st_uid == 0 and area.stat().st_uid == 0


def test_arguments_reach_the_program_as_inert_strings(runner_settings, started, checkpoints):
    hostile = ["; rm -rf /", "$(id)", "`id`", "a\nb", "x && y", "*", "'\"", "--help"]
    job = started("probe-argv", [*python(PROBE), *hostile])

    run_job(job.pk, 1)

    assert probe_of(checkpoints, job)["argv"] == hostile


def test_an_environment_the_system_refuses_starts_nothing_and_fails_the_job(
    runner_settings, started, checkpoints
):
    # Definitions are validated when registered; the runner still never crashes on one.
    job = started("bad-env", python("open('/tmp/never', 'w')"), environment={"A=B": "x"})

    assert run_job(job.pk, 1) == "exited 127"

    failed = fresh(job)
    assert (failed.state, failed.reason, failed.exit_code) == ("FAILED", "exit_code", 127)
    log = (job_files(checkpoints, job.pk) / "attempt-1.log").read_text()
    assert "cannot start" in log and "illegal environment variable name" in log


def test_the_definitions_limits_apply_to_the_process(runner_settings, started, checkpoints):
    job = started("probe-limits", python(PROBE), max_address_space_mb=512, max_cpu_seconds=30)

    run_job(job.pk, 1)

    probe = probe_of(checkpoints, job)
    assert probe["as"] == [512 * 1024 * 1024] * 2
    assert probe["cpu"] == [30, 31]  # SIGXCPU at the limit, SIGKILL a grace later


def test_memory_past_the_address_space_limit_is_refused(runner_settings, started, checkpoints):
    job = started("hog", python("bytearray(600 * 1024 * 1024)"), max_address_space_mb=300)

    assert run_job(job.pk, 1) == "exited 1"

    assert "MemoryError" in (job_files(checkpoints, job.pk) / "attempt-1.log").read_text()
    assert (fresh(job).state, fresh(job).reason) == ("FAILED", "exit_code")


def test_cpu_time_past_the_limit_ends_the_process(runner_settings, started):
    job = started("spinner", python("while True: pass"), max_cpu_seconds=1)

    outcome = run_job(job.pk, 1)

    assert outcome == f"exited {-signal.SIGXCPU}"
    event = JobEvent.objects.get(job=job, type="FAILED")
    assert event.detail == {"exit_code": -signal.SIGXCPU, "signal": "SIGXCPU"}


def test_a_run_past_its_wall_clock_limit_is_stopped_and_fails(runner_settings, started):
    ignores_sigterm = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    )
    job = started("sleeper", python(ignores_sigterm), wall_clock_limit=1, stop_grace_seconds=1)

    began = time.monotonic()
    assert run_job(job.pk, 1) == "wall_clock_limit"
    took = time.monotonic() - began

    assert 1 <= took < 5  # the limit, then the grace before SIGKILL
    failed = fresh(job)
    assert (failed.state, failed.reason, failed.exit_code) == (
        "FAILED",
        "wall_clock_limit",
        -signal.SIGKILL,
    )
    event = JobEvent.objects.get(job=job, type="FAILED")
    assert event.detail == {"wall_clock_limit": 1}
    assert processes_of(job.pk) == []


def test_processes_the_job_leaves_behind_are_killed_with_its_group(runner_settings, started):
    leaves_a_helper = "import subprocess; subprocess.Popen(['sleep', '600']); print('bye')"
    job = started("leaver", python(leaves_a_helper))

    assert run_job(job.pk, 1) == "exited 0"

    # The helper was in the job's process group: SIGKILL reached it at once.
    wait_for(lambda: processes_of(job.pk) == [], timeout=2, what="the helper to be gone")


def test_a_status_file_the_job_turns_into_a_fifo_or_a_link_does_not_stall_the_runner(
    runner_settings, started
):
    tricks = (
        "import os, time; path = os.environ['JOB_STATUS_FILE']; os.mkfifo(path); "
        "time.sleep(1); os.remove(path); os.symlink('/etc/shadow', path); time.sleep(1)"
    )
    job = started("trickster", python(tricks))

    began = time.monotonic()
    assert run_job(job.pk, 1) == "exited 0"
    assert time.monotonic() - began < 10
    assert fresh(job).progress == fresh(job).expected_duration  # SUCCEEDED, not stuck


def test_a_runner_refuses_a_runner_user_that_is_root(runner_settings, started, checkpoints):
    runner_settings.RUNNER_USER = "root"
    job = started("as-root", python("print('never')"))

    assert run_job(job.pk, 1).startswith("refused")

    failed = fresh(job)
    assert (failed.state, failed.reason) == ("FAILED", "runner_refused")
    event = JobEvent.objects.get(job=job, type="FAILED")
    assert "RUNNER_USER='root' is root" in event.detail["reason"]
    assert not job_files(checkpoints, job.pk).exists()  # nothing was started


@pytest.mark.skipif(not AS_ROOT, reason="the runner must be root")
def test_a_root_runner_without_runner_user_refuses_to_run_jobs(runner_settings, started):
    runner_settings.RUNNER_USER = ""
    job = started("no-user", python("print('never')"))

    run_job(job.pk, 1)

    event = JobEvent.objects.get(job=job, type="FAILED")
    assert (event.cause, fresh(job).reason) == ("runner_refused", "runner_refused")
    assert "runs as root and RUNNER_USER is not set" in event.detail["reason"]


@pytest.mark.skipif(not AS_ROOT, reason="the runner must be root")
def test_runner_allow_root_lets_a_root_runner_run_jobs_as_root(
    runner_settings, started, checkpoints
):
    runner_settings.RUNNER_USER = ""
    runner_settings.RUNNER_ALLOW_ROOT = True
    job = started("demo-root", python(PROBE))

    assert run_job(job.pk, 1) == "exited 0"
    assert probe_of(checkpoints, job)["uid"] == 0


def test_a_job_without_an_argument_vector_is_refused(runner_settings, started):
    job = started("empty", python("pass"))
    Job.objects.filter(pk=job.pk).update(argv=[])

    assert run_job(job.pk, 1).startswith("refused")
    assert fresh(job).reason == "runner_refused"


def test_a_run_that_is_not_current_is_not_claimed(runner_settings, started):
    job = started("twice", python("pass"))

    assert run_job(job.pk, 2) == "not claimed"
    assert run_job(job.pk, 1) == "exited 0"
    assert run_job(job.pk, 1) == "not claimed"


def test_no_rlimit_is_set_without_a_limit(runner_settings, started, checkpoints):
    job = started("probe-free", python(PROBE))

    run_job(job.pk, 1)

    probe = probe_of(checkpoints, job)
    assert probe["as"] == list(resource.getrlimit(resource.RLIMIT_AS))
    assert probe["cpu"] == list(resource.getrlimit(resource.RLIMIT_CPU))
    assert os.environ.get("JOB_ID") is None  # the runner's own environment is untouched


def test_the_demos_example_definition_runs_in_the_sandbox_as_make_demo_runs_it(
    runner_settings, admin, team_lead
):
    from django.utils import timezone

    from demo.jobs import seed_process_demo
    from fleet.models import JobDefinition
    from scheduler.services.jobs import JobData, job_submit
    from scheduler.services.passes import scheduling_pass

    runner_settings.RUNNER_USER = ""
    runner_settings.RUNNER_ALLOW_ROOT = True  # what make demo sets
    queue = seed_process_demo(actor=admin, lead=team_lead)
    revision = JobDefinition.objects.get(name="train-example").revisions.get()
    job = job_submit(
        data=JobData(
            share=queue.shares.get(name="lab-owner"),
            name="short",
            revision=revision,
            parameters={"steps": 2, "checkpoint_every": 1},
        ),
        submitted_by=team_lead,
    )
    scheduling_pass(queue_id=queue.pk, now=timezone.now())

    assert run_job(job.pk, 1) == "exited 0"
    assert fresh(job).state == "SUCCEEDED"
