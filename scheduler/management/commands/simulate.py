"""`manage.py simulate FILE`: replay a scenario and print the result document.

A thin wrapper over `engine.cli.simulate_command`, which `python -m engine simulate`
runs too (without Django's start-up): reading, validating, simulating and writing live
there. Any unusable input (missing file, bad UTF-8 or JSON, a document breaking the
format) exits with status 2 and a message naming the problem on stderr.
"""

from django.core.management.base import BaseCommand, CommandError

from engine.cli import InputError, simulate_command


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
        try:
            output = simulate_command(
                options["file"], pretty=options["pretty"], summary=options["summary"]
            )
        except InputError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        # The output ends with its newline; an in-process caller may pass a text stream.
        self.stdout.write(output.decode(), ending="")
