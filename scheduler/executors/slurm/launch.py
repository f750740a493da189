#!/usr/bin/python3
"""The batch script of every run of the `slurm` executor (scheduler.executors.slurm).

    sbatch [options] launch.py SPEC

SPEC is the run's JSON spec: {"argv": [...], "environment": {...}, "workdir": "...",
"lock": ..., "lock_wait": s, "notice": ..., "launcher": ...} (the last four: paths in
the job's area, and seconds; a spec without them takes no lock and arms no timer).
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

ALLOCATION = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
# The launcher's exit when the checkpoint stayed held by an older attempt (EX_TEMPFAIL);
# the `launcher` file says so (scheduler.executors.slurm.services reads both).
BUSY_EXIT = 75
LOCK_POLL_SECONDS = 0.1
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
    if not path:
        return
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(fields, handle)


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


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: slurm_launch.py SPEC", file=sys.stderr)
        return 2
    with open(argv[1]) as handle:
        spec = json.load(handle)
    command = [str(arg) for arg in spec["argv"]]
    env = {str(key): str(value) for key, value in spec["environment"].items()}
    for key, value in os.environ.items():
        if key.startswith("SLURM_") or key in ALLOCATION:
            env[key] = value
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
    try:
        pass_fds = () if lock_fd is None else (lock_fd,)
        program = subprocess.Popen(command, env=env, process_group=0, pass_fds=pass_fds)
    except OSError as error:
        print(f"slurm_launch: cannot run {command[0]}: {error}", file=sys.stderr, flush=True)
        return 127
    if killed:
        signal_group(program.pid, signal.SIGKILL)
    elif noticed:
        signal_group(program.pid, signal.SIGTERM)
    status = program.wait()
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal_group(program.pid, signal.SIGKILL)
    # On the job's output, where its own lines are: when and how the program ended (a
    # program killed at its grace cannot say so itself).
    how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
    print(f"{ENDED}{time.time():.3f} ({how})", file=sys.stderr, flush=True)
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
