"""A run's output (standard output and error, one file per attempt) as the job page
shows it: the tail, and the whole file to download.

Where the file is, the job's executor says (`Executor.log_path`: `attempt-<n>.log` in
the job's area under `JOB_CHECKPOINT_ROOT`, for every executor that runs programs,
scheduler.executors.run_area). The file is the job's: its program writes it, and may
run as the account that could also replace it. So it is opened as `read_status` opens
the status file (scheduler.executors.run_area): from the checkpoint root down, each
directory and the file itself with `O_NOFOLLOW` (no symlink anywhere below the root is
followed), without blocking (a FIFO in its place cannot stall a web worker), and only a
regular file is read. The tail reads a bounded window at the file's end, whatever its
size; the download streams the file in blocks from the descriptor opened here.

Who may read it is the rules table's `job.logs.view` (core.rules): a job's output is
its team's (it may print data, paths or tokens of theirs), so leads read their own
teams' jobs' output, and admins every job's.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from fleet.models import Job
from scheduler.executors import executor_for

TAIL_LINES = 100
TAIL_BYTES = 64 * 1024
# Characters a terminal would act on: shown as their Unicode control pictures, so
# nothing of the output moves the text around or hides part of it.
_CONTROLS = {code: 0x2400 + code for code in range(0x20) if code != 0x09}
_CONTROLS[0x7F] = 0x2421


class LogUnavailable(Exception):
    """No output file to read: never written, or not a regular file of the job's."""


def log_attempts(job: Job) -> list[int]:
    """The attempts whose output the job's executor keeps, newest first ([] when its
    executor runs no program)."""
    if executor_for(job.queue).log_path(job.pk, 1) is None:
        return []
    return list(range(job.attempt, 0, -1))


def attempt_of(job: Job, value) -> int:
    """The attempt asked for (the query string's `attempt`), checked; the job's current
    attempt when none is asked. ValueError names the field and what is allowed."""
    if value in (None, ""):
        return job.attempt
    attempts = log_attempts(job)
    try:
        attempt = int(value)
    except (TypeError, ValueError):
        attempt = 0
    if attempt not in attempts:
        allowed = f"from 1 to {job.attempt}" if attempts else "none: the job has not run"
        raise ValueError(f"attempt: choose an attempt of this job ({allowed})")
    return attempt


def open_log(job: Job, attempt: int) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the attempt's output file, and its stat. The caller
    closes it. LogUnavailable when there is no such regular file."""
    path = executor_for(job.queue).log_path(job.pk, attempt)
    if path is None or attempt < 1:
        raise LogUnavailable("this job's executor keeps no output")
    root = Path(getattr(settings, "JOB_CHECKPOINT_ROOT", settings.VAR_DIR / "checkpoints"))
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise LogUnavailable("the output is not in the job area") from None
    nofollow = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        # The root is the operator's (a symlink there is their choice); below it,
        # everything is the jobs'.
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        raise LogUnavailable("no job area") from None
    try:
        for directory in parts[:-1]:
            inner = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=fd)
            os.close(fd)
            fd = inner
        inner = os.open(parts[-1], os.O_RDONLY | nofollow, dir_fd=fd)
    except OSError:
        raise LogUnavailable("no output file (or not a file of the job's)") from None
    finally:
        os.close(fd)
    info = os.fstat(inner)
    if not stat.S_ISREG(info.st_mode):
        os.close(inner)
        raise LogUnavailable("the output is not a regular file")
    return inner, info


@dataclass(frozen=True)
class LogTail:
    attempt: int
    attempts: list[int]
    exists: bool
    lines: list[str]
    size: int  # bytes of the whole file
    cut: bool  # earlier lines (or bytes) are not shown

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _readable(line: str) -> str:
    # A progress bar redraws its line after "\r": what a terminal shows is the last one.
    if "\r" in line:
        line = line.rstrip("\r").rsplit("\r", 1)[-1]
    return line.translate(_CONTROLS)


def tail_bytes(fd: int, size: int, *, lines: int = TAIL_LINES, limit: int = TAIL_BYTES):
    """The last `lines` lines within the last `limit` bytes of the file: (lines, cut)."""
    start = max(0, size - limit)
    data = os.pread(fd, size - start, start) if size else b""
    cut = start > 0
    if cut and b"\n" in data[:-1]:
        data = data[data.index(b"\n") + 1 :]  # the first line is only its end
    text = data.decode("utf-8", errors="replace")
    found = text.split("\n")
    if found and found[-1] == "":
        found.pop()
    if len(found) > lines:
        found, cut = found[-lines:], True
    return [_readable(line) for line in found], cut


def job_log_tail(job: Job, attempt: int) -> LogTail:
    """The tail of one attempt's output, for the job page."""
    attempts = log_attempts(job)
    try:
        fd, info = open_log(job, attempt)
    except LogUnavailable:
        return LogTail(attempt, attempts, exists=False, lines=[], size=0, cut=False)
    try:
        lines, cut = tail_bytes(fd, info.st_size)
    finally:
        os.close(fd)
    return LogTail(attempt, attempts, exists=True, lines=lines, size=info.st_size, cut=cut)


BLOCK_BYTES = 256 * 1024


def read_blocks(fd: int, size: int):
    """The file's first `size` bytes in blocks, then the descriptor closed (also when
    the response is abandoned half-way: the generator's close)."""
    try:
        offset = 0
        while offset < size:
            block = os.pread(fd, min(BLOCK_BYTES, size - offset), offset)
            if not block:  # truncated meanwhile
                break
            offset += len(block)
            yield block
    finally:
        os.close(fd)


def log_filename(job: Job, attempt: int) -> str:
    return f"job-{job.pk}-attempt-{attempt}.log"
