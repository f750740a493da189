"""What every executor that runs a real program shares: the run area, the job's account,
its argument vector and environment, and the notice and status files.

The area of a job is `JOB_CHECKPOINT_ROOT/job-<id>/`, the same for every executor, so a
job moved between queues finds its checkpoint and the job page finds every run's output:
- `checkpoint/` the job's checkpoint directory, kept across attempts (the job's account);
- `attempt-<n>/` the attempt's working directory and HOME, with `status.json`, where
  the program reports `{"progress": s, "checkpointed": s}` (the job's account);
- `attempt-<n>.log` its standard output and error;
- `attempt-<n>.json` the run's spec, for an executor whose launcher reads one;
- `attempt-<n>.notice.json` what is left of the grace, written before SIGTERM;
- `attempt-<n>/launcher.json` what a launcher says of itself;
- `attempt-<n>.exit.json` how the program ended (`write_exit_record`), written by the
  executor once the program's first process exited and before it is reaped, so the
  end survives a report that could not be made (the recovery sweep reads it before it
  would requeue the run: finished work never runs twice);
- `lock` flocked by the attempt that may use `checkpoint/`.

The account rule is one: a root executor runs jobs as the account its setting names
(never root unless its allow-root setting says so, for a local demo); one that is not
root runs them as itself and refuses a setting that names another account.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

STATUS_MAX_BYTES = 4096
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")


def checkpoint_root() -> Path:
    return Path(getattr(settings, "JOB_CHECKPOINT_ROOT", settings.VAR_DIR / "checkpoints"))


# Who runs the job.


class RunRefused(Exception):
    """The executor refuses to run the job: no account is safe to run it as (the message
    says which setting to fix), or there is nothing to run."""


@dataclass(frozen=True)
class JobAccount:
    """The account a job's program runs as; uid None: the executor's own."""

    uid: int | None = None
    gid: int | None = None
    name: str = ""


@dataclass(frozen=True)
class AccountRule:
    """Who an executor runs jobs as: `user_setting` names the account,
    `allow_root_setting` allows root; `who` is the party that starts the programs ("the
    runner") and `act` what it cannot do for another account when it is not root
    ("switch to it")."""

    user_setting: str
    allow_root_setting: str
    who: str
    act: str

    def account(self, *, error: Callable[[str], Exception] = RunRefused) -> JobAccount:
        """The account jobs run as, or `error(why)` raised when none is safe."""
        user_setting, allow_root_setting = self.user_setting, self.allow_root_setting
        who, act = self.who, self.act
        wanted = str(getattr(settings, user_setting, "") or "")
        allow_root = bool(getattr(settings, allow_root_setting, False))
        me = os.geteuid()
        if wanted:
            try:
                entry = pwd.getpwnam(wanted)
            except KeyError:
                raise error(f"{user_setting}={wanted!r}: no such account") from None
            if entry.pw_uid == 0 and not allow_root:
                raise error(
                    f"{user_setting}={wanted!r} is root; name an unprivileged account "
                    f"(or set {allow_root_setting}=1 for a local demo)"
                )
            if me == 0:
                return JobAccount(uid=entry.pw_uid, gid=entry.pw_gid, name=wanted)
            if entry.pw_uid != me:
                raise error(
                    f"{user_setting}={wanted!r}, but {who} is not root (uid {me}) and cannot {act}"
                )
            return JobAccount()
        if me == 0 and not allow_root:
            raise error(
                f"{who} runs as root and {user_setting} is not set: jobs would run as root; "
                f"set {user_setting} to an unprivileged account ({allow_root_setting}=1 only "
                "for a local demo)"
            )
        return JobAccount()


# What runs, with which environment.


def job_argv(job) -> list[str]:
    """The argument vector of the job's definition (never a shell string); RunRefused
    when the job names no definition: there is nothing to run."""
    if not job.argv:
        raise RunRefused("the job names no job definition: there is nothing to run")
    return [str(arg) for arg in job.argv]


def job_path() -> str:
    """PATH of a job: this interpreter's directory first (`python` is the product's
    Python, which the nodes share), then the system's."""
    dirs = [str(Path(sys.executable).parent), *SYSTEM_PATH]
    return os.pathsep.join(dict.fromkeys(dirs))


# Where the run lives.


