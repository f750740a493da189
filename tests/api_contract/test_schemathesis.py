"""Every operation of the OpenAPI schema, driven by Schemathesis with generated input.

The schema is the one /api/schema/ serves; the requests go through Django's WSGI
application in-process, signed in as an admin and, in a second pass, as a team lead.
Each response must not be a server error and must match the schema: a documented status
code, a documented content type, and a body of the documented shape (errors included).
Hypothesis is derandomized (a fixed seed) and the examples per operation are bounded, so
the run is repeatable and takes about a minute.

Operations listed in EXCLUDED are left out of the run; each line says why. The list is
meant to be empty.
"""

import zlib

import pytest
import schemathesis
from django.apps import apps
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api_contract.summary import RESPONSES

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

# "METHOD /path" -> why it is not run. Meant to be empty.
EXCLUDED: dict[str, str] = {}

# The resource a path's {id} names, so that most generated ids are real ones.
RESOURCES = {
    "queues": "fleet.JobQueue",
    "shares": "fleet.QuotaShare",
    "teams": "fleet.Team",
    "instance-types": "fleet.InstanceType",
    "urgency-definitions": "fleet.UrgencyDefinition",
    "workload-classes": "fleet.WorkloadClass",
    "policy-changes": "governance.PolicyChange",
    "exception-requests": "governance.ExceptionRequest",
    "knowledge": "governance.KnowledgeArticle",
    "what-if": "governance.WhatIfComparison",
    "jobs": "fleet.Job",
    "job-definitions": "fleet.JobDefinition",
    "tokens": "accounts.ApiToken",
}


# Schemathesis's coverage phase enumerates hundreds of boundary cases per operation (and
# other methods on each path): minutes, not seconds. The bounds themselves are checked
# value by value in tests/hostile; here generated input (valid and invalid) explores each
# operation within a fixed budget.
CONFIG = schemathesis.Config.from_dict({"phases": {"coverage": {"enabled": False}}})


@pytest.fixture
def api_schema(openapi_document, wsgi_app):
    schema = schemathesis.openapi.from_dict(openapi_document, config=CONFIG)
    return schema.exclude(
        func=lambda ctx: f"{ctx.operation.method.upper()} {ctx.operation.path}" in EXCLUDED
    )


schema = schemathesis.pytest.from_fixture("api_schema")


@schemathesis.deserializer(
    "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/vnd.yaml"
)
def _yaml_file(ctx, response):
    """The only YAML the API answers is a policy file, documented as a string (the file's
    text); some formats hold several YAML documents, which no parser reads as one value."""
    return response.text


def _third(value) -> int:
    """0, 1 or 2, the same on every run (hash() of a string is not)."""
    return zlib.crc32(repr(value).encode()) % 3


def _real_id(case) -> None:
    """Two generated ids in three become the id of an existing object of the path's kind."""
    generated = (case.path_parameters or {}).get("id")
    label = RESOURCES.get(case.path.split("/")[3])
    if generated is None or label is None or _third(generated) == 0:
        return
    ids = sorted(apps.get_model(label).objects.values_list("pk", flat=True))
    if ids:
        case.path_parameters["id"] = ids[_third(generated) % len(ids)]


def _real_references(case, fleet) -> None:
    """In two generated bodies in three, fields that name other objects name real ones, so
    writes get past "unknown team" to the rules and the success responses."""
    body = case.body
    if not isinstance(body, dict) or _third(body) == 0:
        return
    for name, value in fleet.references().items():
        if name in body and _same_kind(body[name], value):
            body[name] = value


def _same_kind(generated, real) -> bool:
    if isinstance(real, list):
        return isinstance(generated, list) and all(
            type(item) is type(real[0]) for item in generated
        )
    return type(generated) is type(real)


def _settings(max_examples: int):
    return settings(
        derandomize=True,
        database=None,
        deadline=None,
        max_examples=max_examples,
        suppress_health_check=list(HealthCheck),
    )


def _run(case, app, fleet, user) -> None:
    cookies, headers = fleet.session(user)
    _real_id(case)
    _real_references(case, fleet)
    response = case.call(app=app, headers=headers, cookies=cookies)
    RESPONSES[user.username, f"{case.method} {case.path}"][response.status_code] += 1
    assert response.status_code != 401, "the session must authenticate every request"
    case.validate_response(response, checks=CHECKS)


@pytest.mark.slow
@schema.parametrize()
@_settings(max_examples=20)
def test_as_admin(case, wsgi_app, fleet):
    _run(case, wsgi_app, fleet, fleet.admin)


@pytest.mark.slow
@schema.parametrize()
@_settings(max_examples=8)
def test_as_team_lead(case, wsgi_app, fleet):
    _run(case, wsgi_app, fleet, fleet.lead)
