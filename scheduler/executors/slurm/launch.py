#!/usr/bin/python3
"""The batch script of every run of the `slurm` executor (scheduler.executors.slurm).

    sbatch [options] launch.py SPEC

SPEC is the run's JSON spec: {"argv": [...], "environment": {...}, "workdir": "...",
"lock": ..., "lock_wait": s, "notice": ..., "launcher": ..., "fence_seconds": s,
"slurm_conf": ..., "scontrol": ...} (paths in the job's area, seconds, and the cluster's
slurm.conf and scontrol, the node's own where those paths are not; a spec without them
takes no lock, arms no timer and fences nothing).
The launcher starts the argument vector (no shell) in a process group of its own, in
the working directory, with umask 077 and exactly the spec's environment plus what
Slurm says of the allocation (`SLURM_*`, `CUDA_VISIBLE_DEVICES`, `GPU_DEVICE_ORDINAL`):
nothing else of the environment Slurm started it with. It stays the program's parent:

- SIGTERM (the notice, `scancel --full --signal=TERM`) is passed on to the program's
  group (Slurm signals the launcher's own), and the launcher waits for the program to
  exit in its grace.
- The end of the grace is the launcher's own: the product writes the notice file (the
  spec's `notice`: `{"grace_seconds": s}`, what is left of the grace) before it sends
  SIGTERM, and at the first SIGTERM the launcher arms a timer of that many seconds,
  counted from when SIGTERM arrived (never before the product's `grace_until`, whatever
  the nodes' clocks say), whose end sends SIGKILL to the program's whole group. A
  SIGTERM without a notice file (Slurm's time limit, someone's scancel) arms nothing:
  Slurm's own SIGKILL comes `KillWait` later.
- SIGUSR2 (`scancel --batch --signal=USR2`: the product's fallback, the first
  reconciliation after the grace) sends SIGKILL to the program's whole group. Slurm's
  own SIGKILL (`scancel --full --signal=KILL`) would kill everything too, but then
  keeps the job COMPLETING for its `KillWait` (30 s by default) before it reports the
  end, and a batch script killed alone leaves its children behind with
  proctrack/linuxproc.
- When the program ends, what is left of its group is killed, and the launcher ends
  the way the program did: its exit status, or killed by the same signal, so Slurm's
  ExitCode is the program's.

The exit record. Once the program's first process has exited (seen with
`waitid(WNOWAIT)`, so it is not reaped yet) and what is left of its group is killed and
gone, the launcher writes how it ended to the spec's `launcher` file, atomically (a
temporary file renamed over it, opened O_NOFOLLOW): `{"ended_at": epoch seconds,
"exit_status": n or null, "signal": n or null, "fenced": bool}`; only then does it reap
the program and exit. It is the product's proof the program is gone, whatever Slurm
says or forgot (services: `_record_end`).

Self-fencing. Slurm may end the job (NODE_FAIL when slurmctld cannot reach the node's
slurmd, munge down, a network cut) and free its GPUs while the program runs on, and the
product may give them to another job. So the launcher forks, before it starts the
program, a watchdog (a process group of its own, not the program's, deaf to the
notice's SIGTERM and SIGUSR2) that asks Slurm every `fence_seconds / 4` (at most 5 s)
whether the job still runs (`scontrol --oneliner show job $SLURM_JOB_ID`, run in the
background and killed after its timeout, so the watchdog's own clock keeps ticking). It
SIGKILLs the program's whole group when:
- Slurm says the job no longer runs (NODE_FAIL, CANCELLED, ..., or an unknown job id);
- no confirmation came for `fence_seconds` since the start of the last confirmed ask;
- the launcher stopped answering (its keepalive, a byte a second on a pipe) for
  `fence_seconds`: it is frozen (SIGSTOP) or stuck; then the watchdog also writes the
  exit record itself once the group is gone (the launcher cannot);
- the launcher died without saying it was done (the pipe's end of file).
The watchdog says "fenced" to the launcher (a byte on a second pipe) before it kills, so
the exit record says `fenced`; a watchdog that dies makes the launcher kill the program
(nothing would fence it any more). A watchdog stopped itself (the whole job suspended,
a node frozen) for longer than the fence kills the program as soon as it runs again:
it cannot know what happened meanwhile. The bound: the program is dead at most
`fence_seconds` and one tick (0.1 s) after the start of the last ask Slurm answered
"running", which is before Slurm ended the job; the product, which sees that end later,
reuses the GPUs only `fence_seconds` plus its kill margin after it saw it. Not covered:
a watchdog frozen while the program runs (a node frozen whole, then thawed after the
product's deadline), and a process of the program that left its group (setsid).

One attempt at a time on the checkpoint. Before it starts the program the launcher
takes an exclusive flock on the job's lock file (the spec's `lock`: the job area's
`lock`, the one every executor's run takes), and the program inherits it: the lock
is held until the launcher *and* every process of the program are gone, whatever Slurm
or the product believe (a program that outlived its node's slurmd, or its
launcher killed alone). An attempt that finds it held waits up to the spec's
`lock_wait` seconds (an older attempt being stopped ends within its grace), then gives
up without running anything: it writes `{"checkpoint_busy": ...}` to the spec's
`launcher` file and exits BUSY_EXIT, which the product records as a lost run
(`checkpoint_busy`, requeued by the retry rules). A notice while it waits ends it at
once, the program never started.

Standard library only: it runs under the node's system Python (3.11 or later), before
anything of the product is on its path.
"""

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

