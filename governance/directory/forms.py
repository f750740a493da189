"""The directory page's form: one new mapping. Its problems come from the service
(services._validate_mapping), each next to the field it names."""

from __future__ import annotations

from django import forms

from core.permissions import ROLE_LABELS, ROLES
from fleet.models import JobQueue, Team
from governance.directory.models import GroupMapping


class MappingForm(forms.Form):
    group = forms.CharField(
        label="Directory group",
        max_length=255,
        required=False,
        help_text=(
            "The group's name as the directory gives it (LDAP: its cn, e.g. ml-leads) or "
            "its full DN. Members of groups nested inside it count as its members."
        ),
    )
    kind = forms.ChoiceField(
        label="Gives",
        choices=GroupMapping.Kind.choices,
        widget=forms.RadioSelect,
        initial=GroupMapping.Kind.ROLE,
    )
    role = forms.ChoiceField(
        label="Which role",
        required=False,
        choices=[("", "—")] + [(role, ROLE_LABELS[role]) for role in ROLES],
        help_text="For “Role”: the role the group's members hold.",
    )
    team = forms.ModelChoiceField(
        label="Which team",
        required=False,
        queryset=Team.objects.order_by("name"),
        empty_label="—",
        help_text="For “Team member” and “Team lead”: the team the group's members join.",
    )
    queue = forms.ModelChoiceField(
        label="Which queue",
        required=False,
        queryset=JobQueue.objects.order_by("name"),
        empty_label="—",
        help_text="For “Exception owner of a queue”: the queue whose requests they decide.",
    )
