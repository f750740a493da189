"""Benchmark: `python -m engine.bench [--quick]`.

Prints, in order:

1. the whole Philly trace replayed (all shares LEND_AND_BORROW, limits scaled by 0.2,
   checkpoints every 30 minutes, in-share preemption on, priorities from seed 1 so both
   reclaims and in-share preemptions occur): wall time of each stage, events per second,
   reclaims and in-share preemptions, peak resident memory with the output included;
2. the command line on the same scenario, `python -m engine simulate FILE > OUT` in a
   subprocess: its wall time (start-up, reading, validating, simulating, writing) next
   to the in-process `simulate()` of step 1, and their ratio against the target of at
   most 2.5x; its output must be byte-identical to `dump_result`'s;
3. the time of one pass with 1k, 10k and 100k jobs pending, and the 100k/1k ratio;
4. a bare heapq loop pushing and popping as many events as the replay produced, and
   the engine's time per event as a multiple of it.

`--quick` replays two weeks of the trace and skips the 100k pass size; `--save DIR`
writes the replay's result document there (its sha256 is printed either way), so runs
can be compared byte for byte. The policy-action benchmark is `bench_policy`.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from . import cli
from .quota import Policy
from .results import dump_result
from .scheduling import Board, Job, run_passes
from .simulator import simulate
from .trace import TraceOptions, build_scenario, read_trace, read_vc_sizes
from .types import QueueSpec, ShareSpec
from .validation import load_scenario

SCALE = 0.2
SEED = 1
CHECKPOINT_INTERVAL = 1800
# The command line's wall time at most this multiple of the in-process simulate().
COMMAND_LINE_TARGET = 2.5
ROOT = Path(__file__).resolve().parents[1]


def _replay(quick: bool, save: Path | None) -> tuple[float, float, int, dict, str]:
    """Replay the trace, print its figures; return (simulation seconds, its CPU seconds,
    events, the scenario document, the result document as dump_result writes it)."""
    started = time.perf_counter()
    rows = read_trace()
    options = TraceOptions(
        scale=SCALE,
        seed=SEED,
        in_share_preemption=True,
        checkpoint_interval=CHECKPOINT_INTERVAL,
        start=datetime(2017, 10, 16) if quick else None,
        days=14 if quick else None,
    )
    document = build_scenario(rows, read_vc_sizes(), options)
    converted = time.perf_counter()
    scenario = load_scenario(document)
    loaded = time.perf_counter()
    cpu = time.process_time()
    result = simulate(scenario)
    simulated = time.perf_counter()
    cpu = time.process_time() - cpu
    output = dump_result(result)
    dumped = time.perf_counter()

    events = len(result.events)
    reclaims = sum(1 for e in result.events if e.type == "PREEMPTED" and e.cause == "reclaim")
    in_share = sum(1 for e in result.events if e.type == "PREEMPTED" and e.cause == "priority")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    window = "two weeks from 2017-10-16" if quick else "whole trace"
    print(f"== Philly replay ({window}): {len(scenario.jobs):,} jobs, scale {SCALE}, seed {SEED}")
    print(f"   capacity {dict(scenario.queue.capacity)}, {len(scenario.shares)} shares")
    print(f"   convert trace      {converted - started:7.2f} s")
    print(f"   validate document  {loaded - converted:7.2f} s")
    print(f"   simulate           {simulated - loaded:7.2f} s  (CPU {cpu:.2f} s)")
    print(f"   write result JSON  {dumped - simulated:7.2f} s  ({len(output) / 2**20:.1f} MiB)")
    print(f"   total wall time    {dumped - started:7.2f} s")
    print(f"   events             {events:,}  ({events / (simulated - loaded):,.0f} per second)")
    print(f"   reclaims           {reclaims:,}")
    print(f"   in-share preempts  {in_share:,}")
    print(f"   peak RSS           {peak_mib:,.0f} MiB (output included)")
    print(f"   result sha256      {hashlib.sha256(output.encode()).hexdigest()[:16]}")
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        (save / ("philly-quick.json" if quick else "philly.json")).write_text(output)
    return simulated - loaded, cpu, events, document, output


def _command_line(document: dict, seconds: float, cpu: float, output: str, quick: bool) -> None:
    """Run `python -m engine simulate` on the replayed scenario; compare with `simulate()`."""
    reader = f"orjson {cli.orjson.__version__}" if cli.orjson else "json (orjson not installed)"
    window = "two weeks" if quick else "whole trace"
    print(f"== command line: python -m engine simulate FILE > OUT ({window}, JSON by {reader})")
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as folder:
        source, target = Path(folder) / "scenario.json", Path(folder) / "result.json"
        source.write_text(json.dumps(document))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        with target.open("wb") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "engine", "simulate", str(source)],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"python -m engine simulate exited {proc.returncode}: {proc.stderr}")
        identical = target.read_bytes() == (output + "\n").encode()
        size = target.stat().st_size
    child_cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    ratio = wall / seconds
    verdict = "met" if ratio <= COMMAND_LINE_TARGET else "MISSED"
    print(
        f"   command wall time  {wall:7.2f} s  (CPU {child_cpu:.2f} s, {size / 2**20:.1f} MiB out)"
    )
    print(f"   simulate() above   {seconds:7.2f} s  (CPU {cpu:.2f} s)")
    print(
        f"   ratio              {ratio:7.2f}x (target at most {COMMAND_LINE_TARGET}x: {verdict}; "
        f"CPU {child_cpu / cpu:.2f}x)"
    )
    print(f"   output             {'identical to' if identical else 'DIFFERS FROM'} dump_result")
    if not identical:
        raise RuntimeError("python -m engine simulate printed other bytes than dump_result")


def _blocked_board(pending: int) -> Board:
    """A full queue: 4 shares, every instance busy, `pending` jobs waiting behind heads
    that cannot start and have no lower-priority victims, so each pass evaluates every
    phase and changes nothing."""
    shares = [
        ShareSpec(f"s{i}", {"gpu": 100}, "LEND_AND_BORROW", in_share_preemption=True)
        for i in range(4)
    ]
    board = Board(Policy(QueueSpec({"gpu": 400}), shares))
    out: list = []
    for number in range(400):
        job = Job(id=f"r{number}", share=number % 4, priority=5, itype="gpu", n=1, submitted_at=0)
        board.enqueue(job)
    run_passes(board, 0, out)
    for number in range(pending):
        job = Job(
            id=f"p{number:06d}",
            share=number % 4,
            priority=number % 5,
            itype="gpu",
            n=1 + number % 3,
            submitted_at=1 + number,
        )
        board.enqueue(job)
    return board


def _pass_times(sizes: list[int]) -> None:
    print("== one pass by number of pending jobs (best of 5 batches of 1,000 passes)")
    figures = {}
    for size in sizes:
        board = _blocked_board(size)
        out: list = []
        batches = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(1000):
                # As if something had reached every head: a full pass, not a skipped one.
                board.invalidate()
                run_passes(board, 2, out)
            batches.append((time.perf_counter() - started) / 1000)
        if out:
            raise RuntimeError("the benchmark board must be at a fixed point")
        idle = figures[size] = min(batches)
        print(f"   {size:>7,} pending: {idle * 1e6:7.1f} us per pass")
    smallest, largest = min(figures), max(figures)
    print(f"   ratio {largest:,} / {smallest:,}: {figures[largest] / figures[smallest]:.2f}")


def _heapq_multiple(events: int, engine_seconds: float) -> None:
    runs = []
    for _ in range(3):
        heap: list[tuple[int, int]] = []
        started = time.perf_counter()
        for seq in range(events):
            heapq.heappush(heap, ((seq * 7919) % 100_003, seq))
        while heap:
            heapq.heappop(heap)
        runs.append(time.perf_counter() - started)
    bare = min(runs)
    print(
        f"== bare heapq push+pop of {events:,} events (best of 3): {bare:.3f} s "
        f"({bare / events * 1e9:.0f} ns each)"
    )
    print(
        f"   engine: {engine_seconds / events * 1e6:.2f} us per event = "
        f"{engine_seconds / bare:.0f}x the bare heapq loop"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two weeks, no 100k pass size")
    parser.add_argument("--save", type=Path, help="write the replay's result document into DIR")
    options = parser.parse_args(argv)
    seconds, cpu, events, document, output = _replay(options.quick, options.save)
    _command_line(document, seconds, cpu, output, options.quick)
    del document, output
    _pass_times([1_000, 10_000] if options.quick else [1_000, 10_000, 100_000])
    _heapq_multiple(events, seconds)


if __name__ == "__main__":
    main()
