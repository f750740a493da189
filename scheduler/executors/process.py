"""The `process` executor's runner: one job run as a subprocess of a Celery worker.

`run_job(job_id, attempt)` claims the run (once: a redelivered message finds it
claimed), starts the job's command with `JOB_ID`, `CHECKPOINT_DIR` and `ATTEMPT` in
its environment, and every heartbeat reports the progress and checkpoint the process
wrote to `$STATUS_FILE`. When the database says the run is over
(preempted, terminated, or requeued after a lost heartbeat) the heartbeat update
matches nothing and the process gets SIGTERM, then SIGKILL after the grace period.
An exit of its own is reported: 0 is SUCCEEDED, anything else FAILED with the code.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from scheduler.models import Job
from scheduler.services.runs import job_claim_run, job_heartbeat, job_process_exited

logger = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


def heartbeat_seconds() -> float:
    return float(getattr(settings, "JOB_HEARTBEAT_SECONDS", 2))


def grace_seconds() -> float:
    return float(getattr(settings, "JOB_STOP_GRACE_SECONDS", 10))


def checkpoint_root() -> Path:
    return Path(getattr(settings, "JOB_CHECKPOINT_ROOT", settings.VAR_DIR / "checkpoints"))


def checkpoint_dir(job_id: int) -> Path:
    return checkpoint_root() / f"job-{job_id}"


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the worker dies, so a lost worker leaves no orphan."""
    # Not on Linux: no such call, and the heartbeat sweep still requeues the job.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def status_file(directory: Path, attempt: int) -> Path:
    """Where a run reports progress: one file per attempt, so the last words of a
    stopped run can never pass for the next run's progress."""
    return directory / f"status-{attempt}.json"


def read_status(path: Path) -> tuple[int | None, int | None]:
    """(progress, checkpointed) the process last wrote; (None, None) before its first write."""
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, None
    return int(status.get("progress", 0)), int(status.get("checkpointed", 0))


def command_args(command: str) -> list[str]:
    """The job's command as an argument list; a leading `python` is this interpreter."""
    args = shlex.split(command)
    if args and args[0] in {"python", "python3"}:
        args[0] = sys.executable
    return args


def stop(process: subprocess.Popen, grace: float) -> int:
    """SIGTERM, then SIGKILL if the process outlives the grace period."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


def run_job(job_id: int, attempt: int) -> str:
    worker = worker_name()
    if not job_claim_run(job_id=job_id, attempt=attempt, worker=worker):
        return "not claimed"
    job = Job.objects.only("command", "checkpointed").get(pk=job_id)
    directory = checkpoint_dir(job_id)
    directory.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "JOB_ID": str(job_id),
        "CHECKPOINT_DIR": str(directory),
        "ATTEMPT": str(attempt),
        "STATUS_FILE": str(status_file(directory, attempt)),
    }
    with (directory / f"attempt-{attempt}.log").open("ab") as log:
        try:
            process = subprocess.Popen(
                command_args(job.command),
                env=env,
                cwd=settings.BASE_DIR,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        except OSError as error:
            logger.warning("job %s: cannot start %r: %s", job_id, job.command, error)
            job_process_exited(job_id=job_id, attempt=attempt, exit_code=127)
            return "could not start"
        progress, checkpointed = job.checkpointed, job.checkpointed
        while True:
            try:
                exit_code = process.wait(timeout=heartbeat_seconds())
                break
            except subprocess.TimeoutExpired:
                pass
            reported = read_status(status_file(directory, attempt))
            if reported[0] is not None:
                progress, checkpointed = reported
            if not job_heartbeat(
                job_id=job_id,
                attempt=attempt,
                progress=progress,
                checkpointed=checkpointed,
                worker=worker,
            ):
                stop(process, grace_seconds())
                return "stopped"
    reported = read_status(status_file(directory, attempt))
    if reported[0] is not None:
        progress, checkpointed = reported
    job_process_exited(
        job_id=job_id,
        attempt=attempt,
        exit_code=exit_code,
        progress=progress,
        checkpointed=checkpointed,
    )
    return f"exited {exit_code}"
