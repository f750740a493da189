"""`manage.py simulate FILE`: replay a scenario and print the result document.

A thin wrapper: parsing, validating and simulating live in `engine`. Any
unusable input (missing file, bad UTF-8 or JSON, a document breaking the format)
exits with status 2 and a message naming the problem on stderr. The bytes are read
as they are, from stdin too, so that their encoding is judged in one place.
"""

import sys

from django.core.management.base import BaseCommand, CommandError

from engine import ScenarioError, dump_result, load_scenario, parse_json, simulate
from engine.results import format_summary


def read_document(path: str):
    """The JSON document at `path` (`-` = stdin); CommandError (exit 2) if unusable."""
    try:
        if path == "-":
            # An in-process caller may swap in a text stream, with no bytes underneath.
            stream = getattr(sys.stdin, "buffer", sys.stdin)
            data = stream.read()
        else:
            with open(path, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise CommandError(f"{path}: cannot read: {exc.strerror}", returncode=2) from exc
    try:
        return parse_json(data)
    except ScenarioError as exc:
        raise CommandError(f"{path}: {exc.problems[0].message}", returncode=2) from exc


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
