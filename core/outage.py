"""While the database cannot be reached, requests get 503 with `Retry-After`, not 500.

A connection refused, dropped or timed out, a statement cancelled by a lock timeout:
Django raises `OperationalError` or `InterfaceError` (django.db), whichever layer
asked first (the session, the user, the view). Those are outages a client rides out
by trying again, so the answer says when (`Retry-After`: DATABASE_OUTAGE_RETRY_AFTER
seconds): under /api/ in the API's one error shape (core.api.errors), elsewhere a
plain page (templates/503.html, rendered without a request: no context processor, so
nothing that queries). Any other exception stays a 500.

`DatabaseOutageMiddleware` answers for the view's exceptions (`process_exception`)
and, for those another middleware raised (the session's or the user's lookup, turned
into a 500 response by Django's handler before it reaches here), replaces that 500: the
`got_request_exception` signal marks the request with the exception Django handled.
The API's own exception handler answers the same for what DRF sees first
(core.api.errors, which also says which errors are an outage). /healthz/ answers its
own 503 (governance.system).
"""

from __future__ import annotations

import logging
import sys

from django.core.signals import got_request_exception
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

from core.api.errors import database_outage_body, is_database_outage, retry_after

logger = logging.getLogger(__name__)

_MARK = "_database_outage"


def database_outage_response(request) -> HttpResponse:
    """503 with Retry-After: JSON under /api/, the plain page elsewhere."""
    seconds = retry_after()
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(database_outage_body(), status=503)
    else:
        page = render_to_string("503.html", {"retry_after": seconds})
        response = HttpResponse(page, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(seconds)
    return response


def _mark_request(sender, request=None, **kwargs) -> None:
    # Sent by Django's handler while it handles the exception: sys.exc_info() is it.
    if request is not None and is_database_outage(sys.exc_info()[1]):
        setattr(request, _MARK, True)


got_request_exception.connect(_mark_request, dispatch_uid="core.outage.mark_request")


class DatabaseOutageMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code == 500 and getattr(request, _MARK, False):
            return database_outage_response(request)
        return response

    def process_exception(self, request, exception):
        if not is_database_outage(exception):
            return None
        logger.warning("database unreachable while serving %s: %s", request.path, exception)
        return database_outage_response(request)