@dataclass(frozen=True)
class RunArea:
    area: Path
    checkpoint: Path
    workdir: Path
    status: Path
    log: Path
    spec: Path
    lock: Path
    notice: Path
    launcher: Path
    exit: Path

    @classmethod
    def of(cls, job_id: int, attempt: int) -> RunArea:
        area = checkpoint_root() / f"job-{job_id}"
        workdir = area / f"attempt-{attempt}"
        return cls(
            area=area,
            checkpoint=area / "checkpoint",
            workdir=workdir,
            status=workdir / "status.json",
            log=area / f"attempt-{attempt}.log",
            spec=area / f"attempt-{attempt}.json",
            lock=area / "lock",
            notice=area / f"attempt-{attempt}.notice.json",
            launcher=workdir / "launcher.json",
            exit=area / f"attempt-{attempt}.exit.json",
        )

    def prepare(self, account: JobAccount | None = None) -> None:
        """Create the directories; the job's own ones (checkpoint, working directory)
        belong to its account. The root and the area stay the executor's: traversable,
        not listable, so a job reaches its own directories and no others'."""
        account = account or JobAccount()
        for directory in (checkpoint_root(), self.area):
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o711)
        for directory in (self.checkpoint, self.workdir):
            directory.mkdir(exist_ok=True)
            if account.uid is not None:
                os.chown(directory, account.uid, account.gid)
            os.chmod(directory, 0o700)

    def environment(self, *, environment: dict | None, job_id: int, attempt: int) -> dict:
        """The job's whole environment: its definition's variables and the few every
        executor sets; nothing of the executor's own environment."""
        env = {str(key): str(value) for key, value in (environment or {}).items()}
        env.update(
            PATH=job_path(),
            HOME=str(self.workdir),
            LANG="C.UTF-8",
            JOB_ID=str(job_id),
            JOB_ATTEMPT=str(attempt),
            JOB_CHECKPOINT_DIR=str(self.checkpoint),
            JOB_STATUS_FILE=str(self.status),
        )
        return env


def area_log(job_id: int, attempt: int) -> Path:
    """Where a run's standard output and error are, whichever executor ran it."""
    return RunArea.of(job_id, attempt).log


# The files the program and the executor write to each other.


def read_status(path: Path) -> tuple[int, int] | None:
    """(progress, checkpointed) the program last wrote; None before its first write.

    The file is the job's: no symlink is followed, nothing but a small regular file
    is read, and nothing blocks (a FIFO in its place cannot stall the reader).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        status = json.loads(os.read(fd, STATUS_MAX_BYTES))
        return int(status.get("progress", 0)), int(status.get("checkpointed", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    finally:
        os.close(fd)


def write_notice(path: Path, *, grace_seconds: float) -> None:
    """What is left of the grace, for a launcher's timer, written before SIGTERM is
    sent. Nothing secret: readable by the job's account."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as handle:
        json.dump({"grace_seconds": max(0.0, float(grace_seconds))}, handle)
    os.chmod(tmp, 0o644)  # whatever the umask
    os.replace(tmp, path)


# How the program ended, kept beside the checkpoint.

EXIT_MAX_BYTES = 4096


def write_exit_record(path: Path, record: dict) -> None:
    """Keep how the run's program ended (`exit_code`, `ended_at` on the database's
    clock as the executor estimates it, its figures), durably: written to a temporary
    file, synced, then renamed into place. The executor's own file, which the job's
    account cannot write (the area is the executor's); readable by all (mode 0644,
    nothing secret in it), so the recovery sweep reads it from another account."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        os.fchmod(fd, 0o644)  # whatever the umask
        os.write(fd, json.dumps(record, sort_keys=True).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_exit_record(path: Path) -> dict | None:
    """The exit record of a run, None when there is none (or it cannot be read: a
    record half written is never in place, see `write_exit_record`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        record = json.loads(os.read(fd, EXIT_MAX_BYTES))
        if not isinstance(record, dict) or not isinstance(record.get("exit_code"), int):
            return None
        return record
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


PROBE_BYTES = b"checkpoint-probe\n" * 64


def checkpoint_write_problem(directory: Path | None = None) -> str | None:
    """None when the executor can write in `directory` (the checkpoint root by default),
    else "cannot write the checkpoint directory: <error>". It writes, syncs and removes
    a small file of its own: a full or read-only filesystem fails here, not in the job."""
    directory = directory or checkpoint_root()
    probe = directory / f".probe-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        return f"{CHECKPOINT_WRITE_PROBLEM}: {error}"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)
    return None


CHECKPOINT_WRITE_PROBLEM = "cannot write the checkpoint directory"
