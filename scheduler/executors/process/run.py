"""The `process` executor's runner: one run of a job as a sandboxed subprocess.

`run_job(job_id, attempt)` runs in a thread of a Celery worker serving the job's
instance type (`instances.<type>`), and that thread stays with the run until its
process is gone (`PR_SET_PDEATHSIG` fires when the parent *thread* exits).

Sandbox. The process gets the argument vector of its job definition (`Job.argv`,
never a shell), an environment built from nothing: the definition's variables, then
`PATH` (the runner's interpreter directory and /usr/local/bin:/usr/bin:/bin), `HOME`
(its own working directory), `LANG=C.UTF-8` and `JOB_ID`, `JOB_ATTEMPT`,
`JOB_CHECKPOINT_DIR`, `JOB_STATUS_FILE`; nothing of the runner's own environment. It
runs in a session and process group of its own, in its own working directory, with
umask 077, the definition's limits (`RLIMIT_AS`, `RLIMIT_CPU`; its wall-clock limit is
enforced here) and, when the runner is root, as `RUNNER_USER` with no supplementary
groups. A root runner without `RUNNER_USER` refuses to start jobs (unless
`RUNNER_ALLOW_ROOT=1`, which only the local demo sets): such a run ends FAILED with
cause `runner_refused` (and a worker that would serve jobs as root does not start at
all, see `scheduler.executors.process.worker`). A program the job's account cannot execute (not
found, or a directory on its way not searchable by it) fails the job with cause
`runner_refused` naming it, not with an exit code; a runner lists such programs at
start (`sandbox_check`).

Network. Unless its definition says `network`, the process runs in an empty network
namespace of its own: only a loopback that is down, so nothing is reachable, 127.0.0.1
(the runner's PostgreSQL and Redis) included. The child makes it itself between fork
and exec (`unshare(CLONE_NEWNET)` as root, before dropping to `RUNNER_USER`; a runner
that is not root adds a user namespace mapping only its own account), so no other
process sits between the runner and the job: the process group, the inherited lock,
the parent-death signal and the exec of the argument vector are as without it. A
runner checks at start that it can do this (`sandbox_check`); one that cannot refuses
network-less jobs (FAILED, cause `runner_refused`, saying why) unless
`RUNNER_ALLOW_HOST_NETWORK=1`, which runs them on the runner's network instead.
Refusing, rather than not starting, keeps a runner that serves only definitions with
`network` useful, and its start-up check puts the cause on `/healthz/`.

Files, under `JOB_CHECKPOINT_ROOT/job-<id>/` (owned by the runner; the job cannot
rename or replace what is in it):
- `checkpoint/` the job's checkpoint directory, kept across attempts (the job's user);
- `attempt-<n>/` the attempt's working directory and HOME, with `status.json`, where
  the process reports `{"progress": s, "checkpointed": s}` (the job's user);
- `attempt-<n>.log` its standard output and error (the runner's);
- `attempt-<n>.exit.json` how the program ended (the runner's, see "Endings");
- `lock` flocked by the attempt that may use `checkpoint/`: the runner takes it before
  starting the process and the process inherits it, so it is held until the runner
  *and* every process holding it are gone, whatever the database says. A new attempt
  waits for it (renewing its lease) and gives the run back (`checkpoint_busy`) if an
  older attempt's processes outlive the wait.

Lease. The claim returns a lease token; every heartbeat renews it and reports the
status file's figures. The lease asked for is the time the runner keeps its process
without news from the database (`JOB_HEARTBEAT_TIMEOUT`, at least three heartbeats)
plus the time it needs to stop it (the definition's grace, then `JOB_KILL_MARGIN_SECONDS`
for SIGKILL and a late wake-up), `lease_seconds_for`. Transient database errors and
heartbeats that hang (a lock on the job table) are waited out: the process keeps
running for the whole keeping time, so a database stall shorter than that stops
nothing. Only when nothing but the stopping time is left of the lease does the runner
stop its group (SIGTERM, the grace, SIGKILL; a guard thread does it if the run's own
thread is stuck in a database call), so the recovery sweep, which requeues a run
only once its lease expired on the database's clock, never finds a live process
behind a requeued run. The runner counts the lease from the moment it sent the
claim or heartbeat, on its monotonic clock; the database counts it from when it
wrote it, later: the runner's view is the shorter. A refused heartbeat (the run was
requeued or ended: fenced) stops the group at once.

Notice. A victim (reclaim, in-share preemption) or a terminated job is not stopped at
the decision: it is STOPPING, holding its capacity, until its process is gone. After
commit the pass broadcasts the notice (`ProcessExecutor.notify`, the `job_notice`
control command of scheduler.executors.process.worker); `wake_runs` writes to the run's wake
pipe, the run renews its lease at once and the reply says how much grace is left on
the database's clock (`runs.Renewal`). The run sends SIGTERM to the group then, SIGKILL
when the grace is over, and reports the exit with the status file's figures
(`runs.job_run_stopped`): only then is the capacity free. Without the broadcast (a
broker that cannot fan out, or is down) the next heartbeat learns the notice, at most
`JOB_HEARTBEAT_SECONDS` later. A runner that never reports is covered by the sweep,
which stops the job once the end of its grace plus `JOB_KILL_MARGIN_SECONDS` and its
lease's expiry have both passed (`runs.jobs_stop_overdue`, see "Fencing"); a STOPPING
run is not requeued by its lease.

Fencing. The runner's watchdog (a process of its own, in its own session: a SIGSTOP
of the runner does not reach it, scheduler.executors.process.watchdog) knows, per job
group, a kill-by time on the machine's monotonic clock (`Run.kill_by`): the end of the
lease's keeping and stopping time (the lease less the kill margin), or, once the run
has notice, the end of its grace. The run refreshes it with every renewed lease; when
it passes unrefreshed (the runner frozen, or stuck) the watchdog sends the group
SIGKILL itself, within its 0.1 s tick. The sweep never frees a claimed run's slot
before its lease expired on the database's clock, which is later than the kill-by (the
database counts the lease from when it wrote it, the runner from when it sent it) by
at least the kill margin; a STOPPING run also waits for its grace end plus the margin.
So the bound: a frozen runner's program is dead by its last lease's end less
`JOB_KILL_MARGIN_SECONDS`; the slot comes back no sooner than the later of that lease's
end and (with notice) the grace end plus the margin. The worst-case wait for the slot
of a frozen runner's victim is one lease after its last renewal:
`JOB_HEARTBEAT_TIMEOUT` + the grace + `JOB_KILL_MARGIN_SECONDS` (53 s with the
defaults and a 10 s grace), or sooner by liveness (below). A runner that sees its
program killed by SIGKILL past a kill-by knows it was fenced: it reports no exit.

Liveness. A runner worker on PostgreSQL holds a liveness lock for its whole life
(scheduler.executors.process.worker) and confirms every `RUNNER_LIVENESS_CHECK_SECONDS` that
it still does (`liveness`); a lost connection is replaced at once (retried every 0.1 s).
The sweep requeues a dead runner's runs once a sweep found the lock free and a later one
finds it still free `RUNNER_DEAD_AFTER_SECONDS` after, with no taking between
(scheduler.services.runs). The lock was held when the last confirmation was sent, so
the sweep's first sighting of it free, and so any requeue, is at least
`RUNNER_DEAD_AFTER_SECONDS` after that confirmation. The runner's side guarantees its
processes are dead by then: if it cannot confirm, it starts stopping them
`LIVENESS_KILL_BUDGET` + `LIVENESS_STOP_GRACE` (1.5 + 0.5 s) before that bound, and its
watchdog, told each confirmation's bound (`Liveness.kill_by`), kills every group
`LIVENESS_KILL_BUDGET` before it even when the runner is frozen. A runner that re-takes
its lock in time (a database restart or terminated connections of a few seconds: up to
`RUNNER_DEAD_AFTER_SECONDS` - 2 s, 4 s by default, from its last confirmation) stops
nothing: taking the lock clears the sweep's note, and the sweep holds the lock while it
decides, so a requeue and a re-take cannot cross. When the whole database is down, no
sweep runs either. The price: a runner frozen for longer than that (4.5 s) while it
holds runs loses them (they resume from their checkpoints), because its lock could
have gone free meanwhile.

Outages. Heartbeats that fail or hang are waited out for the keeping time
(`JOB_HEARTBEAT_TIMEOUT`, 40 s by default: a 30 s lock on the job table stops nothing);
the liveness lock is another table's and another connection's, so a lock on the job
table does not touch it.

Endings. An exit of its own is reported (0 SUCCEEDED, else FAILED with the code). It
is kept first: once the program's first process exited, and before it is reaped, the
runner writes `attempt-<n>.exit.json` in the job's area (`run_area.write_exit_record`:
the exit status, the end on the database's clock as the runner estimates it, its
measured offset, the figures); then it reports it, retrying transient errors for as
long as it takes (not only for the lease); a runner shutting down before it could
keeps the report for its beat thread (`report_pending`). A program that ended while
the runner was frozen is reported when it wakes, whatever its lease and liveness say
then. The sweep, before it requeues a lost run, reads the record: a run whose program
ended is recorded as it ended, never run again (scheduler.services.runs). The times
written from a report are the database's clock, never before the run's start.

A run past its wall-clock limit is stopped and FAILED with cause `wall_clock_limit`;
a runner shutting down (warm shutdown, SIGTERM) stops its runs and gives them back
(`runner_stopped`). If the runner dies outright, `PR_SET_PDEATHSIG` kills each job's
first process and the runner's watchdog kills their whole groups.

Checkpoint disk. A run whose area cannot be written (the checkpoint root full or
read-only: its directories cannot be made, or a probe file cannot be written and
synced, `run_area.checkpoint_write_problem`) does not start its program: the job
FAILS with cause `checkpoint_disk_full` and the reason ("cannot write the checkpoint
directory: <error>"), not with exit 1 and an empty log. The runner probes the root at
each beat; while it cannot write it records the problem (`/healthz/` "degraded") and
stops consuming its instance types' queues, so no further job starts on it
(scheduler.executors.process.worker).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import logging
import os
import resource
import select
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from fleet.models import Job
from scheduler.executors.process.watchdog import Watchdog
from scheduler.executors.run_area import (
    CHECKPOINT_WRITE_PROBLEM,
    SYSTEM_PATH,
    AccountRule,
    JobAccount,
    RunArea,
    RunRefused,
    checkpoint_write_problem,
    job_argv,
    read_status,
    write_exit_record,
)
from scheduler.services import runs

logger = logging.getLogger(__name__)

TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
LOCK_POLL_SECONDS = 0.1
FIRST_RETRY_SECONDS = 0.05
# Seconds between the end of a liveness stop (SIGKILL sent) and the moment the sweep
# may requeue: the kill itself and the guard thread's late wake-up.
LIVENESS_KILL_BUDGET = 1.5
# The most a liveness stop gives a process between SIGTERM and SIGKILL: the runner keeps
# its processes as long as it can (`RUNNER_DEAD_AFTER_SECONDS` less this and the budget)
# in case it re-takes its lock, and then fences at once.
LIVENESS_STOP_GRACE = 0.5

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = getattr(_libc, "prctl", None)
_unshare = getattr(_libc, "unshare", None)

# Set by the worker's shutdown signal: every run stops its process and gives it back.
shutting_down = threading.Event()

# The runs of this worker process by job id: the write end of each run's wake pipe.
_wakes: dict[int, int] = {}
_wakes_lock = threading.Lock()


def wake_runs(job_ids) -> int:
    """Wake the runs of these jobs that this process runs (a notice, `notify_runs`):
    each renews its lease at once and so learns its notice. Returns how many."""
    woken = 0
    with _wakes_lock:
        for job_id in job_ids:
            fd = _wakes.get(int(job_id))
            if fd is not None:
                with contextlib.suppress(OSError):  # a full pipe is awake already
                    os.write(fd, b"!")
                woken += 1
    return woken


class RunnerRefused(RunRefused):
    """The runner will not start this job; the message says why."""


def heartbeat_seconds() -> float:
    return float(getattr(settings, "JOB_HEARTBEAT_SECONDS", 2))


def default_grace_seconds() -> float:
    return float(getattr(settings, "JOB_STOP_GRACE_SECONDS", 10))


def heartbeat_timeout() -> float:
    """How long a runner keeps its process without renewing its lease (the lease is
    this plus the stopping time), and how long a run may stay unclaimed."""
    return float(getattr(settings, "JOB_HEARTBEAT_TIMEOUT", 40))


def kill_margin_seconds() -> float:
    """What a lease keeps beyond the grace: SIGKILL, and a late wake-up of the guard."""
    return float(getattr(settings, "JOB_KILL_MARGIN_SECONDS", 3))


def runner_dead_after() -> float:
    return float(getattr(settings, "RUNNER_DEAD_AFTER_SECONDS", 6))


class Liveness:
    """This runner's last confirmation that it holds its liveness lock (monotonic
    time the confirming query was sent); None until it first held it (no lock: on
    SQLite, or a run outside a runner worker), when the leases alone apply."""

    def __init__(self):
        self._lock = threading.Lock()
        self._confirmed: float | None = None

    def confirm(self, sent: float) -> None:
        with self._lock:
            self._confirmed = sent if self._confirmed is None else max(self._confirmed, sent)
            kill_by = self._confirmed + runner_dead_after() - LIVENESS_KILL_BUDGET
        # The watchdog fences every group by then unless a later confirmation moves it:
        # a frozen runner's processes are gone before the sweep counts it dead.
        watchdog().liveness(kill_by)

    def kill_by(self) -> float | None:
        """When the watchdog kills every group if this stays the last confirmation."""
        dead_by = self.dead_by()
        return None if dead_by is None else dead_by - LIVENESS_KILL_BUDGET

    def dead_by(self) -> float | None:
        """When the sweep may first count this runner dead, if it stays unconfirmed."""
        with self._lock:
            if self._confirmed is None:
                return None
            return self._confirmed + runner_dead_after()


liveness = Liveness()


class Clock:
    """This runner's clock offset from the database's (seconds, positive: ahead), as its
    beat thread last measured it; None before the first measure."""

    offset: float | None = None


clock = Clock()


# Reports of ended runs that could not be made before the runner shut down (the
# database was unreachable): retried by the beat thread (`report_pending`).
_pending: list[tuple] = []
_pending_lock = threading.Lock()


def keep_pending(call, job_id: int, attempt: int, token: str, kwargs: dict) -> None:
    with _pending_lock:
        _pending.append((call, job_id, attempt, token, dict(kwargs)))


def report_pending() -> int:
    """Report what runs of this runner could not; keeps those that fail again on a
    transient error. Returns how many were settled (accepted or refused)."""
    with _pending_lock:
        waiting = list(_pending)
        _pending.clear()
    settled = 0
    for call, job_id, attempt, token, kwargs in waiting:
        try:
            call(job_id=job_id, attempt=attempt, lease_token=token, **kwargs)
            settled += 1
        except TRANSIENT_DB_ERRORS:
            _reset_connection()
            keep_pending(call, job_id, attempt, token, kwargs)
    return settled


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# Who runs the job: the shared rule (scheduler.executors.run_area).

RUNNER_ACCOUNT = AccountRule("RUNNER_USER", "RUNNER_ALLOW_ROOT", "the runner", "switch to it")


def job_account() -> JobAccount:
    """The account jobs run as, or RunnerRefused when none is safe.

    A root runner switches to `RUNNER_USER`; it runs jobs as root only with
    `RUNNER_ALLOW_ROOT=1`. A runner that is not root cannot switch: it runs jobs as
    itself, and refuses a `RUNNER_USER` that names another account.
    """
    return RUNNER_ACCOUNT.account(error=RunnerRefused)


def protect_runner_memory() -> None:
    """Make this process non-dumpable: a job running under the same account cannot
    read its environment or memory through /proc (nor ptrace it)."""
    if _prctl is not None:
        _prctl(PR_SET_DUMPABLE, 0)


def allow_host_network() -> bool:
    return bool(getattr(settings, "RUNNER_ALLOW_HOST_NETWORK", False))


def job_network_isolation(job: Job) -> bool:
    """Whether the job's process runs without a network; RunnerRefused when it must
    and this runner cannot isolate it (and `RUNNER_ALLOW_HOST_NETWORK` is off)."""
    if job.definition_revision is not None and job.definition_revision.network:
        return False
    problem = network_isolation_problem()
    if problem is None:
        return True
    if allow_host_network():
        logger.warning("job %s runs on the runner's network: %s", job.pk, problem)
        return False
    raise RunnerRefused(
        f"{problem}; the job's definition does not allow network access, so it does not "
        "run here (give the runner CAP_SYS_ADMIN or user namespaces, or set "
        "RUNNER_ALLOW_HOST_NETWORK=1 to run such jobs on the runner's network)"
    )


@functools.cache
def network_isolation_problem() -> str | None:
    """None when this runner can run a job in an empty network namespace, else why not
    (tried once per process, in a forked child, as a job's child does it)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: system calls only, then _exit
        os.close(read_end)
        try:
            enter_empty_network()
            answer = b""
        except OSError as error:
            answer = f"{error.filename or 'unshare'}: {error.strerror or error}".encode()
        os.write(write_end, answer)
        os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 4096)
    os.close(read_end)
    os.waitpid(pid, 0)
    if answer:
        return f"this runner cannot isolate jobs' network ({answer.decode(errors='replace')})"
    return None


