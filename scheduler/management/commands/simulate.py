"""`manage.py simulate FILE`: replay a scenario and print the result document.

A thin wrapper: reading, validating and simulating live in `scheduler.engine`. Any
unusable input (missing file, bad JSON, a document breaking the format) exits with
status 2 and a message naming the problem on stderr.
"""

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from scheduler.engine import ScenarioError, dump_result, load_scenario, simulate
from scheduler.engine.results import format_summary


def read_document(path: str):
    """The JSON document at `path` (`-` = stdin); CommandError (exit 2) if unusable."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as exc:
        raise CommandError(f"{path}: cannot read: {exc.strerror}", returncode=2) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            returncode=2,
        ) from exc


class Command(BaseCommand):
    help = "Replay a scenario document and print the result JSON (see the scenario format)."

    def add_arguments(self, parser):
        parser.add_argument("file", help="scenario JSON file, or - for stdin")
        parser.add_argument("--pretty", action="store_true", help="indent the JSON")
        parser.add_argument(
            "--summary",
            action="store_true",
            help="print a table per share instead of the JSON",
        )

    def handle(self, *args, **options):
        document = read_document(options["file"])
        try:
            scenario = load_scenario(document)
        except ScenarioError as exc:
            raise CommandError(
                "\n".join(str(problem) for problem in exc.problems), returncode=2
            ) from exc
        result = simulate(scenario)
        if options["summary"]:
            self.stdout.write(format_summary(result))
        else:
            self.stdout.write(dump_result(result, pretty=options["pretty"]))
