"""One error shape for everything under /api/: {"detail": "field: message", "errors": {...}}.

`errors` maps a field name (dotted for nested input: "capacity.ml.g5.xlarge",
"jobs[0].share") to its messages; it is empty when no field is at fault (401, 403, 404,
405, 415, 429). Validation problems come from two places and look the same: the
serializers and filters (parsing and storage bounds) and the services (the rules,
raised as the domain errors of core.errors, mapped here and nowhere else:
InvalidInput and WrongState 400, Refused 403 with the rules table's sentence, NotFound
404, Conflict 409). A 409 adds what the conflict's `details()` carries: for a policy
version conflict `current`, `current_version`, `submitted` and `submitted_version`, both
states so the client loses nothing (null for an object still in use or an outdated
plan); a job's client-token conflict the jobs it made; a definition's revision conflict
both revision numbers. Even an unexpected failure answers JSON (500) in this shape,
after it is logged with its traceback; a database that cannot be reached answers 503
with Retry-After (core.outage).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.db.models import ProtectedError
from django.http import Http404, JsonResponse
from django.urls import Resolver404, resolve
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from core.errors import NON_FIELD, Conflict, DomainError

logger = logging.getLogger("django.request")


def _flatten(detail, prefix=""):
    if isinstance(detail, dict):
        out = {}
        for key, value in detail.items():
            if isinstance(key, int):  # a list item's errors, keyed by its index
                name = f"{prefix}[{key}]"
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            if key == NON_FIELD:
                name = prefix or NON_FIELD
            out.update(_flatten(value, name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return {prefix or NON_FIELD: [str(item) for item in detail]}
        out = {}
        for index, item in enumerate(detail):
            if item:
                out.update(_flatten(item, f"{prefix}[{index}]"))
        return out
    return {prefix or NON_FIELD: [str(detail)]}


def error_body(errors: dict[str, list[str]]) -> dict:
    first_field, first_messages = next(iter(errors.items()), (NON_FIELD, [""]))
    detail = (
        first_messages[0] if first_field == NON_FIELD else f"{first_field}: {first_messages[0]}"
    )
    return {"detail": detail, "errors": errors}


def message_body(detail: str) -> dict:
    """A problem with no field at fault."""
    return {"detail": detail, "errors": {}}


def conflict_body(
    errors: dict[str, list[str]],
    *,
    current=None,
    current_version=None,
    submitted=None,
    submitted_version=None,
) -> dict:
    return {
        **error_body(errors),
        "current": _jsonable(current),
        "current_version": current_version,
        "submitted": _jsonable(submitted),
        "submitted_version": submitted_version,
    }


def _jsonable(value):
    """A service's document as JSON: the objects it may hold (a Team among an urgency's
    invokers) by their names."""
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _submitted_version(context) -> int | None:
    request = context.get("request")
    data = getattr(request, "data", None) if request is not None else None
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def domain_error_body(exc: DomainError, context=None) -> dict:
    if exc.status in (status.HTTP_403_FORBIDDEN, status.HTTP_404_NOT_FOUND):
        return message_body(str(exc))
    body = error_body(exc.errors)
    details = exc.details()
    if isinstance(exc, Conflict) and details.get("submitted_version", 0) is None and context:
        # The version the client sent, when the service did not know it.
        details["submitted_version"] = _submitted_version(context)
    body.update(_jsonable(details))
    return body


# The database could not be reached (refused, dropped, timed out, a lock timeout): a
# client rides it out by trying again, so it is 503 with Retry-After, not 500; here for
# what DRF sees first, in core.outage for the rest of the product.
DATABASE_OUTAGE_ERRORS = (OperationalError, InterfaceError)


def is_database_outage(exc: BaseException | None) -> bool:
    return isinstance(exc, DATABASE_OUTAGE_ERRORS)


def retry_after() -> int:
    """Seconds a client is told to wait while the database cannot be reached."""
    return int(getattr(settings, "DATABASE_OUTAGE_RETRY_AFTER", 5))


def database_outage_body() -> dict:
    return message_body(f"the database cannot be reached right now; try again in {retry_after()} s")


def exception_handler(exc, context):
    if is_database_outage(exc):
        # Before DRF's 500: the same 503 and Retry-After as core.outage's middleware.
        set_rollback()
        return Response(
            database_outage_body(),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(retry_after())},
        )
    if isinstance(exc, DomainError):
        set_rollback()
        return Response(domain_error_body(exc, context), status=exc.status)
    if isinstance(exc, ProtectedError):
        used_by = sorted({str(obj) for obj in exc.protected_objects})[:5]
        message = f"still in use by {', '.join(used_by)}; remove those first"
        return Response(conflict_body({NON_FIELD: [message]}), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, SuspiciousOperation):
        # Too many fields, a body over the upload limit: the request, not the server.
        exc = exceptions.ParseError(f"request refused: {exc}")
    response = drf_exception_handler(exc, context)
    if response is None:
        return _server_error(exc, context)
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body(_flatten(exc.detail))
    elif isinstance(response.data, dict) and "detail" in response.data:
        response.data = message_body(str(response.data["detail"]))
    return response


def _server_error(exc, context):
    if settings.DEBUG:
        return None  # DRF re-raises: Django's debug page shows the traceback
    request = context.get("request")
    set_rollback()
    logger.error(
        "Internal Server Error: %s",
        getattr(request, "path", "?"),
        exc_info=(type(exc), exc, exc.__traceback__),
        extra={"status_code": 500, "request": getattr(request, "_request", request)},
    )
    response = Response(
        message_body("server error: the problem is logged; try again later"),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )
    response._has_been_logged = True  # logged above, with the traceback
    return response


def server_error(request):
    """handler500: under /api/ the error shape, elsewhere the product's error page (a
    failure while rendering a response happens after DRF's own handling)."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            message_body("server error: the problem is logged; try again later"),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    return defaults.server_error(request)


# Exempt: it changes nothing and only answers 404, so a POST to a mistyped path gets
# the API's JSON 404 rather than Django's CSRF 403 page.
@csrf_exempt
@login_not_required
def not_found(request, path=""):
    """Any /api/ path no operation matches: a JSON 404, never the HTML page."""
    detail = f"no API operation at {request.path}"
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            detail += f"; did you mean {request.path}/ ?"
    return JsonResponse(message_body(detail), status=status.HTTP_404_NOT_FOUND)
