"""One error shape for the API: {"detail": "field: message", "errors": {"field": ["message"]}}.

Validation problems come from two places and look the same: the serializers
(parsing: not a number, unknown team) and the policy services (the rules,
raised as PolicyError). A version conflict (409) adds the current and the
submitted state, so the client loses nothing and can show both.
"""

from django.core.exceptions import PermissionDenied
from django.db.models import ProtectedError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from governance.services.policy import PolicyError, VersionConflict

NON_FIELD = "non_field_errors"


def _flatten(detail, prefix=""):
    if isinstance(detail, dict):
        out = {}
        for key, value in detail.items():
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


def _submitted_version(context) -> int | None:
    request = context.get("request")
    version = getattr(request, "data", {}).get("version") if request is not None else None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def exception_handler(exc, context):
    if isinstance(exc, PolicyError):
        return Response(error_body(exc.errors), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, VersionConflict):
        body = error_body({"version": [str(exc)]})
        body.update(
            current=exc.current,
            current_version=exc.current_version,
            submitted=exc.submitted,
            submitted_version=_submitted_version(context),
        )
        return Response(body, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ProtectedError):
        used_by = sorted({str(obj) for obj in exc.protected_objects})[:5]
        message = f"still in use by {', '.join(used_by)}; remove those first"
        return Response(error_body({NON_FIELD: [message]}), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body(_flatten(exc.detail))
    elif isinstance(response.data, dict) and "detail" in response.data:
        response.data = {"detail": str(response.data["detail"]), "errors": {}}
    return response
