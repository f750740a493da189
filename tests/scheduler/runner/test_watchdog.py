"""The runner's watchdog on its own: when its runner goes (the pipe closes), it kills
the process groups still registered, and only those."""

import os
import signal
import subprocess
import time

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


def test_the_watchdog_kills_a_group_at_its_kill_by_unless_the_runner_moves_it():
    """A frozen runner cannot move a kill-by: its group dies then, pipe open or not."""
    late = subprocess.Popen(["sleep", "600"], start_new_session=True)
    moved = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        watchdog = Watchdog(env={"PATH": os.defpath})
        start = time.monotonic()
        watchdog.register(late.pid, start + 0.5)
        watchdog.register(moved.pid, start + 0.5)
        watchdog.register(moved.pid, start + 600)  # a renewed lease moves it

        assert late.wait(timeout=10) == -signal.SIGKILL
        killed_after = time.monotonic() - start
        assert killed_after >= 0.5
        assert moved.poll() is None
        assert watchdog._process.poll() is None  # the pipe is open: the runner lives
        print(f"\nkill-by 0.5 s: the group was dead {killed_after:.2f} s after registration")
    finally:
        for process in (late, moved):
            process.kill()
            process.wait()


def test_the_liveness_kill_by_kills_every_group_unless_refreshed():
    first = subprocess.Popen(["sleep", "600"], start_new_session=True)
    second = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        watchdog = Watchdog(env={"PATH": os.defpath})
        watchdog.register(first.pid, time.monotonic() + 600)
        watchdog.liveness(time.monotonic() + 0.3)
        watchdog.liveness(time.monotonic() + 0.6)  # a confirmation moves it
        time.sleep(0.4)
        assert first.poll() is None
        watchdog.register(second.pid)
        assert first.wait(timeout=10) == -signal.SIGKILL
        assert second.wait(timeout=10) == -signal.SIGKILL
    finally:
        for process in (first, second):
            process.kill()
            process.wait()
