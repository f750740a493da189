"""Logging filters (LOGGING in settings)."""

import logging


class ClientErrorWithoutTraceback(logging.Filter):
    """Django logs every 4xx response as a warning and, when an exception made it (a
    PermissionDenied, a Http404), with that exception's traceback. A refused request is
    the client's doing, not a fault: the one-line warning says all, so the traceback is
    dropped. 5xx records keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", 500) < 500:
            record.exc_info = None
            record.exc_text = None
        return True
