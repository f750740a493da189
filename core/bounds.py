"""The ranges input must fit before it reaches the database, shared by forms, serializers
and filters: outside them a value is a field error, never an overflow in a query.

They are storage limits, not policy rules (those live in the services): ids are 64-bit
primary keys, counts are PositiveIntegerFields, and free text has a generous cap so one
request cannot store megabytes in a note.
"""

from collections.abc import Iterable, Mapping

from core.errors import DomainError, InvalidInput

MAX_ID = 2**63 - 1  # BigAutoField
MAX_COUNT = 2**31 - 1  # PositiveIntegerField
MAX_SMALL = 2**15 - 1  # PositiveSmallIntegerField
MAX_TEXT = 10_000  # notes, reasons, descriptions, justifications
MAX_ARTICLE_BODY = 100_000  # a knowledge article's Markdown
MAX_QUERY = 500  # a search query or a name in a query string


def too_long(value: str, limit: int = MAX_TEXT) -> str | None:
    """The error of a text over `limit` characters, or None. Said the same way in forms,
    the API and policy files: the bound, and how long the text is."""
    if len(value) <= limit:
        return None
    return f"at most {limit:,} characters (this has {len(value):,})"


def check_lengths(
    values: Mapping[str, object] | object,
    fields: Mapping[str, int] | Iterable[str],
    *,
    error: type[DomainError] = InvalidInput,
) -> None:
    """Refuse free text over its bound before a service writes it: raise `error` (the
    service's own InvalidInput kind) naming each field at fault, with too_long()'s words.

    `values` is a mapping or an object whose attributes are read; `fields` names the
    fields (each bounded by MAX_TEXT) or maps each to its own limit. A field that is
    missing, None or not text is not this check's business. The one check every service
    calls, so a management command, a task or the demo is refused as a form would be."""
    limits = fields if isinstance(fields, Mapping) else dict.fromkeys(fields, MAX_TEXT)
    read = values.get if isinstance(values, Mapping) else lambda name: getattr(values, name, None)
    problems: dict[str, list[str]] = {}
    for field, limit in limits.items():
        value = read(field)
        if isinstance(value, str) and (message := too_long(value, limit)):
            problems[field] = [message]
    if problems:
        raise error(problems)
