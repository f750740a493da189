"""Benchmark of a what-if comparison on 30 days of the Philly trace (target: under 15 s).

    python manage.py bench_whatif [--start 2017-10-01] [--days 30] [--repeat 3]

The fleet is the trace's own: one share per virtual cluster (limits from the VC sizes,
one GPU per instance, LEND_AND_BORROW with unlimited borrowing: the current policy).
The draft caps borrowing at 50% of each share's limit and makes the largest VC a
RESERVE share. One comparison is what the Celery task does between its row updates:
build the workload from the trace window, replay it under both policies, measure both,
write the sentences, serialise the results as stored, and build the page's tables and
charts. Needs no database. Prints each run and the slowest.

    python manage.py bench_whatif --grace 120 [--checkpoint-on-notice 60] [--min-runtime 0]
        [--fleet-scale 0.3]

compares contracts instead (issue 24): the current policy in both runs, every job with
grace 0 and no minimum runtime in the first, the given contract in the second, and
prints lost GPU-hours, lender wait and time to reclaim of both.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import time

from django.core.management.base import BaseCommand

from engine.trace import TraceOptions, build_scenario, read_vc_sizes
from governance.models import WhatIfComparison
from governance.whatif import workloads
from governance.whatif.compare import compare_policies
from governance.whatif.selectors import results_view

TARGET_SECONDS = 15.0


def trace_policy(scale: float = 1.0) -> dict:
    """The Philly fleet as a policy document (shares of the trace's scenario), its
    limits and capacity times `scale` (a smaller fleet: contention, hence reclaims)."""
    scenario = build_scenario([], read_vc_sizes(), TraceOptions(scale=scale))
    return {"queue": scenario["queue"], "shares": scenario["shares"]}


def draft_of(policy: dict) -> dict:
    draft = copy.deepcopy(policy)
    largest = max(draft["shares"], key=lambda share: sum(share["capacity_limits"].values()))
    for share in draft["shares"]:
        if share is largest:
            share["strategy"] = "RESERVE"
            share.pop("borrow_limit", None)
        else:
            share["borrow_limit"] = 50
    return draft


class Command(BaseCommand):
    help = "Time one what-if comparison on a window of the Philly trace."

    def add_arguments(self, parser):
        parser.add_argument("--start", default=workloads.PHILLY_DEFAULT_START.isoformat())
        parser.add_argument("--days", type=float, default=workloads.DEFAULT_DAYS)
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--grace", type=int, help="compare contracts: grace 0 against this")
        parser.add_argument("--checkpoint-on-notice", type=int, default=None)
        parser.add_argument("--min-runtime", type=int, default=0, help="min runtime (reclaim)")
        parser.add_argument("--fleet-scale", type=float, default=1.0, help="fleet size factor")

    def handle(self, *args, start: str, days: float, repeat: int, **options):
        policy = trace_policy(options.get("fleet_scale") or 1.0)
        draft = draft_of(policy)
        contracts = None
        if options.get("grace") is not None:
            draft = policy
            variant = {"grace": options["grace"], "min_runtime_reclaim": options["min_runtime"]}
            if options.get("checkpoint_on_notice"):
                variant["checkpoint_on_notice"] = options["checkpoint_on_notice"]
            names = [share["name"] for share in policy["shares"]]
            contracts = {
                "current": {name: {"grace": 0} for name in names},
                "draft": {name: dict(variant) for name in names},
            }
        gpus = {itype: 1 for itype in policy["queue"]["capacity"]}
        timings = []
        for run in range(1, repeat + 1):
            began = time.perf_counter()
            workload = workloads.philly_workload(
                policy=policy,
                gpus_per_instance=gpus,
                start=dt.date.fromisoformat(start),
                days=days,
            )
            results = compare_policies(
                current=policy,
                draft=draft,
                jobs=workload.jobs,
                gpus_per_instance=gpus,
                contracts=contracts,
            )
            stored = json.loads(json.dumps(results))
            results_view(WhatIfComparison(results=stored))
            elapsed = time.perf_counter() - began
            timings.append(elapsed)
            self.stdout.write(
                f"run {run}: {elapsed:.2f} s ({len(workload.jobs):,} jobs, "
                f"{len(policy['shares'])} shares, both policies replayed and measured)"
            )
        slowest = max(timings)
        verdict = "within" if slowest < TARGET_SECONDS else "OVER"
        self.stdout.write(
            f"what-if on {days:g} days of the Philly trace from {start}: slowest "
            f"{slowest:.2f} s, fastest {min(timings):.2f} s ({verdict} the "
            f"{TARGET_SECONDS:g} s target)"
        )
        if contracts is not None:
            self._contracts(results, contracts)
        self.stdout.write("sentences of the last run:")
        for line in results["sentences"][:8]:
            self.stdout.write(f"  {line}")

    def _contracts(self, results: dict, contracts: dict) -> None:
        self.stdout.write("contracts: lost GPU-hours against lender wait and time to reclaim")
        for run in ("current", "draft"):
            figures = results[run]["interruptions"]
            ttr = figures["time_to_reclaim"]
            contract = next(iter(contracts[run].values()))
            self.stdout.write(
                f"  {run} {contract}: lost {figures['lost_gpu_seconds'] / 3600:,.2f} GPU-h, "
                f"lender wait {figures['lender_wait_gpu_seconds'] / 3600:,.2f} GPU-h, "
                f"time to reclaim n={ttr['n']} p50={ttr['p50']} s p90={ttr['p90']} s "
                f"max={ttr['max']} s, stops {figures['stops']}, "
                f"preemptions avoided {figures['protected_blocks']}"
            )
