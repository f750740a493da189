"""The API's JSON parser: DRF's, refusing input nested deeper than core.nesting's bound.

Without it a body of 100,000 `[` makes json.loads raise RecursionError: a 500 where
the client sent bad input. Too deep is a 400 in the API's shape for a body that cannot
be parsed ({"detail": "JSON parse error - ...", "errors": {}}), before anything is built.
"""

from __future__ import annotations

import io

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from core.nesting import MAX_DEPTH, deeper_than


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        raw = stream.read()
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            text = None  # DRF's own parse says what is wrong with it
        if text is not None:
            line = deeper_than(text)
            if line is not None:
                raise ParseError(
                    f"JSON parse error - nested deeper than {MAX_DEPTH} levels (line {line})"
                )
        return super().parse(io.BytesIO(raw), media_type, parser_context)
