"""The API's output ModelSerializer: each field is read by a plan made once per class.

DRF's ModelSerializer inspects the model and builds, then deep-copies and binds, every
field again for each serializer it makes, and converts each value through the generic
field machinery: for a share, a page of queues or a page of jobs this cost more than
the queries and the rest of the request together. An output serializer here declares
its fields as usual (the OpenAPI schema is made from them); `to_representation` reads
them by a plan, made once per class from those fields:

- a plain value (integer, string, boolean, choice, dictionary, JSON) is copied, since
  the model's value is already what the field would give;
- a related object's id is read from its `<name>_id` attribute;
- a method field calls its `get_<name>` on this serializer;
- anything else (date-times) goes through its own field's `to_representation`, which
  reads the active time zone when it converts, not when it was built.

`instance` may also be a row of `values(*cls.columns())`, which builds no model at
all. tests/governance/api/test_output_plans.py and tests/scheduler/test_job_output.py
compare every output serializer with DRF's own representation.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.http import QueryDict
from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

_PLAIN = (
    serializers.IntegerField,
    serializers.CharField,
    serializers.BooleanField,
    serializers.ChoiceField,
    serializers.DictField,
    serializers.JSONField,
    serializers.ReadOnlyField,
)
# A step of a plan: (output name, attribute path, its `values()` column, conversion or
# None, method name or None).
Step = tuple[str, list[str], str, object, str | None]


def _step(name: str, field: serializers.Field) -> Step:
    if isinstance(field, serializers.SerializerMethodField):
        return name, [], "", None, field.method_name
    if isinstance(field, serializers.PrimaryKeyRelatedField):
        return name, [f"{field.source}_id"], f"{field.source}_id", None, None
    if isinstance(field, (serializers.BaseSerializer, serializers.ManyRelatedField)):
        raise TypeError(f"{name}: a nested or many-related field has no read plan")
    if field.source == "*":
        raise TypeError(f"{name}: a field of the whole object has no read plan")
    convert = None if isinstance(field, _PLAIN) else field.to_representation
    return name, field.source.split("."), field.source.replace(".", "__"), convert, None


class OutputSerializer(serializers.ModelSerializer):
    @classmethod
    def read_plan(cls) -> list[Step]:
        plan = cls.__dict__.get("_plan_cache")
        if plan is None:
            plan = [_step(name, field) for name, field in cls().fields.items()]
            cls._plan_cache = plan  # on this very class: a subclass has fields of its own
        return plan

    @classmethod
    def columns(cls) -> list[str]:
        """The `values()` columns a row needs for `to_representation` (no method fields)."""
        return [column for _, _, column, _, method in cls.read_plan() if method is None]

    def to_representation(self, instance) -> dict:
        out = {}
        if isinstance(instance, Mapping):
            for name, _, column, convert, method in self.read_plan():
                if method is not None:
                    value = getattr(self, method)(instance)
                else:
                    value = instance[column]
                    if value is not None and convert is not None:
                        value = convert(value)
                out[name] = value
            return out
        for name, path, _, convert, method in self.read_plan():
            if method is not None:
                out[name] = getattr(self, method)(instance)
                continue
            value = instance
            for attr in path:
                value = getattr(value, attr)
                if value is None:
                    break
            out[name] = value if value is None or convert is None else convert(value)
        return out


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="The first problem, as 'field: message'.")
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Field name -> messages.",
    )


class RefuseUnknownFields:
    """Mix into a write serializer (before `serializers.Serializer`): a body key it does
    not declare as a writable field is a 400 naming that key, never silently dropped.

    A client that misspells a field, or sends one it believes exists (`environment`,
    `run_as`), learns that it had no effect instead of getting a 201 for a request other
    than the one it made. Each unknown key gets `unknown_field_message`, or its own
    message from `refused_fields`; the other fields' errors are reported with them. In a
    list (`many=True`) each item is checked, so the error path names the item's index
    ("jobs[1].environment"). The schema documents `additionalProperties: false`.
    """

    unknown_field_message = "not a field of this request"
    refused_fields: Mapping[str, str] = {}
    # The browsable API's HTML form posts its CSRF token with the fields.
    _FORM_KEYS = frozenset({"csrfmiddlewaretoken"})

    def unknown_fields(self, data) -> dict[str, list[str]]:
        if not isinstance(data, Mapping):
            return {}  # not an object: the serializer itself says so
        writable = {name for name, field in self.fields.items() if not field.read_only}
        form = self._FORM_KEYS if isinstance(data, QueryDict) else frozenset()
        return {
            str(key): [self.refused_fields.get(key, self.unknown_field_message)]
            for key in data
            if key not in writable and key not in form
        }

    def to_internal_value(self, data):
        unknown = self.unknown_fields(data)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as error:
            if unknown and isinstance(error.detail, dict):
                raise serializers.ValidationError({**unknown, **error.detail}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class _RefuseUnknownFieldsSchema(OpenApiSerializerExtension):
    """The request schema of a RefuseUnknownFields serializer says what it enforces."""

    target_class = RefuseUnknownFields
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema["additionalProperties"] = False
        return schema
