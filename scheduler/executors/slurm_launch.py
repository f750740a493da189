#!/usr/bin/python3
"""The batch script of every run of the `slurm` executor (scheduler.executors.slurm).

    sbatch [options] slurm_launch.py SPEC

SPEC is the run's JSON spec: {"argv": [...], "environment": {...}, "workdir": "..."}.
This script replaces itself with the argument vector (no shell), in the working
directory, with umask 077 and exactly the spec's environment plus what Slurm says of
the allocation (`SLURM_*`, `CUDA_VISIBLE_DEVICES`, `GPU_DEVICE_ORDINAL`): nothing else
of the environment Slurm started it with. Standard library only: it runs under the
node's system Python, before anything of the product is on its path.
"""

import json
import os
import sys

ALLOCATION = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


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
    sys.stdout.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as error:
        print(f"slurm_launch: cannot run {command[0]}: {error}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
