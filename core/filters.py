"""Typed query-string filters (django-filter) for the API's list operations and the pages.

A filter parses and bounds its parameter: an id is a whole number from 1 to 2^63-1, a
name fits its column and holds no NUL byte, a choice is one of the choices. Anything
else is a 400 naming the parameter (the API) or, on a page, a filter that is left out
and named next to its field (`page_query`), never a failed query. The OpenAPI schema
takes each parameter's type, bounds and enum from here. The API's and the pages'
FilterSets live with their features (governance.filters, scheduler.filters,
governance.<feature>.filters) and are built from these, so that a page and the API give
their selector the same values.
"""

from __future__ import annotations

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.bounds import MAX_ID

ID_MESSAGES = {
    "invalid": "must be a whole number (an id)",
    "min_value": f"must be an id from 1 to {MAX_ID}",
    "max_value": f"must be an id from 1 to {MAX_ID}",
}


def id_filter(field_name: str | None, help_text: str, **kwargs) -> django_filters.Filter:
    """An id parameter: 1 to 2^63-1 (the 64-bit primary keys)."""
    filter_ = django_filters.NumberFilter(
        field_name=field_name,
        min_value=1,
        max_value=MAX_ID,
        error_messages=ID_MESSAGES,
        help_text=help_text,
        **kwargs,
    )
    filter_.field_class = forms.IntegerField
    schema = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text=help_text)
    return extend_schema_field(schema)(filter_)


def name_filter(field_name: str | None, help_text: str, *, max_length: int, **kwargs):
    """A name parameter, at most as long as the column it is compared with."""
    filter_ = django_filters.CharFilter(
        field_name=field_name, max_length=max_length, help_text=help_text, **kwargs
    )
    schema = {"type": "string", "maxLength": max_length, "description": help_text}
    return extend_schema_field(schema)(filter_)


def choice_filter(field_name: str, choices, help_text: str) -> django_filters.ChoiceFilter:
    return django_filters.ChoiceFilter(field_name=field_name, choices=choices, help_text=help_text)


class ModelChoiceFilter(django_filters.ModelChoiceFilter):
    """A page's choice of one row from a list, labelled by `label_from_instance` when
    given. The chosen row's id is what a selector gets (see `page_query`)."""

    def __init__(self, *args, label_from_instance=None, **kwargs):
        self.label_from_instance = label_from_instance
        super().__init__(*args, **kwargs)

    @property
    def field(self):
        field = super().field
        if self.label_from_instance is not None:
            field.label_from_instance = self.label_from_instance
        return field


class FilterSet(django_filters.FilterSet):
    """A FilterSet whose form class is made once per class. django-filter makes a new
    form class, with new fields, for every FilterSet it makes, which cost more than the
    rest of a short list request. The fields depend only on the filters the class
    declares, so one class serves every request; each form still gets its own copies
    of the fields. A FilterSet whose instances change their filters (choices of the
    user's) sets `shared_form = False`."""

    shared_form = True

    def get_form_class(self):
        if not self.shared_form:
            return super().get_form_class()
        form_class = type(self).__dict__.get("_form_class")
        if form_class is None:
            form_class = super().get_form_class()
            # Set on this very class: a subclass declares filters of its own.
            type(self)._form_class = form_class
        return form_class


def page_query(filterset: django_filters.FilterSet) -> dict:
    """A page's filters, parsed and bounded, for a selector that filters by itself: the
    given ones by name, a chosen row as its id. An invalid one is left out, and the form
    (filterset.form) shows its error next to its field."""
    if not filterset.is_bound:
        return {}
    filterset.is_valid()
    return {
        name: getattr(value, "pk", value)
        for name, value in filterset.form.cleaned_data.items()
        if value not in (None, "")
    }


def query_id(params, name: str) -> int | None:
    """One id from a page's query string, or None when it is absent or not a valid id."""
    field = forms.IntegerField(min_value=1, max_value=MAX_ID, required=False)
    try:
        return field.clean(params.get(name))
    except forms.ValidationError:
        return None