def cannot_run_message(program: str, error: OSError) -> str:
    """Why the job's account could not execute its program, for the job's failure."""
    reason = error.strerror or str(error)
    return (
        f"the job's account cannot execute {program!r} ({reason}): install it where "
        "the account may run it (every directory on its path must be searchable by "
        "the account), or fix the definition's program"
    )


@dataclass(frozen=True)
class Limits:
    grace: float
    wall_clock: float | None
    address_space_mb: int | None
    cpu_seconds: int | None

    @classmethod
    def of(cls, revision) -> Limits:
        if revision is None:
            return cls(default_grace_seconds(), None, None, None)
        return cls(
            grace=float(revision.stop_grace_seconds),
            wall_clock=revision.wall_clock_limit or None,
            address_space_mb=revision.max_address_space_mb or None,
            cpu_seconds=revision.max_cpu_seconds or None,
        )

    def rlimits(self) -> list[tuple[int, int, int]]:
        out = []
        if self.address_space_mb:
            size = self.address_space_mb * 1024 * 1024
            out.append((resource.RLIMIT_AS, size, size))
        if self.cpu_seconds:
            # SIGXCPU at the limit (a process may save and exit), SIGKILL a grace later.
            hard = self.cpu_seconds + max(1, int(self.grace))
            out.append((resource.RLIMIT_CPU, self.cpu_seconds, hard))
        return out


