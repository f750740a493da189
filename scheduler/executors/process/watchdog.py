"""A runner's watchdog: when the runner dies, even by SIGKILL, it kills its jobs' groups.

`PR_SET_PDEATHSIG` kills a job's first process when the runner dies, but not what that
process started (data loader workers, a launcher's ranks). A runner starts this
script once (`Watchdog` below), in a session of its own, so a signal to the runner's
process group does not reach it; the runner writes `+<pgid>` when a job's process
group starts and `-<pgid>` when it is gone. When its standard input ends (the runner
exited, however it exited, closing the pipe) it sends SIGKILL to every group still
registered, and exits.

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
from pathlib import Path

logger = logging.getLogger(__name__)


def main() -> int:
    # Stop signals are for the runner; this process stays until the runner is gone.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        text = line.strip().decode("ascii", "replace")
        if len(text) > 1 and text[1:].isdigit():
            pgid = int(text[1:])
            if text[0] == "+":
                groups.add(pgid)
            elif text[0] == "-":
                groups.discard(pgid)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return 0


class Watchdog:
    """The runner's side: one watchdog process per runner process, started on first use.

    Thread-safe: every job thread of the runner registers its groups here. If the
    watchdog died, the next registration starts a new one and tells it every group.
    """

    def __init__(self, env: dict[str, str]):
        self._env = env
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._groups: set[int] = set()

    def register(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._send(f"+{pgid}")

    def unregister(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)
            self._send(f"-{pgid}")

    def _send(self, line: str) -> None:
        for _ in range(2):
            fresh = self._process is None or self._process.poll() is not None
            try:
                if fresh:
                    self._start()
                payload = "".join(f"+{g}\n" for g in self._groups) if fresh else f"{line}\n"
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
