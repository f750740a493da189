"""Benchmark: `python -m engine.bench_policy [--save DIR]`.

Policy actions against a deep queue. 20,000 jobs (12 shares of all three strategies,
two instance types, 1 to 8 instances, priorities 0-9) are submitted in the first 200
seconds, far more than the queue runs at once, so some 20,000 stay pending while the
actions come: `update_share` (limits lowered and raised back, which makes the largest
jobs of LEND and RESERVE shares misconfigured and cures them) and `set_capacity`
(capacity lowered, which preempts, and raised back), alternating, one a minute from
t=1000. The same workload is replayed with 0, 250 and 500 actions; for each it prints
the simulate time (wall and CPU: the CPU figure holds on a busy machine), what the
actions add over none, per action, and the sha256 of the result document (`--save DIR`
also writes the documents, to compare runs byte for byte).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time
from pathlib import Path

from .results import dump_result
from .simulator import simulate
from .validation import load_scenario

PENDING = 20_000
ACTION_COUNTS = (0, 250, 500)
SEED = 7
CAPACITY = {"g": 96, "h": 32}
LOWER_CAPACITY = {"g": 88, "h": 30}
STRATEGIES = ("LEND_AND_BORROW", "LEND", "RESERVE")


def _shares() -> list[dict]:
    shares = []
    for index in range(12):
        strategy = STRATEGIES[index % 3]
        share = {
            "name": f"s{index:02d}",
            "capacity_limits": {"g": 8, "h": 2 + index % 2},
            "strategy": strategy,
            "in_share_preemption": index % 4 == 0,
        }
        if strategy == "LEND_AND_BORROW":
            share["borrow_limit"] = -1 if index % 2 else 100
        shares.append(share)
    return shares


def _actions(count: int, shares: list[dict]) -> list[dict]:
    actions = []
    for number in range(count):
        at = 1000 + 60 * number
        if number % 2:
            lower = number % 4 == 1
            actions.append(
                {
                    "at": at,
                    "type": "set_capacity",
                    "capacity": LOWER_CAPACITY if lower else CAPACITY,
                }
            )
            continue
        share = shares[(number // 2) % len(shares)]
        lowered = (number // (2 * len(shares))) % 2 == 0
        base = share["capacity_limits"]
        limits = {"g": 4, "h": 1} if lowered else {"g": base["g"] + 2, "h": base["h"] + 1}
        actions.append(
            {"at": at, "type": "update_share", "share": share["name"], "capacity_limits": limits}
        )
    return actions


def build_scenario(actions: int) -> dict:
    rng = random.Random(SEED)
    shares = _shares()
    jobs = []
    for number in range(PENDING):
        jobs.append(
            {
                "id": f"j{number:05d}",
                "share": shares[rng.randrange(len(shares))]["name"],
                "priority": rng.randrange(10),
                "instance_type": "g" if rng.random() < 0.75 else "h",
                "instances": rng.choice((1, 1, 1, 2, 2, 4, 8)),
                "submit_at": number * 200 // PENDING,
                "duration": rng.randrange(600, 7200),
                "checkpoint_interval": 900,
            }
        )
    return {
        "name": f"policy-actions-{actions}",
        "queue": {"capacity": dict(CAPACITY)},
        "shares": shares,
        "jobs": jobs,
        "actions": _actions(actions, shares),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="write each result document into DIR")
    options = parser.parse_args(argv)
    print(f"== policy actions with {PENDING:,} jobs pending (12 shares, seed {SEED})")
    baseline = None
    for count in ACTION_COUNTS:
        scenario = load_scenario(build_scenario(count))
        started, cpu = time.perf_counter(), time.process_time()
        result = simulate(scenario)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        output = dump_result(result)
        digest = hashlib.sha256(output.encode()).hexdigest()[:16]
        if options.save is not None:
            options.save.mkdir(parents=True, exist_ok=True)
            (options.save / f"policy-{count}.json").write_text(output)
        line = f"   {count:>3} actions: simulate {seconds:6.2f} s (CPU {cpu:6.2f} s)"
        if baseline is None:
            baseline = (seconds, cpu)
        else:
            added, added_cpu = seconds - baseline[0], cpu - baseline[1]
            line += (
                f", actions add {added:6.2f} s (CPU {added_cpu:6.2f} s, "
                f"{added_cpu / count * 1e3:5.2f} ms each)"
            )
        print(f"{line}  result {digest}")


if __name__ == "__main__":
    main()