def enter_empty_network() -> None:
    """Move the calling process, a single-threaded child between fork and exec, into a
    new network namespace with nothing in it. Root needs CAP_SYS_ADMIN; anyone else
    creates a user namespace first (where the kernel allows it), mapping only its own
    uid and gid, so files and the account look as before. OSError when refused."""
    if _unshare is None:
        raise OSError(0, "this system has no unshare(2)")
    root = os.geteuid() == 0
    uid, gid = os.geteuid(), os.getegid()
    if _unshare(CLONE_NEWNET if root else CLONE_NEWUSER | CLONE_NEWNET) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), "unshare")
    if not root:
        for name, line in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as mapping:
                mapping.write(line)


def _child_setup(
    rlimits: list[tuple[int, int, int]], runner_pid: int, account: JobAccount, isolate: bool
):
    """What the child does between fork and exec, in this order: leave the network
    (which needs the runner's privileges), drop to the job's account, then set the
    parent-death signal (a change of credentials clears it) and the limits."""

    def setup() -> None:
        if isolate:
            try:
                enter_empty_network()
            except OSError as error:  # Popen reports only that setup failed: say why
                os.write(1, f"cannot isolate the job's network: {error}\n".encode())
                raise
        if account.uid is not None:
            os.setgroups([])
            os.setresgid(account.gid, account.gid, account.gid)
            os.setresuid(account.uid, account.uid, account.uid)
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != runner_pid:  # the runner died before the line above
                os._exit(125)
        for which, soft, hard in rlimits:
            resource.setrlimit(which, (soft, hard))

    return setup


