"""`manage.py trace_to_scenario`: build a scenario from a trace in the Philly format.

The conversion lives in `engine.trace` (see its docstring for the mapping);
this command only parses options and writes the document.
"""

import json
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError

from engine import ScenarioError, load_scenario
from engine.strategies import STRATEGIES, spoken_list, strategies_that
from engine.trace import (
    DEFAULT_TRACE,
    DEFAULT_VC_SIZES,
    TraceOptions,
    build_scenario,
    read_trace,
    read_vc_sizes,
)


class Command(BaseCommand):
    help = "Convert a Philly-format job trace into a scenario document."

    def add_arguments(self, parser):
        parser.add_argument("--trace", default=str(DEFAULT_TRACE), help="trace CSV (.gz ok)")
        parser.add_argument("--vc-sizes", default=str(DEFAULT_VC_SIZES), help="VC sizes CSV")
        parser.add_argument(
            "--strategy",
            default=TraceOptions.strategy,
            choices=STRATEGIES,
        )
        parser.add_argument("--borrow-limit", type=int, default=None, help="percent; -1 = none")
        parser.add_argument("--in-share-preemption", action="store_true")
        parser.add_argument("--checkpoint-interval", type=int, default=None, help="seconds")
        parser.add_argument("--restart-overhead", type=int, default=0, help="seconds")
        parser.add_argument("--scale", type=float, default=1.0, help="factor for the limits")
        parser.add_argument("--gpus-per-instance", type=int, default=1)
        parser.add_argument("--seed", type=int, default=None, help="draw priorities from it")
        parser.add_argument("--days", type=float, default=None, help="length of the window")
        parser.add_argument("--start", default=None, help="window start, YYYY-MM-DD")
        parser.add_argument("--name", default="philly")
        parser.add_argument("-o", "--output", default=None, help="file to write (default stdout)")

    def handle(self, *args, **options):
        takes = strategies_that(takes_borrow_limit=True)
        if options["borrow_limit"] is not None and options["strategy"] not in takes:
            raise CommandError(
                f"--borrow-limit is only allowed with {spoken_list(takes)}", returncode=2
            )
        if options["scale"] <= 0 or options["gpus_per_instance"] < 1:
            raise CommandError("--scale must be above 0 and --gpus-per-instance at least 1")
        start = None
        if options["start"]:
            try:
                start = datetime.strptime(options["start"], "%Y-%m-%d")
            except ValueError as exc:
                raise CommandError("--start must be a date like 2017-10-16", returncode=2) from exc
        trace_options = TraceOptions(
            strategy=options["strategy"],
            borrow_limit=-1 if options["borrow_limit"] is None else options["borrow_limit"],
            in_share_preemption=options["in_share_preemption"],
            checkpoint_interval=options["checkpoint_interval"],
            restart_overhead=options["restart_overhead"],
            scale=options["scale"],
            gpus_per_instance=options["gpus_per_instance"],
            seed=options["seed"],
            days=options["days"],
            start=start,
            name=options["name"],
        )
        try:
            rows = read_trace(options["trace"])
            vc_sizes = read_vc_sizes(options["vc_sizes"])
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"cannot read the trace: {exc}", returncode=2) from exc
        document = build_scenario(rows, vc_sizes, trace_options)
        try:
            load_scenario(document)
        except ScenarioError as exc:
            raise CommandError(
                f"the options give an invalid scenario: {exc}", returncode=2
            ) from exc
        text = json.dumps(document, indent=1)
        if options["output"]:
            with open(options["output"], "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            self.stderr.write(f"wrote {len(document['jobs'])} jobs to {options['output']}")
        else:
            self.stdout.write(text)