ALLOCATION = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
# The launcher's exit when the checkpoint stayed held by an older attempt (EX_TEMPFAIL);
# the `launcher` file says so (scheduler.executors.slurm.services reads both).
BUSY_EXIT = 75
LOCK_POLL_SECONDS = 0.1
# How often the launcher looks at its program and says it is alive to its watchdog.
TICK_SECONDS = 0.1
KEEPALIVE_SECONDS = 1.0
# What goes on the watchdog's pipes: the program's group ("P<pgid>\n"), a keepalive,
# "done" (the program is gone: exit without killing); back: "fenced".
KEEPALIVE, DONE, FENCED = b".", b"D", b"F"
# Slurm job states (scontrol's JobState) in which the job still holds its allocation.
HOLDING_STATES = frozenset(
    {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "CONFIGURING", "RESIZING"}
)
GROUP_GONE_WAIT = 5.0
# The launcher's last line on the job's output: "slurm_launch: the program ended at
# <epoch seconds> (exit status N | killed by signal N)".
ENDED = "slurm_launch: the program ended at "


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def read_grace(path: str | None) -> float | None:
    """What is left of the grace, from the notice file the product wrote; None if none."""
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        seconds = float(json.loads(os.read(fd, 4096))["grace_seconds"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    finally:
        os.close(fd)
    return max(0.0, seconds) if seconds == seconds else None  # not NaN


def write_launcher(path: str | None, **fields) -> None:
    """The `launcher` file, whole or not at all: a temporary file beside it (created,
    never followed) renamed over it."""
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(fields, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)


def exit_record(
    path: str | None, status: int | None, *, fenced: bool, at: float | None = None
) -> None:
    """How the program ended (its exit status, or -signal; None: killed, not seen)."""
    write_launcher(
        path,
        ended_at=round(time.time() if at is None else at, 3),
        exit_status=status if status is not None and status >= 0 else None,
        signal=9 if status is None else (-status if status < 0 else None),
        fenced=fenced,
    )


def said_ended(path: str | None) -> bool:
    """The `launcher` file already holds an exit record."""
    if not path:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return "ended_at" in json.loads(os.read(fd, 4096))
    except (OSError, ValueError, TypeError):
        return False
    finally:
        os.close(fd)


def group_alive(pgid: int) -> bool:
    """Some process of the group still runs (a zombie holds nothing: not counted)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def kill_group(pgid: int) -> None:
    """SIGKILL the group and wait (bounded) until none of it runs."""
    signal_group(pgid, signal.SIGKILL)
    give_up = time.monotonic() + GROUP_GONE_WAIT
    while group_alive(pgid) and time.monotonic() < give_up:
        signal_group(pgid, signal.SIGKILL)
        time.sleep(0.02)


@dataclass(frozen=True)
class Fence:
    """How the watchdog confirms the job: every `interval` s, each ask at most `timeout`."""

    seconds: float
    argv: tuple[str, ...]
    env: dict

    @property
    def interval(self) -> float:
        return max(0.5, min(5.0, self.seconds / 4))

    @property
    def timeout(self) -> float:
        return max(1.0, min(10.0, self.seconds / 2))


def fence_of(spec: dict) -> Fence | None:
    """The spec's fence; None without `fence_seconds` or outside a Slurm job."""
    seconds = float(spec.get("fence_seconds") or 0)
    job_id = os.environ.get("SLURM_JOB_ID", "")
    if not seconds > 0 or not job_id.isdigit():
        return None
    env = {"PATH": os.environ.get("PATH") or "/usr/bin:/bin", "LANG": "C.UTF-8"}
    # The product's paths where this node has them; else the node's own.
    conf = str(spec.get("slurm_conf") or "")
    conf = conf if conf and os.path.exists(conf) else os.environ.get("SLURM_CONF", "")
    if conf:
        env["SLURM_CONF"] = conf
    scontrol = str(spec.get("scontrol") or "")
    scontrol = scontrol if scontrol and os.access(scontrol, os.X_OK) else "scontrol"
    return Fence(seconds, (scontrol, "--oneliner", "show", "job", job_id), env)


def job_state(text: str) -> str:
    for word in text.split():
        key, _, value = word.partition("=")
        if key == "JobState":
            return value
    return ""


class Watchdog:
    """The forked watchdog: confirms the job with Slurm, hears the launcher, fences."""

    def __init__(self, fence: Fence, keep: int, report: int, launcher: int, record: str | None):
        self.fence, self.keep, self.report = fence, keep, report
        self.launcher, self.record = launcher, record
        self.pgid: int | None = None
        self.buffer = b""
        self.probe: subprocess.Popen | None = None
        now = time.monotonic()
        self.last_keep = self.last_confirm = self.next_ask = self.asked = now

    def run(self) -> int:
        while True:
            now = time.monotonic()
            heard = self.hear()
            if heard == "done" or (heard == "gone" and self.pgid is None):
                return 0
            if heard == "gone":
                return self.fenced("the launcher ended without its program's end")
            why = self.ask(now) or self.overdue(now)
            if why:
                return self.fenced(why)
            time.sleep(TICK_SECONDS)

    def hear(self) -> str:
        try:
            data = os.read(self.keep, 4096)
        except BlockingIOError:
            return ""
        except OSError:
            return "gone"
        if not data:
            return "gone"
        self.last_keep = time.monotonic()
        self.buffer += data
        if DONE in data:
            return "done"
        if self.pgid is None and b"\n" in self.buffer:
            line = self.buffer.split(b"\n", 1)[0]
            self.pgid = int(line.lstrip(KEEPALIVE)[1:])
        return ""

    def ask(self, now: float) -> str:
        """Start an ask, or read its answer: why to fence, or ""."""
        if self.probe is None:
            if now >= self.next_ask:
                try:
                    self.probe = subprocess.Popen(
                        self.fence.argv,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        env=self.fence.env,
                    )
                except OSError as error:  # no scontrol here: it fences, and says why
                    print(f"slurm_launch: cannot ask Slurm: {error}", file=sys.stderr, flush=True)
                    self.next_ask = now + self.fence.interval
                    return ""
                self.asked = now
            return ""
        if self.probe.poll() is None:
            if now - self.asked > self.fence.timeout:
                self.stop_probe()
                self.next_ask = now
            return ""
        out, err = self.probe.communicate()
        answered = self.probe.returncode == 0
        self.probe = None
        self.next_ask = self.asked + self.fence.interval
        state = job_state(out.decode(errors="replace")) if answered else ""
        if state in HOLDING_STATES:
            self.last_confirm = max(self.last_confirm, self.asked)
            return ""
        if state:
            return f"Slurm says the job is {state}"
        if b"Invalid job id" in err:
            return "Slurm no longer knows the job"
        return ""

    def overdue(self, now: float) -> str:
        if now - self.last_confirm >= self.fence.seconds:
            return f"Slurm did not confirm the job for {self.fence.seconds:g} s"
        if now - self.last_keep >= self.fence.seconds:
            return f"the launcher did not answer for {self.fence.seconds:g} s"
        return ""

    def stop_probe(self) -> None:
        if self.probe is not None:
            with contextlib.suppress(OSError):
                self.probe.kill()
            self.probe.wait()
            self.probe = None

    def fenced(self, why: str) -> int:
        """Say so to the launcher, kill the program's group (or, before it has one, the
        launcher: it must never start it), and write the exit record once it is gone."""
        print(f"slurm_launch: fenced: {why}; killing the program", file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            os.write(self.report, FENCED)
        self.stop_probe()
        if self.pgid is None:
            with contextlib.suppress(OSError):
                os.kill(self.launcher, signal.SIGKILL)
            return 0
        kill_group(self.pgid)
        if not said_ended(self.record):
            exit_record(self.record, None, fenced=True)
        return 0


@dataclass
class Guard:
    """The launcher's side of its watchdog: the keepalive, and what it said."""

    pid: int
    keep: int
    report: int
    last: float = 0.0
    fenced: bool = False
    alive: bool = True

    def tell(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.keep, data)

    def heard_fenced(self) -> bool:
        with contextlib.suppress(OSError):
            if FENCED in os.read(self.report, 64):
                self.fenced = True
        return self.fenced

    def tick(self, pgid: int) -> None:
        now = time.monotonic()
        if now - self.last >= KEEPALIVE_SECONDS:
            self.tell(KEEPALIVE)
            self.last = now
        if not self.alive:
            return
        try:
            gone = os.waitpid(self.pid, os.WNOHANG)[0] == self.pid
        except ChildProcessError:
            gone = True
        if gone:
            self.alive = False
            if not self.heard_fenced():  # nothing fences it any more: stop it now
                print("slurm_launch: the watchdog died; killing the program", file=sys.stderr)
                self.fenced = True
                signal_group(pgid, signal.SIGKILL)

    def finish(self) -> None:
        self.tell(DONE)
        os.close(self.keep)
        os.close(self.report)


def start_watchdog(fence: Fence, record: str | None, lock_fd: int | None) -> Guard:
    keep_r, keep_w = os.pipe()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the watchdog
        code = 1
        try:
            os.close(keep_w)
            os.close(report_r)
            if lock_fd is not None:
                os.close(lock_fd)  # the launcher's (and the program's) only
            signal.setitimer(signal.ITIMER_REAL, 0)
            for signum in (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_IGN)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            os.setpgid(0, 0)
            os.set_blocking(keep_r, False)
            code = Watchdog(fence, keep_r, report_w, os.getppid(), record).run()
        except BaseException as error:  # noqa: BLE001 - the launcher sees it die
            print(f"slurm_launch: watchdog: {error!r}", file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    os.close(keep_r)
    os.close(report_w)
    os.set_blocking(keep_w, False)
    os.set_blocking(report_r, False)
    return Guard(pid, keep_w, report_r)


def wait_program(program: subprocess.Popen, guard: Guard | None) -> int:
    """The program's first process exited: its status (-N: killed by signal N), seen
    without reaping it; meanwhile the watchdog hears the launcher is alive."""
    while True:
        info = os.waitid(os.P_PID, program.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None and info.si_pid == program.pid:
            break
        if guard is not None:
            guard.tick(program.pid)
        time.sleep(TICK_SECONDS)
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def lock_checkpoint(path: str | None, wait: float, noticed: list[int]) -> tuple[int | None, bool]:
    """(fd holding the job's lock, True), or (None, False) if it stayed held for `wait`
    seconds or a notice came meanwhile; (None, True) when the spec names no lock."""
    if not path:
        return None, True
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    give_up = time.monotonic() + wait
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if said:
                print("slurm_launch: the previous attempt is gone", file=sys.stderr, flush=True)
            return fd, True
        except BlockingIOError:
            pass
        if not said:
            print(
                "slurm_launch: a previous attempt of this job still holds its checkpoint; "
                f"waiting up to {wait:g} s",
                file=sys.stderr,
                flush=True,
            )
            said = True
        if noticed or time.monotonic() >= give_up:
            os.close(fd)
            return None, False
        time.sleep(LOCK_POLL_SECONDS)


def program_environment(spec: dict) -> dict[str, str]:
    """The spec's environment, and what Slurm says of the allocation."""
    env = {str(key): str(value) for key, value in spec["environment"].items()}
    for key, value in os.environ.items():
        if key.startswith("SLURM_") or key in ALLOCATION:
            env[key] = value
    return env


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: slurm_launch.py SPEC", file=sys.stderr)
        return 2
    with open(argv[1]) as handle:
        spec = json.load(handle)
    command = [str(arg) for arg in spec["argv"]]
    env = program_environment(spec)
    os.chdir(spec["workdir"])
    os.umask(0o077)
    notice = spec.get("notice")
    # Handlers, not SIG_IGN: the program starts with every signal at its default. A
    # SIGTERM that comes before the program exists is passed on once it does; the grace
    # runs from the first SIGTERM, whenever it came.
    program: subprocess.Popen | None = None
    noticed: list[int] = []
    killed: list[int] = []

    def kill(signum=None, frame=None) -> None:
        killed.append(signal.SIGKILL)
        if program is not None:
            signal_group(program.pid, signal.SIGKILL)

    def on_term(signum, frame) -> None:
        if not noticed:
            grace = read_grace(notice)
            if grace is not None:
                signal.setitimer(signal.ITIMER_REAL, max(grace, 0.001))
        noticed.append(signum)
        if program is not None:
            signal_group(program.pid, signum)

    signal.signal(signal.SIGALRM, kill)
    signal.signal(signal.SIGUSR2, kill)
    signal.signal(signal.SIGTERM, on_term)
    lock_fd, locked = lock_checkpoint(spec.get("lock"), float(spec.get("lock_wait") or 0), noticed)
    if not locked:
        return not_run(spec, noticed=bool(noticed))
    fence = fence_of(spec)
    guard = None if fence is None else start_watchdog(fence, spec.get("launcher"), lock_fd)
    try:
        pass_fds = () if lock_fd is None else (lock_fd,)
        program = subprocess.Popen(command, env=env, process_group=0, pass_fds=pass_fds)
    except OSError as error:
        print(f"slurm_launch: cannot run {command[0]}: {error}", file=sys.stderr, flush=True)
        if guard is not None:
            guard.finish()
        return 127
    if guard is not None:
        guard.tell(b"P%d\n" % program.pid)
    if killed:
        signal_group(program.pid, signal.SIGKILL)
    elif noticed:
        signal_group(program.pid, signal.SIGTERM)
    return ended(program, guard, spec.get("launcher"))


def ended(program: subprocess.Popen, guard: Guard | None, record: str | None) -> int:
    """Wait for the program's end; kill what is left of its group, write the exit
    record, then reap it and end as it did."""
    status = wait_program(program, guard)
    at = time.time()
    signal.setitimer(signal.ITIMER_REAL, 0)
    kill_group(program.pid)
    fenced = guard is not None and guard.heard_fenced()
    exit_record(record, status, fenced=fenced, at=at)
    if guard is not None:
        guard.finish()
    program.wait()
    # On the job's output, where its own lines are: when and how the program ended (a
    # program killed at its grace cannot say so itself).
    how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
    print(f"{ENDED}{at:.3f} ({how}){'; fenced' if fenced else ''}", file=sys.stderr, flush=True)
    return end_as(status)


def end_as(status: int) -> int:
    """End the way the program did: its exit status, or killed by the same signal."""
    if status < 0:
        if -status != signal.SIGKILL:
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status  # a signal whose default is not to end a process
    return status


def not_run(spec: dict, *, noticed: bool) -> int:
    """The program was never started: notice came first (the launcher ends as SIGTERM
    ends it), or an older attempt kept the checkpoint (BUSY_EXIT, and says so)."""
    if noticed:
        print("slurm_launch: notice before the program started", file=sys.stderr, flush=True)
        return end_as(-signal.SIGTERM)
    write_launcher(spec.get("launcher"), checkpoint_busy=time.time())
    print(
        "slurm_launch: the checkpoint is still held by a previous attempt of this job; "
        "this attempt gives up without running (checkpoint_busy)",
        file=sys.stderr,
        flush=True,
    )
    return BUSY_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv))
