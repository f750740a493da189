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
