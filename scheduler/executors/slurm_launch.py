#!/usr/bin/python3
"""The batch script of every run of the `slurm` executor (scheduler.executors.slurm).

    sbatch [options] slurm_launch.py SPEC

SPEC is the run's JSON spec: {"argv": [...], "environment": {...}, "workdir": "..."}.
The launcher starts the argument vector (no shell) in a process group of its own, in
the working directory, with umask 077 and exactly the spec's environment plus what
Slurm says of the allocation (`SLURM_*`, `CUDA_VISIBLE_DEVICES`, `GPU_DEVICE_ORDINAL`):
nothing else of the environment Slurm started it with. It stays the program's parent:

- SIGTERM (the notice, `scancel --full --signal=TERM`) is passed on to the program's
  group (Slurm signals the launcher's own), and the launcher waits for the program to
  exit in its grace.
- SIGUSR2 (the end of the grace, `scancel --batch --signal=USR2`) sends SIGKILL to the
  program's whole group. Slurm's own SIGKILL (`scancel --full --signal=KILL`) would kill
  everything too, but then keeps the job COMPLETING for its `KillWait` (30 s by
  default) before it reports the end, and a batch script killed alone leaves its
  children behind with proctrack/linuxproc.
- When the program ends, what is left of its group is killed, and the launcher ends
  the way the program did: its exit status, or killed by the same signal, so Slurm's
  ExitCode is the program's.

Standard library only: it runs under the node's system Python (3.11 or later), before
anything of the product is on its path.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

ALLOCATION = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
# The launcher's last line on the job's output: "slurm_launch: the program ended at
# <epoch seconds> (exit status N | killed by signal N)".
ENDED = "slurm_launch: the program ended at "


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


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
    # Handlers, not SIG_IGN: the program starts with every signal at its default. A
    # SIGTERM that comes before the program exists is passed on once it does.
    early: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: early.append(signum))
    try:
        program = subprocess.Popen(command, env=env, process_group=0)
    except OSError as error:
        print(f"slurm_launch: cannot run {command[0]}: {error}", file=sys.stderr, flush=True)
        return 127
    signal.signal(signal.SIGTERM, lambda signum, frame: signal_group(program.pid, signum))
    signal.signal(signal.SIGUSR2, lambda signum, frame: signal_group(program.pid, signal.SIGKILL))
    if early:
        signal_group(program.pid, signal.SIGTERM)
    status = program.wait()
    signal_group(program.pid, signal.SIGKILL)
    # On the job's output, where its own lines are: when and how the program ended (a
    # program killed at its grace cannot say so itself).
    how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
    print(f"{ENDED}{time.time():.3f} ({how})", file=sys.stderr, flush=True)
    if status < 0:  # killed by a signal: end the same way
        if -status != signal.SIGKILL:
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status  # a signal whose default is not to end a process
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
