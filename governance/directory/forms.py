"""The directory page's forms: one new mapping, and a mapping's removal, each with the
reason every policy write asks for. Their problems come from the service
(services.mapping_create / mapping_delete), each next to the field it names."""

from __future__ import annotations

from django import forms

from core.bounds import MAX_TEXT
from core.permissions import ROLE_LABELS, ROLES
from fleet.models import JobQueue, Team
from governance.directory.models import GroupMapping
from governance.policy.forms import REASON_HELP, REASON_LABEL, ServiceCharField


def _reason_field() -> ServiceCharField:
    # Shown as required; the service says when it is missing, with the other problems.
    return ServiceCharField(
        label=REASON_LABEL,
        max_length=MAX_TEXT,
        help_text=REASON_HELP,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


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
    reason = _reason_field()

    use_required_attribute = False


class MappingDeleteForm(forms.Form):
    """A mapping's removal: why (the history records it)."""

    reason = _reason_field()

    use_required_attribute = False
