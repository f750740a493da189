"""The example training script on its own: checkpoints, resumes, stops on SIGTERM."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.scheduler.live.conftest import wait_for

pytestmark = pytest.mark.spawns


def run(tmp_path, *args, **popen):
    env = {**os.environ, "JOB_CHECKPOINT_DIR": str(tmp_path), "JOB_ATTEMPT": "1"}
    command = [sys.executable, "-m", "scheduler.examples.train", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True, **popen)


def test_it_resumes_from_its_last_checkpoint(tmp_path):
    first = run(
        tmp_path,
        "--steps",
        "10",
        "--step-seconds",
        "0",
        "--checkpoint-every",
        "4",
        "--fail-at",
        "6",
    )
    assert first.wait(timeout=30) == 3
    assert json.loads((tmp_path / "checkpoint.json").read_text())["step"] == 4

    second = run(tmp_path, "--steps", "10", "--step-seconds", "0", "--checkpoint-every", "4")
    out, _ = second.communicate(timeout=30)

    assert second.returncode == 0
    assert "starting at step 4" in out
    assert json.loads((tmp_path / "status.json").read_text()) == {
        "progress": 10,
        "checkpointed": 10,
    }


def test_sigterm_stops_it_without_saving(tmp_path):
    process = run(tmp_path, "--steps", "1000", "--step-seconds", "0.02", "--checkpoint-every", "5")
    wait_for(
        lambda: (tmp_path / "status.json").exists()
        and json.loads((tmp_path / "status.json").read_text())["progress"] >= 7,
        timeout=30,
        what="a few steps",
    )
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)

    assert process.returncode == 128 + signal.SIGTERM
    status = json.loads((tmp_path / "status.json").read_text())
    saved = json.loads((tmp_path / "checkpoint.json").read_text())["step"]
    assert saved == status["checkpointed"] and saved % 5 == 0 and saved <= status["progress"]
    assert "SIGTERM at step" in out


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period():
    from scheduler.executors.process.run import Group

    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert stubborn.stdout.readline().strip() == "ready"
    group = Group(stubborn)

    group.stop(grace=0.5)

    assert group.reap() == -signal.SIGKILL
