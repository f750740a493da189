"""The demo's outbox: the e-mails Django's file-based backend wrote (run_demo sets it, so
notification e-mails are kept under var/outbox/ instead of printed). Admins read them on
the Outbox page; with any other e-mail backend the outbox is empty."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path

from django.conf import settings

FILE_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
SEPARATOR = "-" * 79
MAX_MESSAGES = 100


@dataclass(frozen=True)
class OutboxMessage:
    subject: str
    to: str
    sent_at: dt.datetime | None
    body: str


def outbox_enabled() -> bool:
    return settings.EMAIL_BACKEND == FILE_BACKEND


def _parse(raw: str) -> OutboxMessage:
    message = email.message_from_string(raw.strip(), policy=email.policy.default)
    try:
        sent_at = parsedate_to_datetime(message["Date"]) if message["Date"] else None
    except (TypeError, ValueError):
        sent_at = None
    part = message.get_body(preferencelist=("plain",))
    body = part.get_content() if part is not None else ""
    return OutboxMessage(
        subject=str(message["Subject"] or "(no subject)"),
        to=str(message["To"] or ""),
        sent_at=sent_at,
        body=body.strip(),
    )


def outbox_messages(limit: int = MAX_MESSAGES) -> list[OutboxMessage]:
    """The newest `limit` e-mails of the outbox, newest first."""
    if not outbox_enabled():
        return []
    folder = Path(settings.EMAIL_FILE_PATH)
    if not folder.is_dir():
        return []
    files = sorted(folder.glob("*.log"), key=lambda path: path.stat().st_mtime, reverse=True)
    messages: list[OutboxMessage] = []
    for path in files:
        # One file per connection; messages in it are separated by a line of dashes.
        parts = [part for part in path.read_text(errors="replace").split(SEPARATOR) if part.strip()]
        messages.extend(_parse(part) for part in reversed(parts))
        if len(messages) >= limit:
            break
    return messages[:limit]
