"""Forms of the job pages: they parse input and call scheduler.services.

Every rule, and its message, lives in the services; a form puts each `JobError`
message next to the field it names.
"""

from __future__ import annotations

from django import forms

from governance.models import InstanceType, JobQueue, QuotaShare, Team, UrgencyDefinition
from scheduler.models import Job, JobDecision
from scheduler.permissions import submittable_shares
from scheduler.services.jobs import JobData, JobError


class ShareChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj):
        return f"{obj.queue.name} / {obj.name} ({obj.team.name})"


def apply_errors(form: forms.Form, error: JobError) -> None:
    for key, messages in error.errors.items():
        name = key if key in form.fields else None
        for message in messages:
            form.add_error(name, message)


class JobForm(forms.Form):
    share = ShareChoiceField(queryset=QuotaShare.objects.none(), help_text="Queue / share (team).")
    name = forms.CharField(max_length=200)
    instance_type = forms.ModelChoiceField(
        queryset=InstanceType.objects.order_by("name"), to_field_name="name"
    )
    instances = forms.IntegerField(min_value=1, initial=1)
    expected_duration = forms.IntegerField(
        min_value=1, label="Expected duration (seconds)", help_text="Compute time if never stopped."
    )
    priority = forms.IntegerField(
        min_value=0,
        max_value=9999,
        required=False,
        help_text="0–9999, higher first. Empty: the urgency's priority, or 0.",
    )
    urgency = forms.ModelChoiceField(
        queryset=UrgencyDefinition.objects.order_by("-priority", "name"),
        required=False,
        help_text="A shared urgency definition grants its priority.",
    )
    checkpoint_interval = forms.IntegerField(
        min_value=1,
        required=False,
        label="Checkpoint interval (seconds)",
        help_text="Progress is saved this often; empty: never.",
    )
    restart_overhead = forms.IntegerField(
        min_value=0,
        initial=0,
        label="Restart overhead (seconds)",
        help_text="Loading time of a restarted job before it progresses again.",
    )
    preemption_retries = forms.IntegerField(
        min_value=0,
        required=False,
        label="Retry bound",
        help_text="Preemptions it survives before it fails; empty: the queue's default.",
    )
    command = forms.CharField(
        required=False,
        widget=forms.TextInput,
        help_text="What to run, for queues that run real processes "
        "(e.g. python -m scheduler.examples.train --steps 60).",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["share"].queryset = submittable_shares(user)

    def data_for_service(self) -> JobData:
        data = self.cleaned_data
        return JobData(
            share=data["share"],
            name=data["name"],
            instance_type=data["instance_type"],
            instances=data["instances"],
            expected_duration=data["expected_duration"],
            priority=data["priority"],
            urgency=data["urgency"],
            checkpoint_interval=data["checkpoint_interval"],
            restart_overhead=data["restart_overhead"] or 0,
            preemption_retries=data["preemption_retries"],
            command=data["command"],
        )


class JobFilterForm(forms.Form):
    queue = forms.ModelChoiceField(
        queryset=JobQueue.objects.order_by("name"), required=False, empty_label="All queues"
    )
    share = ShareChoiceField(
        queryset=QuotaShare.objects.select_related("queue", "team").order_by(
            "queue__name", "position", "pk"
        ),
        required=False,
        empty_label="All shares",
    )
    team = forms.ModelChoiceField(
        queryset=Team.objects.order_by("name"), required=False, empty_label="All teams"
    )
    state = forms.ChoiceField(choices=[("", "All states"), *Job.State.choices], required=False)

    def filters(self) -> dict:
        if not self.is_valid():
            return {}
        return {
            key: getattr(value, "pk", value) for key, value in self.cleaned_data.items() if value
        }


class PriorityForm(forms.Form):
    priority = forms.IntegerField(min_value=0, max_value=9999, label="New priority")


class DecisionForm(forms.Form):
    kind = forms.ChoiceField(
        choices=JobDecision.Kind.choices, widget=forms.RadioSelect, label="Decision"
    )
    share = ShareChoiceField(
        queryset=QuotaShare.objects.none(),
        required=False,
        label="Resubmit into share",
        help_text="Empty: the same share.",
    )
    preemption_retries = forms.IntegerField(
        min_value=0, required=False, label="New retry bound", help_text="Empty: keep it."
    )
    note = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Note",
        help_text="Required to close: say why.",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["share"].queryset = submittable_shares(user)

    def resubmit_changes(self) -> dict:
        changes = {}
        if self.cleaned_data.get("share") is not None:
            changes["share"] = self.cleaned_data["share"]
        if self.cleaned_data.get("preemption_retries") is not None:
            changes["preemption_retries"] = self.cleaned_data["preemption_retries"]
        return changes
