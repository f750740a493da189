"""Bounded input fields for the API serializers.

Every number a client sends must fit the column it ends up in, and every string its
column's length, without a NUL byte (PostgreSQL refuses those in text): otherwise a
write fails in the database as a server error instead of a field error. The bounds are
serializer kwargs, so the OpenAPI schema states them as minimum, maximum and maxLength.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.bounds import MAX_COUNT, MAX_ID, MAX_TEXT

NUL_MESSAGE = "must not contain NUL (\\x00) characters"


def _range_messages(min_value: int, max_value: int, given: dict | None) -> dict:
    # The engine's and the services' wording, so a bound reads like the rule it guards.
    return {
        "min_value": f"must be at least {min_value}",
        "max_value": f"must be at most {max_value}",
        **(given or {}),
    }


def id_field(**kwargs) -> serializers.IntegerField:
    """A database id: 1 to 2^63-1 (a 64-bit primary key)."""
    messages = {"min_value": f"must be an id from 1 to {MAX_ID}"}
    messages["max_value"] = messages["min_value"]
    return serializers.IntegerField(
        min_value=1,
        max_value=MAX_ID,
        error_messages=_range_messages(1, MAX_ID, {**messages, **kwargs.pop("error_messages", {})}),
        **kwargs,
    )


def count_field(*, min_value: int = 1, **kwargs) -> serializers.IntegerField:
    """A count stored in a PositiveIntegerField: at most 2^31-1."""
    return serializers.IntegerField(
        min_value=min_value,
        max_value=MAX_COUNT,
        error_messages=_range_messages(min_value, MAX_COUNT, kwargs.pop("error_messages", None)),
        **kwargs,
    )


def text_field(*, max_length: int = MAX_TEXT, **kwargs) -> serializers.CharField:
    """Free text (DRF's CharField already refuses NUL and lone surrogates)."""
    return serializers.CharField(max_length=max_length, **kwargs)


class BoundedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """An object by id; an id outside 1..2^63-1 is a field error, not a failed query."""

    def __init__(self, **kwargs):
        kwargs.setdefault("pk_field", id_field())
        super().__init__(**kwargs)


def _check_name(field: serializers.Field, value, max_length: int) -> str:
    if not isinstance(value, str):
        field.fail("invalid")
    if "\x00" in value:
        raise serializers.ValidationError(NUL_MESSAGE)
    if len(value) > max_length:
        raise serializers.ValidationError(f"at most {max_length} characters")
    return value


class NameRelatedField(serializers.SlugRelatedField):
    """An object by its name (or username); the lookup only runs on a string that could
    be stored in that column."""

    def __init__(self, *, max_length: int, **kwargs):
        self.max_length = max_length
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        return super().to_internal_value(_check_name(self, data, self.max_length))


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
        "maxProperties": 5,
    }
)
class InstanceMapField(serializers.DictField):
    """{"ml.g5.xlarge": 3}: instance type name -> instances (1 to 2^31-1), at most five
    types. Which names and how many types a map may hold is the policy's rule."""

    child = count_field()
    MAX_TYPES = 5

    def to_internal_value(self, data):
        if isinstance(data, dict):
            for key in data:
                try:
                    _check_name(self, key, 64)
                except serializers.ValidationError as error:
                    raise serializers.ValidationError({str(key)[:64]: error.detail}) from None
            if len(data) > self.MAX_TYPES:
                raise serializers.ValidationError(f"must list 1 to {self.MAX_TYPES} instance types")
        return super().to_internal_value(data)
