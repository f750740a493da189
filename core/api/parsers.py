"""The API's JSON parser: DRF's, refusing input nested deeper than core.nesting's bound
and bodies larger than DATA_UPLOAD_MAX_MEMORY_SIZE.

Without it a body of 100,000 `[` makes json.loads raise RecursionError: a 500 where
the client sent bad input. Too deep is a 400 in the API's shape for a body that cannot
be parsed ({"detail": "JSON parse error - ...", "errors": {}}), before anything is built.
DRF reads the request's stream itself, past the size Django bounds `request.body` by,
so the bound is applied here too: too large is Django's RequestDataTooBig, which the
API's handler answers 400 ("request refused: ...") as it does for a form.
"""

from __future__ import annotations

import io

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from core.nesting import MAX_DEPTH, deeper_than


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")
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
