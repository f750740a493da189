"""`manage.py load_history SCENARIO.json --queue NAME [--start ISO-DATETIME]`: load any
scenario in the `simulate` format into a queue's history, through the loader the demo
uses, so that anyone can recompute a month from `simulate`'s output and compare it
with the dashboard and the signals API.

Thin: reading the file is `simulate`'s (`engine.cli`), the rest is
demo.history.history_load. Unusable input exits with status 2
and a message naming the field.
"""

import datetime as dt

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from demo.history import HistoryLoadError, history_load
from engine.cli import InputError, read_input, read_scenario
from governance.dashboards.selectors.calendar import last_full_month


def _start(value: str | None) -> dt.datetime:
    if value is None:
        month = last_full_month(timezone.now())
        return dt.datetime.combine(month, dt.time(), tzinfo=dt.UTC)
    try:
        start = dt.datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(
            f"--start: {value!r} is not an ISO date-time, such as 2025-03-01T00:00:00Z",
            returncode=2,
        ) from None
    return start if start.tzinfo else start.replace(tzinfo=dt.UTC)


class Command(BaseCommand):
    help = "Load a scenario's simulated result into a queue's history (see the scenario format)."

    def add_arguments(self, parser):
        parser.add_argument("file", help="scenario JSON file, or - for stdin")
        parser.add_argument("--queue", required=True, help="queue name (created when missing)")
        parser.add_argument(
            "--start",
            help="the instant of the scenario's second 0 (ISO 8601; UTC when no zone is "
            "given); default: the first instant of the last full month",
        )
        parser.add_argument(
            "--prefix",
            help="prefix of the job names (default: the scenario's name and a dash)",
        )
        parser.add_argument(
            "--gpus-per-instance",
            type=int,
            default=1,
            help="GPUs of an instance type the command creates (default 1)",
        )

    def handle(self, *args, **options):
        try:
            scenario = read_scenario(read_input(options["file"]), options["file"])
        except InputError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        queue = options["queue"].strip()
        if not queue or len(queue) > 100:
            raise CommandError("--queue: give a name of 1 to 100 characters", returncode=2)
        if options["gpus_per_instance"] < 1:
            raise CommandError("--gpus-per-instance: must be at least 1", returncode=2)
        prefix = options["prefix"] if options["prefix"] is not None else f"{scenario.name}-"
        try:
            summary = history_load(
                scenario=scenario,
                queue_name=queue,
                start=_start(options["start"]),
                name_prefix=prefix,
                gpus_per_instance=options["gpus_per_instance"],
            )
        except HistoryLoadError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        made = "created" if summary.created_queue else "existing"
        self.stdout.write(
            f"Loaded {summary.jobs} jobs and {summary.events} events into the {made} queue "
            f"{summary.queue!r}, second 0 = {summary.origin.isoformat()}, last event "
            f"{summary.end.isoformat()}."
        )
        if summary.created_shares:
            self.stdout.write(f"Created shares: {', '.join(summary.created_shares)}.")
        self.stdout.write(f"Policy changes recorded: {summary.policy_changes}.")
        if summary.never_finished:
            self.stdout.write(
                f"{summary.never_finished} job(s) never finish in the scenario: they stay "
                "RUNNABLE with their reason."
            )
        months = ", ".join(f"{month:%Y-%m}" for month in summary.months)
        self.stdout.write(f"Figures recomputed for {months}.")
