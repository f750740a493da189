"""Pickers that narrow each other: each option says which values of another picker it
goes with, and static/js/app.js hides the others when that picker changes (a share's
options follow the chosen team, a team's the chosen queue). The page stays one form and
one source of data; without JavaScript every option shows, and the server refuses a
choice that does not fit, naming the field.

    team = forms.ModelChoiceField(queryset=..., widget=NarrowedSelect(
        narrow_by="id_queue", mapping=lambda: team_queue_ids()))

Each option of a model choice gets `data-narrow-by` (the HTML id of the other picker)
and `data-narrow` (the other picker's values it fits, space-separated): from
`attribute` of the option's row (e.g. "team_id", "share.team_id"), or from `mapping()`,
a dict of option value -> values computed once per render.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from django import forms


class NarrowedChoices:
    def __init__(
        self,
        *args,
        narrow_by: str,
        attribute: str | None = None,
        mapping: Callable[[], dict[Any, Iterable]] | None = None,
        **kwargs,
    ):
        if (attribute is None) == (mapping is None):
            raise ValueError("give one of attribute and mapping")
        self.narrow_by = narrow_by
        self.attribute = attribute
        self.mapping = mapping
        self._map: dict = {}
        super().__init__(*args, **kwargs)

    def optgroups(self, name, value, attrs=None):
        self._map = (
            {str(key): values for key, values in self.mapping().items()} if (self.mapping) else {}
        )
        return super().optgroups(name, value, attrs)

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        key = getattr(value, "value", value)
        if key in ("", None):
            return option
        if self.attribute is not None:
            instance = getattr(value, "instance", None)
            values = [] if instance is None else [attrgetter(self.attribute)(instance)]
        else:
            values = self._map.get(str(key), ())
        option["attrs"]["data-narrow-by"] = self.narrow_by
        option["attrs"]["data-narrow"] = " ".join(sorted({str(v) for v in values if v}))
        return option


class NarrowedSelect(NarrowedChoices, forms.Select):
    """A select whose options follow another picker's choice."""


class NarrowedCheckboxes(NarrowedChoices, forms.CheckboxSelectMultiple):
    """Checkboxes that follow another picker's choice."""
