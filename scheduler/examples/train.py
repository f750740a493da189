"""An example training job for the `process` executor: checkpoints, and resumes.

It fits y = 3x + 2 by stochastic gradient descent, one step at a time. Every
`--checkpoint-every` steps it saves its step and weights to
`$JOB_CHECKPOINT_DIR/checkpoint.json`; when started again (a new `JOB_ATTEMPT` after
a preemption) it resumes from there, so only the steps since the last checkpoint are
done twice. It reports `{"progress": step, "checkpointed": saved_step}` after each
step in `$JOB_STATUS_FILE` (the runner gives each attempt its own; default
`$JOB_CHECKPOINT_DIR/status.json`), which the runner's heartbeat reads; one step is
one compute second of the job's expected duration. These are the variables the
runner sets for every job (`scheduler.executors.process.run`).

On SIGTERM (preemption) it stops after the current step without saving: the work
since the last checkpoint is lost, as the scheduler's work model says. With
`--checkpoint-on-sigterm` it saves that step first (within the definition's stop grace
period), so a run stopped by a deploy (the runner's SIGTERM, `runner_stopped`) resumes
where it was.

    JOB_CHECKPOINT_DIR=/tmp/ckpt python -m scheduler.examples.train --steps 60
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

stopping = False


def _on_sigterm(signum, frame):
    global stopping
    stopping = True


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # atomic: a reader never sees half a file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--step-seconds", type=float, default=1.0)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--fail-at", type=int, default=None, help="exit 3 at this step")
    parser.add_argument(
        "--checkpoint-on-sigterm",
        action="store_true",
        help="save a checkpoint of the current step before stopping on SIGTERM",
    )
    args = parser.parse_args(argv)
    directory = Path(os.environ.get("JOB_CHECKPOINT_DIR", "."))
    directory.mkdir(parents=True, exist_ok=True)
    checkpoint = directory / "checkpoint.json"
    status = Path(os.environ.get("JOB_STATUS_FILE") or directory / "status.json")
    signal.signal(signal.SIGTERM, _on_sigterm)

    step, weight, bias = 0, 0.0, 0.0
    if checkpoint.exists():
        saved = json.loads(checkpoint.read_text())
        step, weight, bias = saved["step"], saved["weight"], saved["bias"]
    saved_step = step
    print(f"attempt {os.environ.get('JOB_ATTEMPT', '?')}: starting at step {step}", flush=True)
    rng = random.Random(step)
    while step < args.steps:
        if stopping:
            if args.checkpoint_on_sigterm and step > saved_step:
                _write(checkpoint, {"step": step, "weight": weight, "bias": bias})
                saved_step = step
                _write(status, {"progress": step, "checkpointed": saved_step})
            print(f"SIGTERM at step {step}; last checkpoint {saved_step}", flush=True)
            return 128 + signal.SIGTERM
        x = rng.uniform(-1, 1)
        error = weight * x + bias - (3 * x + 2)
        weight -= 0.1 * error * x
        bias -= 0.1 * error
        time.sleep(args.step_seconds)
        step += 1
        if args.fail_at is not None and step == args.fail_at:
            return 3
        if step % args.checkpoint_every == 0 or step == args.steps:
            _write(checkpoint, {"step": step, "weight": weight, "bias": bias})
            saved_step = step
        _write(status, {"progress": step, "checkpointed": saved_step})
    print(f"done: weight={weight:.3f} bias={bias:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
