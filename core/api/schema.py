"""The OpenAPI schema's error documentation: one shape (core.api.errors), stated once
as components and referenced by every operation, so no view has to repeat it.

Every operation may answer 400 (a field or query parameter is wrong, or the body does not
parse), 401, 403, 404 and 429 (with Retry-After); every write may also answer 409 (a
version conflict or an object still in use) and, when it takes a body, 415. A view that
documents a 409 with more keys than these (the jobs API's client-token conflict) keeps it:
such a body is still the error shape, with its own additions.
"""

from __future__ import annotations

WRITE_METHODS = {"post", "put", "patch", "delete"}

_MESSAGES = {
    "type": "object",
    "description": 'Field name -> messages; nested input is dotted ("capacity.ml.g5.xlarge", '
    '"jobs[0].share"); "non_field_errors" for the request as a whole; empty when no '
    "field is at fault.",
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}
_DETAIL = {"type": "string", "description": 'The first problem, as "field: message".'}

ERROR_SCHEMA = {
    "type": "object",
    "description": "Every error under /api/ has this shape.",
    "properties": {"detail": _DETAIL, "errors": _MESSAGES},
    "required": ["detail", "errors"],
}
CONFLICT_SCHEMA = {
    "type": "object",
    "description": "A 409: the error shape plus both sides of a version conflict. For an "
    "object that is still in use (delete refused) the four extra keys are null.",
    "properties": {
        "detail": _DETAIL,
        "errors": _MESSAGES,
        "current": {
            "type": "object",
            "nullable": True,
            "additionalProperties": {},
            "description": "The object as someone else saved it.",
        },
        "current_version": {"type": "integer", "nullable": True},
        "submitted": {
            "type": "object",
            "nullable": True,
            "additionalProperties": {},
            "description": "What this request tried to save (not applied).",
        },
        "submitted_version": {"type": "integer", "nullable": True},
    },
    "required": [
        "detail",
        "errors",
        "current",
        "current_version",
        "submitted",
        "submitted_version",
    ],
}


def _response(description: str, schema: str, headers: dict | None = None) -> dict:
    body = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }
    if headers:
        body["headers"] = headers
    return body


RESPONSES = {
    "400": _response(
        "Invalid input: `errors` names each field or query parameter at fault, or the "
        "body could not be parsed.",
        "Error",
    ),
    "401": _response("Not signed in: send a session cookie or `Authorization: Token …`.", "Error"),
    "403": _response("Signed in, but your role may not do this.", "Error"),
    "404": _response("No such object (or no such path under /api/).", "Error"),
    "409": _response(
        "Conflict: someone saved a newer version, or the object is still in use.", "Conflict"
    ),
    "415": _response("The body's Content-Type is not JSON (or a form encoding).", "Error"),
    "429": _response(
        "Too many requests: wait the seconds in Retry-After.",
        "Error",
        headers={
            "Retry-After": {
                "schema": {"type": "integer", "minimum": 0},
                "description": "Seconds until a request is allowed again.",
            }
        },
    ),
}
_NAMES = {
    "400": "BadRequest",
    "401": "Unauthorized",
    "403": "Forbidden",
    "404": "NotFound",
    "409": "Conflict",
    "415": "UnsupportedMediaType",
    "429": "TooManyRequests",
}


def document_errors(result, generator, request, public):
    """drf-spectacular postprocessing hook: the shared error responses on every operation,
    in place of a view's own that only repeat the shape, so all agree."""
    components = result.setdefault("components", {})
    components.setdefault("schemas", {}).update(Error=ERROR_SCHEMA, Conflict=CONFLICT_SCHEMA)
    components.setdefault("responses", {}).update(
        {_NAMES[code]: response for code, response in RESPONSES.items()}
    )
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/"):
            continue
        for method, operation in operations.items():
            codes = ["400", "401", "403", "404", "429"]
            if method in WRITE_METHODS:
                codes.append("409")
                if "requestBody" in operation:
                    codes.append("415")
            responses = operation.setdefault("responses", {})
            for code in codes:
                if code not in responses or _is_plain_error(responses[code]):
                    responses[code] = {"$ref": f"#/components/responses/{_NAMES[code]}"}
    return result


def _is_plain_error(response: dict) -> bool:
    """A view's own error documentation that is just the shared shape; a view that
    documents more (a 409 naming the job a client token made) keeps its own."""
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    return schema.get("$ref") == "#/components/schemas/Error"
