"""Two versions of one policy object, field by field, as its editor's form sees them.

When an admin saves on top of a version someone else saved meanwhile, the service
raises VersionConflict. What differs is read from the editor's form itself, never
from a hand-kept list: every field of the form (but its version and reason), plus its
inline limit rows when it has them, compared on their parsed values between the
stored version (the form as it opens on the object now) and the admin's submission.
A field added to the form later is compared without any change here.

The merge takes, field by field, the admin's input or the stored value and returns
the POST data of that merged form; saving it is an ordinary save through the form
(reason required, review or apply, history), based on the version the admin saw, so
a third save in between is a conflict again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from django import forms
from django.http import QueryDict

from governance.policy.history_views import display_value, field_label

# Fields of every policy form that are not part of the object.
CONTROL_FIELDS = frozenset({"version", "reason"})
# The conflict screen's own inputs, on top of the submission it carries.
MERGE_PREFIX = "merge-"
MERGE_SAVE = "merge"
MERGE_ALL = "merge_all"
MINE, THEIRS = "mine", "theirs"

# The editor's form on the object as stored now: unbound (None) or bound to the data.
FormFor = Callable[[QueryDict | None], forms.Form]


@dataclass(frozen=True)
class FieldDiff:
    """One field that differs: its form name, label, and both values as people read them."""

    name: str
    label: str
    theirs: str
    mine: str


@dataclass(frozen=True)
class _Part:
    name: str
    label: str
    html_names: tuple[str, ...]


def _limits_name(form) -> str:
    return getattr(form, "limits_name", "capacity_limits")


def _parts(form) -> list[_Part]:
    """The editable parts of `form`: its fields, then its limit rows as one part."""
    parts = [
        _Part(name, bf.label or field_label(name), (bf.html_name,))
        for name, bf in ((bf.name, bf) for bf in form)
        if name not in CONTROL_FIELDS
    ]
    rows = getattr(form, "limit_rows", None)
    if rows is not None:
        name = _limits_name(form)
        parts.append(
            _Part(
                name,
                getattr(form, "limits_label", None) or field_label(name),
                tuple(bf.html_name for row in rows for bf in row),
            )
        )
    return parts


def part_names(form) -> list[str]:
    return [part.name for part in _parts(form)]


def _encode(bf) -> list[str]:
    """The POST values that give an unbound bound-field's initial value back."""
    value = bf.value()
    widget = bf.field.widget
    if isinstance(widget, forms.CheckboxInput):
        return ["on"] if value and value not in ("False", "false", "0") else []
    if getattr(widget, "allow_multiple_selected", False):
        return [str(item) for item in value or []]
    return [] if value is None else [str(value)]


def form_data(form) -> dict[str, list[str]]:
    """The POST data of an unbound form as it opens (the stored version)."""
    data = {bf.html_name: _encode(bf) for bf in form}
    for row in getattr(form, "limit_rows", []):
        data.update({bf.html_name: _encode(bf) for bf in row})
    return data


def _as_querydict(data: Mapping[str, Iterable[str]]) -> QueryDict:
    result = QueryDict(mutable=True)
    for key, values in data.items():
        result.setlist(key, list(values))
    return result


def _cleaned(form, part: _Part):
    if part.name == _limits_name(form) and hasattr(form, "limit_rows"):
        return form.entries()
    return form.cleaned_data.get(part.name, form[part.name].data)


def _shown(form, part: _Part, value) -> str:
    field = form.fields.get(part.name)
    if isinstance(field, forms.ModelMultipleChoiceField):
        value = [str(item) for item in value or []]
    elif isinstance(field, forms.ModelChoiceField):
        value = None if value in (None, "") else str(value)
    elif isinstance(field, forms.MultipleChoiceField):
        labels = dict(field.choices)
        value = [str(labels.get(item, item)) for item in value or []]
    elif isinstance(field, forms.ChoiceField):
        value = str(dict(field.choices).get(value, value)) if value not in (None, "") else None
    elif value == "":
        value = None
    return display_value(part.name, value)


def _comparable(value):
    if isinstance(value, Iterable) and not isinstance(value, str | Mapping):
        return sorted(str(item) for item in value)
    return value


def field_diff(form_for: FormFor, submitted_form) -> list[FieldDiff]:
    """Every editable field whose parsed value differs between the stored version
    (`form_for(None)`: the editor as it opens on the object now) and `submitted_form`
    (the admin's input, validated). The stored values are parsed by the same form."""
    theirs = form_for(_as_querydict(form_data(form_for(None))))
    theirs.is_valid()
    diffs = []
    for part in _parts(submitted_form):
        stored, mine = _cleaned(theirs, part), _cleaned(submitted_form, part)
        if mine in (None, "") and part.name in getattr(submitted_form, "empty_keeps", ()):
            continue  # empty keeps the stored value: nothing differs
        if _comparable(stored) != _comparable(mine):
            diffs.append(
                FieldDiff(
                    part.name,
                    part.label,
                    _shown(theirs, part, stored),
                    _shown(submitted_form, part, mine),
                )
            )
    return diffs


def submission(post: QueryDict) -> QueryDict:
    """The admin's input a conflict screen carries, without its own choices."""
    data = post.copy()
    for key in list(data):
        if key.startswith(MERGE_PREFIX) or key in (MERGE_SAVE, MERGE_ALL, "csrfmiddlewaretoken"):
            del data[key]
    return data


def choices(post: Mapping, names: Iterable[str]) -> dict[str, str]:
    """Per field, "mine" or "theirs" (mine unless said otherwise; "take all" wins)."""
    every = post.get(MERGE_ALL)
    return {
        name: every if every in (MINE, THEIRS) else post.get(MERGE_PREFIX + name, MINE)
        for name in names
    }


def merged_data(
    submitted: QueryDict, stored_form, *, take_theirs: Iterable[str], version: int
) -> QueryDict:
    """The POST data of the merge: the admin's input with the fields of `take_theirs`
    replaced by the stored version's values (`stored_form`: unbound, on the object as
    stored), based on `version`."""
    stored = form_data(stored_form)
    parts = {part.name: part for part in _parts(stored_form)}
    data = submitted.copy()
    for name in take_theirs:
        part = parts.get(name)
        if part is None:
            continue
        names = set(part.html_names) | {
            key for key in data if name == _limits_name(stored_form) and _is_row_key(key, part)
        }
        for key in names:
            data.setlist(key, stored.get(key, []))
    data["version"] = str(version)
    return data


def _is_row_key(key: str, part: _Part) -> bool:
    prefixes = {name.rsplit("-", 1)[0] for name in part.html_names}
    return any(key.startswith(prefix.rsplit("-", 1)[0] + "-") for prefix in prefixes)
