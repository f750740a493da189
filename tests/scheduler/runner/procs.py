"""Jobs' processes as the kernel sees them, not as the database says.

A job's process is any live process whose environment carries its `JOB_ID` (the runner
sets it; whatever the process starts inherits it) and a `JOB_CHECKPOINT_DIR` under a
checkpoint root of this test session (`watched_root`): other test sessions on the
machine number their jobs from 1 too. `Sampler` reads /proc every few
milliseconds in a thread of the test and keeps, per sample, each job's live processes
with their attempt; a test asserts on what it saw and prints the timeline.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class JobProcess:
    pid: int
    job_id: int
    attempt: int


def _live(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The state follows the parenthesised command name (which may hold spaces).
            state = stat.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")  # a zombie has exited; only its status remains


_roots: set[str] = set()


@contextlib.contextmanager
def watched_root(root):
    """Count only the jobs whose files are under `root` (while any root is watched)."""
    _roots.add(str(root))
    try:
        yield
    finally:
        _roots.discard(str(root))


def _ours(checkpoint_dir: bytes | None) -> bool:
    if not _roots:
        return True
    return checkpoint_dir is not None and any(
        checkpoint_dir.decode(errors="replace").startswith(root + os.sep) for root in _roots
    )


def job_processes() -> list[JobProcess]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
        except OSError:
            continue
        job_id = attempt = checkpoint_dir = None
        for variable in variables:
            if variable.startswith(b"JOB_ID="):
                job_id = int(variable[7:])
            elif variable.startswith(b"JOB_ATTEMPT="):
                attempt = int(variable[12:])
            elif variable.startswith(b"JOB_CHECKPOINT_DIR="):
                checkpoint_dir = variable[19:]
        if job_id is not None and _ours(checkpoint_dir) and _live(pid):
            found.append(JobProcess(int(pid), job_id, attempt or 0))
    return found


def processes_of(job_id: int) -> list[JobProcess]:
    return [p for p in job_processes() if p.job_id == job_id]


class Sampler(threading.Thread):
    """Samples every job's live processes until stopped; `samples` is
    [(seconds since start, {job_id: [JobProcess, ...]})]."""

    def __init__(self, interval: float = 0.02):
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple[float, dict[int, list[JobProcess]]]] = []
        self._halt = threading.Event()
        self.started_at = time.monotonic()
        self.marks: list[tuple[float, str]] = []

    def run(self) -> None:
        while not self._halt.is_set():
            by_job: dict[int, list[JobProcess]] = defaultdict(list)
            for process in job_processes():
                by_job[process.job_id].append(process)
            self.samples.append((time.monotonic() - self.started_at, dict(by_job)))
            self._halt.wait(self.interval)

    def mark(self, what: str) -> None:
        """Note an event of the test (a fault) on the timeline."""
        self.marks.append((time.monotonic() - self.started_at, what))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def max_live(self, job_id: int) -> int:
        return max((len(by_job.get(job_id, [])) for _, by_job in self.samples), default=0)

    def seen(self, job_id: int) -> list[JobProcess]:
        """Every distinct process of the job, in the order first seen."""
        out: dict[int, JobProcess] = {}
        for _, by_job in self.samples:
            for process in by_job.get(job_id, []):
                out.setdefault(process.pid, process)
        return list(out.values())

    def spans(self, job_id: int) -> list[tuple[float, float, tuple[JobProcess, ...]]]:
        """The timeline: (from, to, the live processes) for each stretch that stayed the same."""
        out: list[tuple[float, float, tuple[JobProcess, ...]]] = []
        for at, by_job in self.samples:
            live = tuple(sorted(by_job.get(job_id, []), key=lambda p: p.pid))
            if out and out[-1][2] == live:
                out[-1] = (out[-1][0], at, live)
            else:
                out.append((at, at, live))
        return out

    def timeline(self, job_id: int, title: str) -> str:
        lines = [
            f"{title}: live processes of job {job_id}, {len(self.samples)} samples "
            f"every {self.interval * 1000:.0f} ms, max {self.max_live(job_id)} at once"
        ]
        for start, end, live in self.spans(job_id):
            who = ", ".join(f"pid {p.pid} attempt {p.attempt}" for p in live) or "-"
            lines.append(f"  {start:6.2f}-{end:6.2f} s  {len(live)} live  {who}")
        for at, what in self.marks:
            lines.append(f"  at {at:6.2f} s: {what}")
        return "\n".join(lines)
