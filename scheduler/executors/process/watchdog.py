"""A runner's watchdog: it kills its jobs' groups when the runner dies (even by SIGKILL)
and when the runner stops confirming their leases (a runner frozen by SIGSTOP, a
thread stuck in a call), by the same deadline the product's sweep counts on.

`PR_SET_PDEATHSIG` kills a job's first process when the runner dies, but not what that
process started (data loader workers, a launcher's ranks), and nothing fires when the
runner is alive but frozen. A runner starts this script once (`Watchdog` below), in a
session of its own, so a signal to the runner's process group (SIGSTOP included) does
not reach it. The runner writes `+<pgid> <kill-by>` when a job's process group starts
and again each time it renews the run's lease, and `-<pgid>` when the group is gone.
`<kill-by>` is a time on CLOCK_MONOTONIC (one clock for every process of the
machine): the end of the lease's keeping and stopping time, or for a run with notice
the end of its grace (`run.Run.kill_by`). When a group's kill-by passes without a
newer one, the watchdog sends it SIGKILL itself and forgets it. When its standard
input ends (the runner exited, however it exited, closing the pipe) it sends SIGKILL
to every group still registered, and exits. On PostgreSQL the runner also writes `!0
<kill-by>` each time it confirms its liveness lock (the time by which it has stopped
its processes if it stays unconfirmed, `run.Liveness`): when that passes unrefreshed,
every registered group is killed, so the sweep's requeue of a runner whose lock stayed
free holds for a frozen runner too.

It checks its deadlines every `TICK_SECONDS` (0.1 s), so a group is dead at most that
long after its kill-by (plus the kernel's delivery); the runner's kill-by is a kill
margin (`JOB_KILL_MARGIN_SECONDS`, at least 0.5 s) before the lease or grace end the
sweep waits for (scheduler.services.runs), which covers it.

Run as a file (`python -I watchdog.py`), it imports only the standard library.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)


TICK_SECONDS = 0.1
NO_DEADLINE = float("inf")


def _kill(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def parse(line: bytes) -> tuple[str, int, float] | None:
    """("+", "-" or "!", pgid, kill-by) of one line; None for a line it does not know."""
    parts = line.strip().decode("ascii", "replace").split()
    if not parts or len(parts[0]) < 2 or parts[0][0] not in "+-!" or not parts[0][1:].isdigit():
        return None
    deadline = NO_DEADLINE
    if len(parts) > 1:
        try:
            deadline = float(parts[1])
        except ValueError:
            return None
    return parts[0][0], int(parts[0][1:]), deadline


def main() -> int:
    # Stop signals are for the runner; this process stays until the runner is gone.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups: dict[int, float] = {}
    every = [NO_DEADLINE]  # the liveness kill-by, for every group
    lock = threading.Lock()
    ended = threading.Event()

    def read() -> None:
        for line in sys.stdin.buffer:
            parsed = parse(line)
            if parsed is None:
                continue
            sign, pgid, deadline = parsed
            with lock:
                if sign == "+":
                    groups[pgid] = deadline
                elif sign == "!":
                    every[0] = deadline
                else:
                    groups.pop(pgid, None)
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    while not ended.wait(TICK_SECONDS):
        now = time.monotonic()
        with lock:
            overdue = [pgid for pgid, deadline in groups.items() if deadline <= now]
            if every[0] <= now:
                overdue = list(groups)
                every[0] = NO_DEADLINE
            for pgid in overdue:
                del groups[pgid]
        for pgid in overdue:
            _kill(pgid)
    with lock:
        for pgid in groups:
            _kill(pgid)
    return 0


def _line(pgid: int, kill_by: float | None) -> str:
    return f"+{pgid}" if kill_by is None else f"+{pgid} {kill_by:.3f}"


class Watchdog:
    """The runner's side: one watchdog process per runner process, started on first use.

    Thread-safe: every job thread of the runner registers its groups here. If the
    watchdog died, the next registration starts a new one and tells it every group.
    """

    def __init__(self, env: dict[str, str]):
        self._env = env
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._groups: dict[int, float | None] = {}
        self._every: float | None = None

    def register(self, pgid: int, kill_by: float | None = None) -> None:
        """Watch this group: SIGKILL when the runner goes, or at `kill_by` (monotonic
        time) unless a later registration moves it. Registering again refreshes it."""
        with self._lock:
            self._groups[pgid] = kill_by
            self._send(_line(pgid, kill_by))

    def liveness(self, kill_by: float) -> None:
        """Kill every group at `kill_by` unless called again with a later time. Sent
        only to a watchdog already running (no group, nothing to kill)."""
        with self._lock:
            self._every = kill_by
            if self._process is not None and self._process.poll() is None:
                self._send(f"!0 {kill_by:.3f}")

    def unregister(self, pgid: int) -> None:
        with self._lock:
            self._groups.pop(pgid, None)
            self._send(f"-{pgid}")

    def _send(self, line: str) -> None:
        for _ in range(2):
            fresh = self._process is None or self._process.poll() is not None
            try:
                if fresh:
                    self._start()
                payload = f"{line}\n"
                if fresh:
                    payload = "".join(f"{_line(g, k)}\n" for g, k in self._groups.items())
                    if self._every is not None:
                        payload += f"!0 {self._every:.3f}\n"
                self._process.stdin.write(payload.encode("ascii"))
                self._process.stdin.flush()
                return
            except OSError as error:
                self._process = None
                logger.warning("the runner's watchdog is not running: %s", error)

    def _start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=self._env,
            start_new_session=True,
        )


if __name__ == "__main__":
    sys.exit(main())
