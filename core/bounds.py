"""The ranges input must fit before it reaches the database, shared by forms, serializers
and filters: outside them a value is a field error, never an overflow in a query.

They are storage limits, not policy rules (those live in the services): ids are 64-bit
primary keys, counts are PositiveIntegerFields, and free text has a generous cap so one
request cannot store megabytes in a note.
"""

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
