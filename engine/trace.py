"""Philly trace (Pollux extract) -> scenario document.

Mapping (documented in every scenario it writes):

- one share per virtual cluster (VC), in the order of `philly_vc.csv`, with a limit of
  `nodes x 8` GPUs, divided by `gpus_per_instance` and multiplied by `scale` (floored,
  never below 1); the four tiny VCs without a size are folded into one share `other`
  with a limit of one node (8 GPUs, scaled the same way, never below 1);
- one instance type (`gpu`, or `gpu-x{G}` when an instance is G GPUs); the queue's
  capacity is the sum of the limits;
- one job per row, sorted by timestamp then by row position in the file (a stable
  tie-break); id `j{position in that order}`; `submit_at` in seconds from the first job
  of the window (or from `start`); `instances = ceil(num_gpus / G)`; `duration` rounded
  up to a whole second (at least 1);
- the trace has no priority, checkpoint interval or restart overhead: priorities are 0,
  or, with a seed, drawn from `random.Random(seed)` in job order: 0, 1 or 2 with
  probability 60 / 30 / 10 %; checkpoint interval and restart overhead are the same
  for every job when given.

Jobs too large for the policy are kept: the engine reports them as misconfigured.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from .strategies import strategy_capabilities

DATA_DIR = Path(__file__).resolve().parent / "data" / "traces"
DEFAULT_TRACE = DATA_DIR / "philly.csv.gz"
DEFAULT_VC_SIZES = DATA_DIR / "philly_vc.csv"
GPUS_PER_NODE = 8
OTHER_SHARE = "other"
OTHER_NODES = 1
PRIORITIES = (0, 1, 2)
PRIORITY_WEIGHTS = (6, 3, 1)
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
ATTRIBUTION = (
    "Contains data derived from the Microsoft Philly trace (Jeon et al., USENIX ATC '19), "
    "licensed under CC BY 4.0, https://creativecommons.org/licenses/by/4.0/, as extracted "
    "by the Pollux authors (Qiao et al., OSDI '21). VC sizes from "
    "S-Lab-System-Group/HeliosArtifact (MIT)."
)


@dataclass(frozen=True)
class TraceRow:
    submitted: datetime
    duration: float
    gpus: int
    vc: str
    position: int


@dataclass(frozen=True, kw_only=True)
class TraceOptions:
    strategy: str = "LEND_AND_BORROW"
    borrow_limit: int = -1
    in_share_preemption: bool = False
    checkpoint_interval: int | None = None
    restart_overhead: int = 0
    scale: float = 1.0
    gpus_per_instance: int = 1
    seed: int | None = None
    days: float | None = None
    start: datetime | None = None
    name: str = "philly"


def read_trace(source: Path | str = DEFAULT_TRACE) -> list[TraceRow]:
    """Rows of a Philly-format CSV (gzipped if the name ends in .gz), in file order."""
    path = Path(source)
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    rows = []
    reader = csv.DictReader(io.StringIO(raw.decode("utf-8")))
    for position, record in enumerate(reader):
        if not record.get("timestamp"):
            continue  # the file ends with a blank line
        rows.append(
            TraceRow(
                submitted=datetime.strptime(record["timestamp"], TIMESTAMP_FORMAT),
                duration=float(record["duration"]),
                gpus=int(record["num_gpus"]),
                vc=record["cluster"],
                position=position,
            )
        )
    return rows


def read_vc_sizes(source: Path | str = DEFAULT_VC_SIZES) -> dict[str, int]:
    """VC -> node count, in file order."""
    with open(source, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        next(reader)
        return {vc: int(nodes) for vc, nodes, *_ in reader if vc}


def _limit(nodes: int, options: TraceOptions) -> int:
    instances = nodes * GPUS_PER_NODE // options.gpus_per_instance
    return max(1, math.floor(instances * options.scale))


def build_scenario(
    rows: Iterable[TraceRow], vc_sizes: dict[str, int], options: TraceOptions
) -> dict:
    """The scenario document for the rows in the options' window."""
    ordered = sorted(rows, key=lambda row: (row.submitted, row.position))
    if options.start is not None:
        ordered = [row for row in ordered if row.submitted >= options.start]
    origin = options.start or (ordered[0].submitted if ordered else None)
    if options.days is not None and origin is not None:
        end = origin + timedelta(days=options.days)
        ordered = [row for row in ordered if row.submitted < end]

    instance_type = "gpu" if options.gpus_per_instance == 1 else f"gpu-x{options.gpus_per_instance}"
    limits = {vc: _limit(nodes, options) for vc, nodes in vc_sizes.items()}
    if any(row.vc not in vc_sizes for row in ordered):
        limits[OTHER_SHARE] = _limit(OTHER_NODES, options)
    share_of = {vc: vc for vc in vc_sizes}

    rng = random.Random(options.seed) if options.seed is not None else None
    jobs = []
    for number, row in enumerate(ordered):
        job = {
            "id": f"j{number:05d}",
            "share": share_of.get(row.vc, OTHER_SHARE),
            "priority": (
                rng.choices(PRIORITIES, weights=PRIORITY_WEIGHTS)[0] if rng is not None else 0
            ),
            "instance_type": instance_type,
            "instances": math.ceil(row.gpus / options.gpus_per_instance),
            "submit_at": int((row.submitted - origin).total_seconds()),
            "duration": max(1, math.ceil(row.duration)),
            "restart_overhead": options.restart_overhead,
        }
        if options.checkpoint_interval is not None:
            job["checkpoint_interval"] = options.checkpoint_interval
        jobs.append(job)

    shares = []
    for name, limit in limits.items():
        share = {
            "name": name,
            "capacity_limits": {instance_type: limit},
            "strategy": options.strategy,
            "in_share_preemption": options.in_share_preemption,
            "state": "ENABLED",
        }
        if strategy_capabilities(options.strategy).takes_borrow_limit:
            share["borrow_limit"] = options.borrow_limit
        shares.append(share)

    window = f"from {origin:%Y-%m-%d %H:%M:%S}" if origin is not None else "(empty window)"
    if options.days is not None:
        window += f" for {options.days:g} days"
    description = (
        f"Philly trace {window}: {len(jobs)} jobs. One share per VC, limit nodes x 8 GPUs "
        f"/ {options.gpus_per_instance} per instance x scale {options.scale:g} (floor, "
        f"at least 1); VCs without a size folded into share '{OTHER_SHARE}' with "
        f"{OTHER_NODES} node. Capacity = sum of limits. Priorities: "
        + (
            f"seed {options.seed}, 0/1/2 with probability 60/30/10 %. "
            if options.seed is not None
            else "all 0. "
        )
        + ATTRIBUTION
    )
    return {
        "name": options.name,
        "description": description,
        "queue": {"capacity": {instance_type: sum(limits.values())}},
        "shares": shares,
        "jobs": jobs,
    }
