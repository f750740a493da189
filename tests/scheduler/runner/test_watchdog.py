"""The runner's watchdog on its own: when its runner goes (the pipe closes), it kills
the process groups still registered, and only those."""

import os
import signal
import subprocess

from scheduler.executors.process.watchdog import Watchdog


def test_the_watchdog_kills_registered_groups_when_its_runner_goes():
    job = subprocess.Popen(["sleep", "600"], start_new_session=True)
    other = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        watchdog = Watchdog(env={"PATH": os.defpath})
        watchdog.register(job.pid)
        watchdog.register(other.pid)
        watchdog.unregister(other.pid)

        watchdog._process.stdin.close()  # what the runner's death does to the pipe

        assert job.wait(timeout=10) == -signal.SIGKILL
        assert watchdog._process.wait(timeout=10) == 0
        assert other.poll() is None  # unregistered: not the watchdog's to kill
    finally:
        for process in (job, other):
            process.kill()
            process.wait()


def test_a_dead_watchdog_is_replaced_and_told_every_group():
    job = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        watchdog = Watchdog(env={"PATH": os.defpath})
        watchdog.register(job.pid)
        first = watchdog._process
        first.kill()
        first.wait()

        watchdog.register(job.pid + 1_000_000)  # any registration starts a new one
        assert watchdog._process is not first
        watchdog._process.stdin.close()

        assert job.wait(timeout=10) == -signal.SIGKILL
    finally:
        job.kill()
        job.wait()
