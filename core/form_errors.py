"""Domain errors onto a form: the one place pages turn a service's `errors` into form errors.

A message goes next to the field its key names; a key the form has no visible field for
(NON_FIELD, "state", a hidden "version", a nested "capacity.ml.g5") goes on the form
itself, prefixed with its key when `labelled` (forms whose keys are paths a reader needs,
as the job forms' "parameters.steps"). No page reads an error's text.
"""

from __future__ import annotations

from collections.abc import Mapping

from django import forms

from core.errors import NON_FIELD, DomainError


def apply_errors(
    form: forms.Form,
    error: DomainError | Mapping[str, list[str]],
    *,
    labelled: bool = False,
    skip_fields_in_error: bool = False,
) -> None:
    """Add each message of `error` (a domain error or its `errors` mapping) to `form`.

    `skip_fields_in_error` leaves out the messages of a field that has an error already
    (the form's own "This field is required" says it first)."""
    errors = error.errors if isinstance(error, DomainError) else error
    for key, messages in errors.items():
        if skip_fields_in_error and key in form.errors:
            continue
        field = form.fields.get(key)
        target = key if field is not None and not field.widget.is_hidden else None
        for message in messages:
            if target is None and labelled and key != NON_FIELD:
                message = f"{key}: {message}"
            form.add_error(target, message)
