"""Every free-text field is bounded, the same in the model, the form, the API schema
and the services (issue 28, point 1), and every form reports all its errors at once,
each next to its field (issue 28, point 7)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.validators import MaxLengthValidator
from django.db import models
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

from core.bounds import MAX_TEXT
from fleet.models import JobDefinition, QuotaShare
from tests.factories import job_definition

pytestmark = pytest.mark.django_db

APPS = ("accounts", "fleet", "scheduler", "governance")
# Written by the system, never by a person: no form or API takes them.
SYSTEM_TEXT = {
    ("governance", "KnowledgeArticle", "body_html"),
    ("governance", "KnowledgeArticle", "body_text"),
    ("governance", "WhatIfComparison", "error"),
    # The OIDC provider's refresh token, encrypted by the product (no form or API).
    ("governance", "DirectoryAccount", "refresh_token"),
    ("scheduler", "JobDecision", "note"),
}
# Request strings that name an existing object (looked up, never stored as typed).
LOOKUPS = {"team", "instance_type", "editors", "members", "leads", "invokers"}


def test_every_free_text_model_field_has_a_bound_it_enforces():
    unbounded = []
    for label in APPS:
        for model in apps.get_app_config(label).get_models():
            for field in model._meta.get_fields():
                if not isinstance(field, models.TextField):
                    continue
                if (label, model.__name__, field.name) in SYSTEM_TEXT:
                    continue
                enforced = any(isinstance(v, MaxLengthValidator) for v in field.validators)
                if not field.max_length or not enforced:
                    unbounded.append(f"{model.__name__}.{field.name}")
    assert not unbounded, unbounded


def _refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value.rsplit("/", 1)[-1]
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_string_the_api_takes_has_a_max_length_in_the_schema():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    todo = [
        ref
        for operations in schema["paths"].values()
        for operation in operations.values()
        if isinstance(operation, dict)
        for ref in _refs(operation.get("requestBody", {}))
    ]
    seen, missing = set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_refs(components.get(name, {})))
        for prop, spec in components.get(name, {}).get("properties", {}).items():
            if spec.get("readOnly") or prop in LOOKUPS:
                continue
            items = spec.get("items", {}) if spec.get("type") == "array" else spec
            if (
                items.get("type") == "string"
                and "maxLength" not in items
                and "enum" not in items
                and items.get("format") not in ("date-time", "date", "binary", "uri")
            ):
                missing.append(f"{name}.{prop}")
    assert len(seen) > 20  # the walk reached the request bodies
    assert not missing, missing


def test_the_definition_api_refuses_an_over_long_description_naming_it(admin_api, aws_queue):
    body = {
        "name": "long-description",
        "queues": [aws_queue.name],
        "description": "x" * (MAX_TEXT + 1),
        "reason": "y" * (MAX_TEXT + 1),
        "expected_duration": 60,
    }
    response = admin_api.post("/api/v1/job-definitions/", body, format="json")
    assert response.status_code == 400, response.content
    fields = response.json()["errors"] if "errors" in response.json() else response.json()
    text = str(fields)
    assert "description" in text and "reason" in text
    assert not JobDefinition.objects.filter(name="long-description").exists()

    body.update(description="x" * MAX_TEXT, reason="y" * MAX_TEXT)
    response = admin_api.post("/api/v1/job-definitions/", body, format="json")
    assert response.status_code == 201, response.content


def test_a_description_stored_before_the_bound_stays_and_revisions_keep_it(admin, aws_queue):
    from scheduler.services import job_definitions as definitions

    revision = job_definition(aws_queue, name="legacy", expected_duration=60)
    # A row from before the bound (the migration changes no column).
    JobDefinition.objects.filter(pk=revision.definition.pk).update(description="z" * 20_000)
    data = definitions.DefinitionData(queues=[aws_queue], expected_duration=120)
    saved = definitions.definition_revise(
        actor=admin,
        definition_id=revision.definition.pk,
        base_revision=revision.revision,
        data=data,
        reason="longer runs",
    )
    assert saved.revision == 2
    assert len(JobDefinition.objects.get(pk=revision.definition.pk).description) == 20_000
    with pytest.raises(definitions.DefinitionError) as error:
        definitions.definition_revise(
            actor=admin,
            definition_id=revision.definition.pk,
            base_revision=2,
            data=data,
            reason="a new text",
            description="q" * (MAX_TEXT + 1),
        )
    assert error.value.errors["description"] == [
        f"at most {MAX_TEXT:,} characters (this has {MAX_TEXT + 1:,})"
    ]


# One submit, every error (point 7).


def test_the_job_form_reports_field_and_service_errors_in_one_submit(admin_page, aws_queue):
    revision = job_definition(
        aws_queue,
        name="with-parameter",
        expected_duration=60,
        parameters=[{"name": "steps", "type": "integer", "min": 1, "max": 10}],
    )
    share = QuotaShare.objects.filter(queue=aws_queue).first()
    response = admin_page.post(
        reverse("job-create"),
        {
            "definition": revision.definition.pk,
            "revision": revision.revision,
            "share": share.pk,
            "name": "",  # a field error
            "priority": "high",  # a field error
            "instances": "0",  # a field error
            "parameters.steps": "99",  # the service's rule: out of the parameter's bounds
            "expected_duration": str(10**12),  # the service's rule: beyond the bound
        },
    )
    assert response.status_code == 200, response.content.decode()[-3000:]
    errors = response.context["form"].errors
    assert set(errors) >= {"name", "priority", "instances", "parameters.steps", "expected_duration"}
    page = response.content.decode()
    for field in ("name", "priority", "instances", "parameters.steps", "expected_duration"):
        # Each message is rendered with its field (components/field.html: id_<name>_error).
        assert f'id="id_{field}_error"' in page or f"id_{field}-error" in page, field


def test_the_exception_form_reports_all_its_errors_at_once(admin_page, aws_queue):
    response = admin_page.post(
        reverse("exception-create"),
        {
            "kind": "PRIORITY_RAISE",
            "justification": "j" * (MAX_TEXT + 1),
            "window_start": "not a time",
            "window_end": "",
            "submit": "1",
        },
    )
    assert response.status_code == 400  # the page answers a refused form with 400
    errors = response.context["form"].errors
    assert {"team", "urgency", "justification", "window_start", "window_end"} <= set(errors), errors
    assert errors["justification"] == [
        f"Ensure this value has at most {MAX_TEXT} characters (it has {MAX_TEXT + 1})."
    ]


def test_the_share_editor_reports_all_its_errors_at_once(admin_page, aws_queue):
    share = QuotaShare.objects.filter(queue=aws_queue).first()
    response = admin_page.post(
        reverse("share-edit", args=[share.pk]),
        {
            "name": "",  # the service's rule: a share needs a name
            "team": share.team_id,
            "strategy": share.strategy,
            "borrow_limit": "lots",  # a field error
            "priority_ceiling": "-5",  # the service's rule or a field error
            "state": share.state,
            "version": share.version,
            "reason": "r" * (MAX_TEXT + 1),  # over the bound
            "limit-0-instance_type": "ml.g5.xlarge",
            "limit-0-max_instances": "1",
        },
    )
    errors = response.context["form"].errors
    assert {"name", "borrow_limit", "priority_ceiling", "reason"} <= set(errors), errors