def spawn(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    stdout: int,
    account: JobAccount,
    isolate: bool,
    pass_fds: tuple[int, ...] = (),
    rlimits: list[tuple[int, int, int]] | None = None,
) -> subprocess.Popen:
    """Start `argv` (never through a shell) as a job is started: its own session and
    process group, umask 077, no network when `isolate`, as `account`. The start-up
    check of a runner (`sandbox_check`) starts its probe this way too."""
    return subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        pass_fds=pass_fds,
        start_new_session=True,
        umask=0o077,
        preexec_fn=_child_setup(rlimits or [], os.getpid(), account, isolate),
    )


class Group:
    """A job's process and its process group (the process leads a session of its own)."""

    def __init__(self, process: subprocess.Popen):
        self.process = process
        self.pgid = process.pid
        try:
            self._pidfd = os.pidfd_open(process.pid)
        except OSError:  # before Linux 5.3, or a seccomp profile without it: poll
            self._pidfd = None

    def exited(self, timeout: float, wake: int | None = None) -> bool:
        """Wait up to `timeout` for the first process to exit (or a byte on the `wake`
        pipe: a notice). It is left unreaped, so its pid, the group's id, cannot be
        reused while the group is signalled."""
        if self._pidfd is not None:
            watched = [self._pidfd] if wake is None else [self._pidfd, wake]
            readable, _, _ = select.select(watched, [], [], max(0.0, timeout))
            return self._pidfd in readable
        end = time.monotonic() + timeout
        while True:
            try:
                flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
                if os.waitid(os.P_PID, self.pgid, flags) is not None:
                    return True
            except ChildProcessError:
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))

    def status(self) -> int | None:
        """The first process's exit status once it exited, left unreaped (as Popen
        gives it: the code, or minus the signal); None while it runs."""
        try:
            info = os.waitid(os.P_PID, self.pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.process.returncode
        if info is None:
            return None
        if info.si_code == os.CLD_EXITED:
            return info.si_status
        return -info.si_status

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def stop(self, grace: float) -> None:
        """SIGTERM to the group; SIGKILL to whatever is left once the first process
        exited or the grace passed."""
        if not self.exited(0):
            self.signal(signal.SIGTERM)
            self.exited(grace)
        self.signal(signal.SIGKILL)
        self.exited(5)

    def reap(self) -> int:
        """Kill what the process left in its group, collect its exit status."""
        self.signal(signal.SIGKILL)
        code = self.process.wait()
        if self._pidfd is not None:
            os.close(self._pidfd)
        return code


_watchdog: Watchdog | None = None
_watchdog_lock = threading.Lock()


def watchdog() -> Watchdog:
    global _watchdog
    with _watchdog_lock:
        if _watchdog is None:
            _watchdog = Watchdog(env={"PATH": ":".join(SYSTEM_PATH), "LANG": "C.UTF-8"})
        return _watchdog


# The run.


def _reset_connection() -> None:
    """Drop this thread's database connection after an error; the next query opens a
    new one (a terminated backend leaves a connection that only fails)."""
    with contextlib.suppress(Exception):
        connection.close()


@dataclass
class Outcome:
    """How a run ended, and what (if anything) to report."""

    # exited | fenced | noticed | lease_lost | liveness_lost | wall_clock_limit | stopping
    # | busy | refused
    kind: str
    exit_code: int | None = None


class Run:
    """One claimed run: its lease, its files and lock, its process."""

    # Whether the process gets an empty network namespace (`job_network_isolation`),
    # and why the runner could not start it (a "refused" outcome).
    isolate_network = True
    refusal = ""

    def __init__(self, job: Job, attempt: int, token: str, lease_seconds: float, granted: float):
        self.job = job
        self.job_id = job.pk
        self.attempt = attempt
        self.token = token
        self.lease_seconds = lease_seconds
        self.limits = Limits.of(job.definition_revision)
        self.heartbeat = heartbeat_seconds()
        self.deadline = granted + lease_seconds
        self.next_beat = granted + self.heartbeat
        self.retry_delay = FIRST_RETRY_SECONDS
        self.paths = RunArea.of(job.pk, attempt)
        self.figures = (job.checkpointed, job.checkpointed)
        self.guard_fired = threading.Event()
        self.stop_grace = self.limits.grace
        # Seconds of notice left (the run is STOPPING), as the last heartbeat said, and
        # when that grace ends (monotonic).
        self.notice_left: float | None = None
        self.notice_end: float | None = None
        self.group: Group | None = None

    @property
    def stop_by(self) -> float:
        """When to start stopping the process so it is dead before the lease expires:
        all of the lease is the runner's but its stopping time (`lease_seconds_for`)."""
        return self.deadline - self.limits.grace - kill_margin_seconds()

    @property
    def kill_by(self) -> float:
        """When the watchdog kills the group if the runner has not (monotonic): the end
        of the lease's keeping and stopping time, a kill margin before the lease ends
        (the database's expiry is later still: it counts from when it wrote it); for a
        run with notice, the end of its grace."""
        end = self.deadline - kill_margin_seconds()
        if self.notice_end is not None:
            end = min(end, self.notice_end)
        return end

    def fence(self, group: Group) -> None:
        """Tell the watchdog this run's current kill-by (after each renewal)."""
        watchdog().register(group.pgid, self.kill_by)

    def stop_plan(self) -> tuple[float, float, str]:
        """(when to start stopping the process, the grace it then gets, why): at the
        end of the lease, or sooner when the runner's liveness is unconfirmed."""
        plan = (self.stop_by, self.limits.grace, "lease_lost")
        dead_by = liveness.dead_by()
        if dead_by is not None:
            grace = min(self.limits.grace, LIVENESS_STOP_GRACE)
            plan = min(plan, (dead_by - LIVENESS_KILL_BUDGET - grace, grace, "liveness_lost"))
        return plan

    def log(self, level: int, message: str, *args) -> None:
        logger.log(level, "job %s attempt %s: " + message, self.job_id, self.attempt, *args)

    # Lease.

    def keep_lease(self) -> str | None:
        """Renew the lease when a beat is due. None while the run is ours; "fenced",
        "lease_lost" or "liveness_lost" when the process must stop (with
        `stop_grace`)."""
        now = time.monotonic()
        stop_at, grace, why = self.stop_plan()
        if now >= stop_at:
            if why == "lease_lost":
                self.log(logging.ERROR, "could not renew the lease in time; stopping the process")
            else:
                self.log(logging.ERROR, "the runner's liveness is unconfirmed; stopping")
            self.stop_grace = grace
            return why
        if now < self.next_beat:
            return None
        reported = read_status(self.paths.status)
        if reported is not None:
            self.figures = reported
        sent = time.monotonic()
        try:
            renewed = runs.job_heartbeat(
                job_id=self.job_id,
                attempt=self.attempt,
                lease_token=self.token,
                progress=self.figures[0],
                checkpointed=self.figures[1],
                lease_seconds=self.lease_seconds,
            )
        except TRANSIENT_DB_ERRORS as error:
            _reset_connection()
            self.log(
                logging.WARNING,
                "heartbeat failed (%s); retrying in %.2f s",
                str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
                self.retry_delay,
            )
            self.next_beat = time.monotonic() + self.retry_delay
            self.retry_delay = min(self.retry_delay * 2, self.heartbeat)
            return None
        if not renewed:
            self.log(logging.INFO, "the run is over (preempted, terminated or requeued)")
            return "fenced"
        self.deadline = sent + self.lease_seconds
        self.next_beat = sent + self.heartbeat
        self.retry_delay = FIRST_RETRY_SECONDS
        if renewed.notice_left is not None:
            # Counted from when the heartbeat was sent: the runner kills no later than
            # the database's end of the grace.
            self.notice_left = renewed.notice_left
            self.notice_end = sent + renewed.notice_left
        if self.group is not None:
            self.fence(self.group)
        return "noticed" if renewed.notice_left is not None else None

    def report(self, call, *, kept: bool = False, **kwargs) -> bool:
        """A report about the run, retried on transient errors while the lease lasts;
        a `kept` one (an exit, whose record is in the run area) for as long as it takes,
        and when the runner shuts down first it is left to `report_pending`."""
        while True:
            try:
                return call(
                    job_id=self.job_id, attempt=self.attempt, lease_token=self.token, **kwargs
                )
            except TRANSIENT_DB_ERRORS as error:
                _reset_connection()
                if kept and shutting_down.is_set():
                    self.log(logging.ERROR, "could not report (%s); kept for later", error)
                    keep_pending(call, self.job_id, self.attempt, self.token, kwargs)
                    return False
                if not kept and time.monotonic() + self.retry_delay >= self.deadline:
                    self.log(logging.ERROR, "could not report (%s); the sweep will", error)
                    return False
                time.sleep(self.retry_delay)
                self.retry_delay = min(self.retry_delay * 2, self.heartbeat)

    # Checkpoint lock.

    def acquire_lock(self) -> tuple[int | None, str | None]:
        """(fd, None) once this attempt holds the job's lock; (None, why) if it gave up."""
        fd = os.open(self.paths.lock, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        give_up = time.monotonic() + self.lease_seconds + self.limits.grace
        waiting = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if waiting:
                    self.log(logging.INFO, "the previous attempt's processes are gone")
                return fd, None
            except BlockingIOError:
                pass
            if not waiting:
                self.log(logging.WARNING, "waiting for a previous attempt's processes to exit")
                waiting = True
            why = self.keep_lease()
            if why is None and shutting_down.is_set():
                why = "stopping"
            if why is None and time.monotonic() >= give_up:
                why = "busy"
            if why is not None:
                os.close(fd)
                return None, why
            time.sleep(LOCK_POLL_SECONDS)

    # Process.

    def start(self, account: JobAccount, lock_fd: int, log_fd: int) -> Group:
        env = self.paths.environment(
            environment=getattr(self.job.definition_revision, "environment", None),
            job_id=self.job_id,
            attempt=self.attempt,
        )
        process = spawn(
            job_argv(self.job),
            env=env,
            cwd=self.paths.workdir,
            stdout=log_fd,
            pass_fds=(lock_fd,),
            account=account,
            isolate=self.isolate_network,
            rlimits=self.limits.rlimits(),
        )
        return Group(process)

    def supervise(self, group: Group) -> Outcome:
        started = time.monotonic()
        wall_end = started + self.limits.wall_clock if self.limits.wall_clock else None
        while True:
            now = time.monotonic()
            wake = min(self.next_beat, self.stop_plan()[0], wall_end or float("inf"))
            exited = group.exited(min(max(0.0, wake - now), self.heartbeat), self.wake_read)
            if self.guard_fired.is_set():
                return Outcome("lease_lost")
            if exited:
                return self.ended(group)
            if self._woken():
                self.next_beat = time.monotonic()  # a notice: learn it now
            if shutting_down.is_set():
                self.log(logging.INFO, "the runner is shutting down; stopping the process")
                group.stop(self.limits.grace)
                return Outcome("stopping")
            if wall_end is not None and time.monotonic() >= wall_end:
                self.log(logging.INFO, "past its wall-clock limit; stopping the process")
                group.stop(self.limits.grace)
                return Outcome("wall_clock_limit")
            why = self.keep_lease()
            if self.guard_fired.is_set():
                return Outcome("lease_lost")
            if why == "noticed":
                return self.stop_on_notice(group)
            if why is not None:
                group.stop(self.stop_grace)
                return Outcome(why)

    def ended(self, group: Group) -> Outcome:
        """The first process exited: by itself ("exited", its end kept in the run area
        before it is reaped), or killed by the watchdog at the kill-by the runner could
        not move while frozen ("lease_lost": the lease's end fenced it, nothing is kept)."""
        status = group.status()
        fenced_at = min(self.kill_by, liveness.kill_by() or float("inf"))
        if status == -signal.SIGKILL and time.monotonic() >= fenced_at:
            self.log(
                logging.ERROR, "the watchdog fenced the process (lease or liveness unconfirmed)"
            )
            return Outcome("lease_lost")
        self.keep_exit(status)
        return Outcome("exited")

    def keep_exit(self, status: int | None) -> None:
        """Write the exit record (`run_area.write_exit_record`): the exit status, the
        end on the database's clock as this runner estimates it (its clock less its
        measured offset), the figures."""
        reported = read_status(self.paths.status)
        if reported is not None:
            self.figures = reported
        offset = clock.offset
        record = {
            "job_id": self.job_id,
            "attempt": self.attempt,
            "worker": worker_name(),
            "exit_code": status if status is not None else -1,
            "ended_at": time.time() - (offset or 0.0),
            "clock_offset": offset,
            "progress": self.figures[0],
            "checkpointed": self.figures[1],
        }
        try:
            write_exit_record(self.paths.exit, record)
        except OSError as error:
            self.log(logging.ERROR, "cannot keep the exit record: %s", error)

    def _woken(self) -> bool:
        try:
            return bool(os.read(self.wake_read, 64))
        except BlockingIOError:
            return False

    def stop_on_notice(self, group: Group) -> Outcome:
        """The run got notice: SIGTERM to the group now, SIGKILL at the end of the grace
        (the database's `grace_until`), then report the exit (`job_run_stopped`) so the
        capacity goes to the starter only once the processes are gone. The job is
        STOPPING: the sweep does not requeue it, so the lease need not cover the grace
        (the guard is told so)."""
        left = max(0.0, self.notice_end - time.monotonic())
        self.log(logging.INFO, "notice: SIGTERM now, SIGKILL in %.1f s", left)
        self.deadline = max(self.deadline, self.notice_end + kill_margin_seconds() + 1)
        self.fence(group)
        group.stop(left)
        return Outcome("noticed")

    def guard(self, group: Group, done: threading.Event) -> None:
        """Stop the process when the lease runs out (or the runner's liveness goes
        unconfirmed) while the run's own thread is stuck (a database call that hangs
        rather than fails). The thread normally stops it itself at the plan's time;
        this fires a moment later (the kill margin covers the delay). A program that
        already ended by itself (during a freeze of the runner) is left to be reported:
        its exit is kept, not discarded."""
        margin = min(1.0, self.heartbeat)
        while True:
            stop_at, grace, why = self.stop_plan()
            if done.wait(max(0.01, min(stop_at + margin - time.monotonic(), self.heartbeat))):
                return
            if group.exited(0):
                return
            if time.monotonic() >= stop_at + margin:
                self.guard_fired.set()
                self.log(logging.ERROR, "%s and the runner is stuck; stopping", why)
                group.stop(grace)
                return

    def execute(self, account: JobAccount) -> Outcome:
        self.wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        with _wakes_lock:
            _wakes[self.job_id] = wake_write
        try:
            return self._execute(account)
        finally:
            with _wakes_lock:
                if _wakes.get(self.job_id) == wake_write:
                    del _wakes[self.job_id]
            os.close(wake_write)
            os.close(self.wake_read)

    def _execute(self, account: JobAccount) -> Outcome:
        problem = self.area_problem(account)
        if problem is not None:
            self.log(logging.ERROR, "%s; the job fails", problem)
            self.report(
                runs.job_run_failed, cause=runs.CHECKPOINT_DISK_FULL, detail={"reason": problem}
            )
            return Outcome("checkpoint_disk_full")
        lock_fd, why = self.acquire_lock()
        if lock_fd is None:
            outcome = Outcome(why)
            self.finish(outcome)
            return outcome
        try:
            outcome = self.run_process(account, lock_fd)
            self.finish(outcome)
            return outcome
        finally:
            # Released only after the report: a next attempt starts from what was reported.
            os.close(lock_fd)

    def area_problem(self, account: JobAccount) -> str | None:
        """None when the run area is ready and writable, else why not (a full or
        read-only checkpoint filesystem), in the words of `checkpoint_write_problem`."""
        try:
            self.paths.prepare(account)
        except OSError as error:
            return f"{CHECKPOINT_WRITE_PROBLEM}: {error}"
        return checkpoint_write_problem(self.paths.area)

    def run_process(self, account: JobAccount, lock_fd: int) -> Outcome:
        log_flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
        log_fd = os.open(self.paths.log, log_flags, 0o640)
        try:
            group = self.start(account, lock_fd, log_fd)
        except (OSError, ValueError, subprocess.SubprocessError) as error:
            # A missing program, a NUL byte in an argument or the environment, a limit
            # the system refuses.
            os.write(log_fd, f"cannot start {self.job.argv!r}: {error}\n".encode())
            self.log(logging.WARNING, "cannot start %r: %s", self.job.argv, error)
            if isinstance(error, (FileNotFoundError, PermissionError)):
                self.refusal = cannot_run_message(self.job.argv[0], error)
                return Outcome("refused")
            return Outcome("exited", exit_code=127)
        finally:
            os.close(log_fd)
        done = threading.Event()
        guard = threading.Thread(target=self.guard, args=(group, done), daemon=True)
        try:
            self.group = group
            self.fence(group)
            guard.start()
            outcome = self.supervise(group)
        finally:
            done.set()
            if guard.is_alive():
                guard.join()
            # Whatever happened above, no process of the run outlives this thread.
            if not group.exited(0):
                group.stop(self.limits.grace)
            code = group.reap()
            watchdog().unregister(group.pgid)
            self.group = None
        outcome.exit_code = code
        reported = read_status(self.paths.status)
        if reported is not None:
            self.figures = reported
        return outcome

    def finish(self, outcome: Outcome) -> None:
        progress, checkpointed = self.figures
        figures = {"progress": progress, "checkpointed": checkpointed}
        if outcome.kind == "exited":
            self.report(runs.job_process_exited, kept=True, exit_code=outcome.exit_code, **figures)
        elif outcome.kind == "wall_clock_limit":
            self.report(
                runs.job_run_failed,
                cause=runs.WALL_CLOCK_LIMIT,
                detail={"wall_clock_limit": self.limits.wall_clock},
                exit_code=outcome.exit_code,
                **figures,
            )
        elif outcome.kind == "stopping":
            self.report(runs.job_run_released, cause=runs.RUNNER_STOPPED, **figures)
        elif outcome.kind == "busy":
            self.report(runs.job_run_released, cause=runs.CHECKPOINT_BUSY, **figures)
        elif outcome.kind == "refused":
            self.report(
                runs.job_run_failed, cause=runs.RUNNER_REFUSED, detail={"reason": self.refusal}
            )
        elif outcome.kind == "noticed":
            self.report(runs.job_run_stopped, kept=True, exit_code=outcome.exit_code, **figures)
        elif outcome.kind == "liveness_lost":
            # The process is gone; if the database answers again, the slot is free now
            # rather than when the lease runs out (refused if the sweep was first).
            self.report(runs.job_run_released, cause=runs.WORKER_LOST, **figures)


def _retrying(call, *, until: float):
    """call(), retrying transient database errors with backoff until `until`."""
    delay = FIRST_RETRY_SECONDS
    while True:
        try:
            return call()
        except TRANSIENT_DB_ERRORS:
            _reset_connection()
            if time.monotonic() + delay >= until:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def lease_seconds_for(grace: float) -> float:
    """The lease a run asks for: the time its runner keeps the process without news
    from the database (`JOB_HEARTBEAT_TIMEOUT`, at least three heartbeats), then the
    time it takes to stop it (the grace, then the kill margin). The sweep requeues at
    its end, on the database's clock, when the process is gone."""
    keep = max(heartbeat_timeout(), 3 * heartbeat_seconds())
    return keep + grace + kill_margin_seconds()


def run_job(job_id: int, attempt: int) -> str:
    """Run attempt `attempt` of a job to its end; returns what happened, for the log."""
    if shutting_down.is_set():
        return "not claimed: the runner is shutting down"
    until = time.monotonic() + heartbeat_timeout()
    job = _retrying(
        lambda: Job.objects.select_related("definition_revision")
        .filter(pk=job_id, attempt=attempt, state=Job.State.RUNNING, worker="")
        .first(),
        until=until,
    )
    if job is None:
        return "not claimed"
    lease_seconds = lease_seconds_for(Limits.of(job.definition_revision).grace)
    granted = time.monotonic()
    token = _retrying(
        lambda: runs.job_claim_run(
            job_id=job_id, attempt=attempt, worker=worker_name(), lease_seconds=lease_seconds
        ),
        until=until,
    )
    if token is None:
        return "not claimed"
    run = Run(job, attempt, token, lease_seconds, granted)
    try:
        account = job_account()
        job_argv(job)  # refused when there is nothing to run
        run.isolate_network = job_network_isolation(job)
    except RunRefused as refusal:
        run.log(logging.ERROR, "refused: %s", refusal)
        run.report(runs.job_run_failed, cause=runs.RUNNER_REFUSED, detail={"reason": str(refusal)})
        return f"refused: {refusal}"
    outcome = run.execute(account)
    if outcome.kind == "exited":
        return f"exited {outcome.exit_code}"
    return outcome.kind
