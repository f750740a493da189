"""How deeply a JSON text nests, found without building it.

Python's json module recurses once per level and raises RecursionError (a server error)
on input a few thousand levels deep; the code that walks the result recurses too. So
input is measured first: a scan of its brackets, skipping strings, that stops at the
first one past the bound. No legitimate document of this product nests 64 levels.
"""

from __future__ import annotations

import re

MAX_DEPTH = 64

# A JSON string (its escapes included) or a bracket: strings are skipped whole, so a
# bracket inside one does not count.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def deeper_than(text: str, limit: int = MAX_DEPTH) -> int | None:
    """The line (from 1) of the first bracket that opens level `limit + 1`, or None when
    `text` nests no deeper than `limit`. Invalid JSON is measured as far as it goes."""
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return text.count("\n", 0, match.start()) + 1
        elif token in "]}":
            depth -= 1
    return None
