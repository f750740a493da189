"""Policy as code: `policy export`, `policy plan FILE` and `policy apply FILE`."""

import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from core.errors import InvalidInput
from fleet.models import JobQueue
from governance.policy_code import (
    FORMATS,
    IMPORT_FORMATS,
    UnknownFormat,
    policy_export,
    policy_file_read,
)
from governance.policy_code.plan import PlanOutdated, policy_apply, policy_plan
from governance.policy_code.report import plan_lines
from governance.policy_code.source import PolicyFileError


class Command(BaseCommand):
    help = (
        "Export a queue's policy (aws-batch, cloudformation, kueue or native), or plan and "
        "apply a policy file (aws-batch, cloudformation, kueue or native)."
    )

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="subcommand", required=True)
        export = commands.add_parser("export", help="Write the policy of a queue.")
        export.add_argument("--queue", help="The queue (all queues for kueue and native).")
        export.add_argument("--format", required=True, choices=FORMATS)
        export.add_argument("-o", "--output", help="Write to this file instead of stdout.")
        for name, text in (
            ("plan", "Show what applying FILE would change, and its impact. Changes nothing."),
            ("apply", "Apply FILE, all or nothing, recording each change in the history."),
        ):
            sub = commands.add_parser(name, help=text)
            sub.add_argument("file", help="The policy file; - reads standard input.")
            sub.add_argument("--format", choices=IMPORT_FORMATS, help="Default: recognised.")
            sub.add_argument(
                "--queue", help="Apply a one-queue file to this queue, whatever it names."
            )
            if name == "apply":
                sub.add_argument("--user", required=True, help="The admin who applies it.")
                sub.add_argument(
                    "--reason",
                    required=True,
                    help="Why this change is made (the history adds the file's name).",
                )

    def handle(self, *args, subcommand, **options):
        if subcommand == "export":
            return self._export(**options)
        policy = self._read(options["file"], options["format"], options["queue"])
        try:
            if subcommand == "plan":
                plan = policy_plan(policy=policy)
                self.stdout.write("\n".join(plan_lines(plan)))
                return None
            actor = get_user_model().objects.filter(username=options["user"]).first()
            if actor is None:
                raise CommandError(f"--user: no user named '{options['user']}'")
            result = policy_apply(actor=actor, policy=policy, reason=options["reason"])
        except PolicyFileError as error:
            self._fail(options["file"], error)
        except InvalidInput as error:
            raise CommandError(
                "; ".join(
                    f"--{field}: {message}"
                    for field, messages in error.errors.items()
                    for message in messages
                )
            ) from error
        except (PlanOutdated, PermissionDenied) as error:
            raise CommandError(str(error)) from error
        self.stdout.write("\n".join(plan_lines(result.plan)))
        for line in result.sync_lines():
            self.stdout.write(line)
        self.stdout.write(f"Applied: {result.summary()}")
        return None

    def _export(self, *, queue, format, output, **_options):
        target = None
        if queue is not None:
            target = JobQueue.objects.filter(name=queue).first()
            if target is None:
                raise CommandError(f"--queue: no queue named '{queue}'")
        try:
            export = policy_export(format=format, queue=target)
        except UnknownFormat as error:
            raise CommandError(f"--queue: {error}") from error
        for warning in export.warnings:
            self.stderr.write(f"warning: {warning}")
        if output:
            Path(output).write_text(export.content, encoding="utf-8")
            self.stderr.write(f"Wrote {output}")
        else:
            self.stdout.write(export.content, ending="")

    def _read(self, file: str, format: str | None, queue: str | None):
        if file == "-":
            raw, source = sys.stdin.buffer.read(), "stdin"
        else:
            path = Path(file)
            try:
                raw = path.read_bytes()
            except OSError as error:
                raise CommandError(f"{file}: {error.strerror}") from error
            source = path.name
        try:
            return policy_file_read(raw=raw, source=source, format=format, target_queue=queue)
        except PolicyFileError as error:
            self._fail(file, error)

    def _fail(self, file: str, error: PolicyFileError):
        for problem in error.problems:
            self.stderr.write(f"{file}: {problem}")
        count = len(error.problems)
        raise CommandError(
            f"{count} problem{'s' if count != 1 else ''} in {file}; nothing was changed"
        )
