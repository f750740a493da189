"""Policy as code: the quota policy as files in AWS Batch's, CloudFormation's, Kueue's and
our own format, and the plan and apply of such a file.

One module per format documents its mapping: `aws_batch`, `cloudformation`, `kueue`
and `native`. `plan` holds the diff, the checks and the apply; `aws_sync` the optional
push to AWS Batch and its drift report. The command (`manage.py policy`), the API and
the queue page call the functions below.
"""

from __future__ import annotations

import json

from fleet.models import JobQueue
from governance.policy_code import aws_batch, cloudformation, kueue, native
from governance.policy_code.model import Export, PolicyFile
from governance.policy_code.source import FileProblem, PolicyFileError, decode, loads_json

EXPORTERS = {
    aws_batch.FORMAT: aws_batch,
    cloudformation.FORMAT: cloudformation,
    kueue.FORMAT: kueue,
    native.FORMAT: native,
}
PARSERS = {
    aws_batch.FORMAT: aws_batch,
    cloudformation.FORMAT: cloudformation,
    kueue.FORMAT: kueue,
    native.FORMAT: native,
}
FORMATS = tuple(EXPORTERS)
IMPORT_FORMATS = tuple(PARSERS)
# Formats whose file describes one queue only.
ONE_QUEUE_FORMATS = (aws_batch.FORMAT, cloudformation.FORMAT)


class UnknownFormat(ValueError):
    pass


def policy_export(*, format: str, queue: JobQueue | None = None) -> Export:
    """The policy of `queue` (every queue for kueue and native when None) in `format`."""
    if format not in EXPORTERS:
        raise UnknownFormat(f"unknown format '{format}'; choose from {', '.join(FORMATS)}")
    if queue is None and format in ONE_QUEUE_FORMATS:
        raise UnknownFormat(f"the {format} format describes one queue: name it")
    if queue is None:
        return EXPORTERS[format].export()
    return EXPORTERS[format].export(queue=queue)


def detect_format(text: str) -> str | None:
    """The format a file's content is in, or None when it is none of the importable ones."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = loads_json(text)
        except json.JSONDecodeError:
            return None
        if cloudformation.looks_like_template(data):
            return cloudformation.FORMAT
        return aws_batch.FORMAT if isinstance(data, dict) and "quotaShares" in data else None
    if "kueue.x-k8s.io/" in text:
        return kueue.FORMAT
    for line in text.splitlines():
        if line.startswith(("AWSTemplateFormatVersion:", "Resources:")):
            return cloudformation.FORMAT
    for line in text.splitlines():
        if line.startswith("version:"):
            return native.FORMAT
    return None


def policy_file_read(
    *, raw: bytes | str, source: str, format: str | None = None, target_queue: str | None = None
) -> PolicyFile:
    """Parse an uploaded or given file. `format` None: recognise it from its content.
    `target_queue` applies a one-queue file to that queue whatever the file names."""
    text = decode(raw)
    if format is None:
        format = detect_format(text)
        if format is None:
            raise PolicyFileError(
                [
                    FileProblem(
                        None,
                        "format",
                        "cannot tell the file's format: name it (one of "
                        f"{', '.join(IMPORT_FORMATS)})",
                    )
                ]
            )
    if format not in PARSERS:
        raise PolicyFileError(
            [
                FileProblem(
                    None, "format", f"must be one of {', '.join(IMPORT_FORMATS)} to be imported"
                )
            ]
        )
    return PARSERS[format].parse(text, source=source, target_queue=target_queue)
