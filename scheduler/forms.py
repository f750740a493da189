"""Forms of the job and job definition pages: they parse input and call
scheduler.services.

Every rule, and its message, lives in the services; a form puts each `JobError` or
`DefinitionError` message next to the field it names (`parameters.steps` on the
parameter's own field, `parameters[1].max` on the second parameter row).
"""

from __future__ import annotations

import re

from django import forms
from django.urls import reverse

from core.bounds import MAX_TEXT
from core.form_errors import apply_errors
from fleet.models import (
    InstanceType,
    Job,
    JobDefinition,
    JobDefinitionRevision,
    JobQueue,
    QuotaShare,
    UrgencyDefinition,
    WorkloadClass,
)
from scheduler import selectors
from scheduler.models import JobDecision
from scheduler.permissions import submittable_shares
from scheduler.services import job_definitions as definitions
from scheduler.services.jobs import JobData, JobError, job_preview


class ShareChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj):
        return f"{obj.queue.name} / {obj.name} ({obj.team.name})"


def _labelled(key: str, message: str) -> str:
    return message if key == "non_field_errors" else f"{key}: {message}"


PARAMETER_PREFIX = "parameters."


class DefinitionChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj):
        return f"{obj.name} (revision {obj.latest.revision})"


def _parameter_field(spec: dict) -> forms.Field:
    """A text field per parameter: the service checks the value and words the error."""
    summary = selectors.parameter_summary(spec).split(": ", 1)[1]
    help_text = f"{spec['description']} ({summary})" if spec.get("description") else summary
    if spec["type"] == "choice":
        blank = f"Default: {spec['default']}" if "default" in spec else "Choose…"
        widget = forms.Select(choices=[("", blank)] + [(c, c) for c in spec["choices"]])
    elif spec["type"] == "integer":
        widget = forms.TextInput(attrs={"inputmode": "numeric"})
    else:
        widget = forms.TextInput()
    return forms.CharField(
        label=spec["name"],
        required=False,
        strip=False,
        max_length=definitions.MAX_VALUE_LENGTH,
        widget=widget,
        help_text=help_text,
    )


class JobForm(forms.Form):
    """Submit a job: a definition, its parameters, the share, and what may override the
    definition's defaults. The parameter fields are the chosen revision's."""

    definition = DefinitionChoiceField(
        queryset=JobDefinition.objects.none(),
        label="Job definition",
        help_text="What the job runs: a definition an admin registered. Its parameters are below.",
    )
    revision = forms.IntegerField(widget=forms.HiddenInput, required=False)
    share = ShareChoiceField(queryset=QuotaShare.objects.none(), help_text="Queue / share (team).")
    name = forms.CharField(max_length=200)
    instance_type = forms.ModelChoiceField(
        queryset=InstanceType.objects.order_by("name"),
        to_field_name="name",
        required=False,
        empty_label="The definition's",
    )
    instances = forms.IntegerField(
        min_value=1, required=False, help_text="Empty: the definition's."
    )
    expected_duration = forms.IntegerField(
        min_value=1,
        required=False,
        label="Expected duration (seconds)",
        help_text="Compute time if never stopped. Empty: the definition's.",
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
        help_text="Progress is saved this often. Empty: the definition's.",
    )
    restart_overhead = forms.IntegerField(
        min_value=0,
        required=False,
        label="Restart overhead (seconds)",
        help_text="Loading time of a restarted job before it progresses again. "
        "Empty: the definition's.",
    )
    preemption_retries = forms.IntegerField(
        min_value=0,
        required=False,
        label="Retry bound",
        help_text="Preemptions it survives before it fails; empty: the queue's default.",
    )
    confirm_too_big = forms.BooleanField(
        required=False,
        label="Submit it anyway: it can never start as it is and goes straight to the jobs "
        "that need a decision",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        shares = submittable_shares(user)
        self.fields["share"].queryset = shares
        self.definitions = selectors.submittable_definitions(
            set(shares.values_list("queue_id", flat=True))
        )
        self.fields["definition"].queryset = JobDefinition.objects.filter(
            pk__in=[definition.pk for definition in self.definitions]
        ).order_by("name")
        # The ModelChoiceField's labels read `.latest`: give it the loaded objects.
        self.fields["definition"].choices = [("", "Choose a definition…")] + [
            (definition.pk, self.fields["definition"].label_from_instance(definition))
            for definition in self.definitions
        ]
        self.chosen_revision = self._chosen_revision()
        if self.chosen_revision is not None:
            self.fields["definition"].widget.attrs.update(
                {
                    # Choosing another definition swaps in its parameter fields.
                    "hx-get": reverse("job-create"),
                    "hx-trigger": "change",
                    "hx-target": "#definition-parameters",
                    "hx-swap": "outerHTML",
                    "hx-include": "closest form",
                    # The new definition's latest revision, not the one shown now.
                    "hx-params": "not revision,csrfmiddlewaretoken",
                }
            )
            # The hidden field names the revision whose parameters are shown.
            if self.is_bound:
                self.data = self.data.copy()
                self.data["revision"] = str(self.chosen_revision.revision)
            else:
                self.initial["revision"] = self.chosen_revision.revision
        for spec in self.chosen_revision.parameters if self.chosen_revision else ():
            self.fields[PARAMETER_PREFIX + spec["name"]] = _parameter_field(spec)
            if not self.is_bound and "default" in spec and spec["type"] != "choice":
                self.fields[PARAMETER_PREFIX + spec["name"]].widget.attrs["placeholder"] = str(
                    spec["default"]
                )

    def _chosen(self, name: str):
        return (self.data if self.is_bound else self.initial).get(name)

    def _chosen_revision(self) -> JobDefinitionRevision | None:
        """The revision whose parameters the form shows: the one it was rendered with,
        or the chosen definition's latest."""
        chosen = str(self._chosen("definition") or "")
        definition = next((d for d in self.definitions if str(d.pk) == chosen), None)
        if definition is None:
            return None
        number = str(self._chosen("revision") or "")
        if number.isdigit() and int(number) != definition.latest.revision:
            revision = (
                definition.revisions.select_related("instance_type")
                .filter(revision=int(number))
                .first()
            )
            if revision is not None:
                revision.definition = definition
                return revision
        return definition.latest

    def parameter_fields(self):
        return [self[name] for name in self.fields if name.startswith(PARAMETER_PREFIX)]

    def ask_to_confirm(self, warning: str) -> None:
        """The job is bigger than its queue: say so, and show the confirmation box."""
        self.too_big_warning = warning
        self.add_error(None, warning)

    def confirm_field(self):
        """The confirmation box, shown only after the warning (or while it is ticked)."""
        if getattr(self, "too_big_warning", None) or (
            self.is_bound and self.data.get("confirm_too_big")
        ):
            return self["confirm_too_big"]
        return None

    def other_fields(self):
        """The share, the name and the fields that override the definition's defaults."""
        skip = {"definition", "revision", "confirm_too_big"}
        return [
            self[name]
            for name in self.fields
            if name not in skip and not name.startswith(PARAMETER_PREFIX)
        ]

    def clean(self):
        """The submission's own rules (parameter values, the share's queue, the
        priority ceiling, …) are checked even when some fields failed to parse, so one
        submit shows every error next to its field, never some only after a second."""
        data = super().clean()
        if self.errors:
            problems = self._service_problems()
            apply_errors(self, problems, labelled=True, skip_fields_in_error=True)
        return data

    def _service_problems(self) -> dict[str, list[str]]:
        if self.cleaned_data.get("share") is not None:
            try:
                job_preview(data=self.data_for_service())
            except JobError as error:
                return error.errors
            return {}
        if self.chosen_revision is None:
            return {}
        # Without a share the queue's rules cannot be asked; the parameters can.
        values = self.data_for_service(share=None).parameters
        return definitions.parameters_resolve(revision=self.chosen_revision, values=values)[2]

    def data_for_service(self, **overrides) -> JobData:
        """The job as the service reads it; a field that did not parse is None (the
        definition's default), its own error on the form already."""
        data = self.cleaned_data
        parameters = {
            name.removeprefix(PARAMETER_PREFIX): value
            for name, value in data.items()
            if name.startswith(PARAMETER_PREFIX) and value != ""
        }
        fields = {
            "share": data.get("share"),
            "name": data.get("name", ""),
            "revision": self.chosen_revision,
            "parameters": parameters,
            **{
                name: data.get(name)
                for name in (
                    "instance_type",
                    "instances",
                    "expected_duration",
                    "priority",
                    "urgency",
                    "checkpoint_interval",
                    "restart_overhead",
                    "preemption_retries",
                )
            },
        }
        return JobData(**{**fields, **overrides})


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
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Note",
        help_text="Required to close: say why.",
    )

    def __init__(self, *args, user, job: Job | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["share"].queryset = submittable_shares(user)
        if job is not None and job.definition_revision_id is None:
            # A job recorded from a trace runs no definition: nothing to resubmit.
            self.fields["kind"].choices = [
                (value, label)
                for value, label in JobDecision.Kind.choices
                if value != JobDecision.Kind.RESUBMITTED
            ]

    def resubmit_changes(self) -> dict:
        changes = {}
        if self.cleaned_data.get("share") is not None:
            changes["share"] = self.cleaned_data["share"]
        if self.cleaned_data.get("preemption_retries") is not None:
            changes["preemption_retries"] = self.cleaned_data["preemption_retries"]
        return changes


# Job definitions.


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace("\r", "").split("\n") if line.strip()]


class DefinitionForm(forms.Form):
    """A definition's content. The command is one argument per line; the environment
    one NAME=value per line; parameters come from a ParameterFormSet."""

    name = forms.CharField(
        max_length=128,
        help_text="Lower-case letters, digits, '.', '_' and '-', e.g. train-resnet.",
    )
    description = forms.CharField(
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="What it is for.",
    )
    queues = forms.ModelMultipleChoiceField(
        queryset=JobQueue.objects.order_by("name"),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label="Queues that may run it",
    )
    command = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        label="Command (one argument per line)",
        help_text="The program first, then its arguments, each on its own line; {name} "
        "stands for a parameter's value. No shell runs it: quotes, ; and $ are plain "
        "characters. Empty only for queues that simulate work.",
    )
    environment = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        label="Environment (one NAME=value per line)",
        help_text="Literal values the job gets; the runner adds only PATH, HOME, LANG and "
        "the JOB_ variables. Never the application's settings.",
    )
    instance_type = forms.ModelChoiceField(
        queryset=InstanceType.objects.order_by("name"),
        to_field_name="name",
        required=False,
        empty_label="Each job chooses",
        label="Default instance type",
    )
    instances = forms.IntegerField(initial=1, label="Default instances")
    expected_duration = forms.IntegerField(
        required=False, label="Default expected duration (seconds)"
    )
    checkpoint_interval = forms.IntegerField(
        required=False,
        label="Default checkpoint interval (seconds)",
        help_text="How often the program saves its progress; empty: never.",
    )
    restart_overhead = forms.IntegerField(initial=0, label="Default restart overhead (seconds)")
    stop_grace_seconds = forms.IntegerField(
        initial=10,
        label="Stop grace period (seconds)",
        help_text="Between SIGTERM and SIGKILL when a run is stopped.",
    )
    wall_clock_limit = forms.IntegerField(
        required=False, label="Wall-clock limit (seconds)", help_text="Empty: no limit."
    )
    max_address_space_mb = forms.IntegerField(
        required=False, label="Address space limit (MB)", help_text="Empty: no limit."
    )
    max_cpu_seconds = forms.IntegerField(
        required=False, label="CPU time limit (seconds)", help_text="Empty: no limit."
    )
    network = forms.BooleanField(
        required=False,
        label="Network access",
        help_text="Unticked, the job runs without any network: it cannot reach the "
        "database, Redis or anything else. Tick it only for a program that must download "
        "or talk to a service.",
    )
    workload_class = forms.ModelChoiceField(
        queryset=WorkloadClass.objects.all(),
        required=False,
        empty_label="the share's default class",
        label="Workload class",
        help_text="The interruption contract its jobs copy when submitted (minimum "
        "runtimes, notice, checkpoint on notice).",
    )
    reason = forms.CharField(
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Reason for this change",
        help_text="Recorded in the definition's history. Required.",
    )

    def __init__(self, *args, revise: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        if revise:
            del self.fields["name"]

    def environment_dict(self) -> dict:
        environment = {}
        for number, line in enumerate(_lines(self.cleaned_data["environment"]), start=1):
            name, equals, value = line.partition("=")
            if not equals:
                self.add_error("environment", f"line {number}: write NAME=value")
                continue
            environment[name.strip()] = value
        return environment

    def data_for_service(self, parameters: list[dict]) -> definitions.DefinitionData:
        """The content as the service reads it; a field that did not parse keeps the
        service's default (its own error is on the form already)."""
        data = self.cleaned_data
        given = {
            "command": _lines(data.get("command", "")),
            "parameters": parameters,
            "environment": self.environment_dict() if "environment" in data else {},
        }
        return definitions.DefinitionData(
            queues=list(data.get("queues") or []),
            **{
                name: given.get(name, data.get(name))
                for name in definitions.REVISION_FIELDS
                if name in given or name in data
            },
        )

    def check_all(self, formset) -> tuple[definitions.DefinitionData, list[int]] | None:
        """Validate the form, every parameter row and the service's rules together, so
        one submit shows every error next to its field. Returns (the content, the
        formset row of each parameter) when all is well, else None."""
        if not self.is_bound:  # an empty POST: the blank form again
            return None
        form_ok = self.is_valid()
        rows_ok = formset.is_valid()  # never skipped when the form has errors
        specs, rows = [], []
        for index, row in enumerate(formset.forms):
            parsed = row.is_bound and not row.errors and hasattr(row, "cleaned_data")
            spec = row.spec() if parsed else None
            if spec is not None:
                specs.append(spec)
                rows.append(index)
        data = self.data_for_service(specs)
        if form_ok and rows_ok and self.is_valid():  # the environment lines parsed
            return data, rows
        problems = definitions.definition_problems(
            data=data,
            reason=self.cleaned_data.get("reason", ""),
            name=self.cleaned_data.get("name", "") if "name" in self.fields else None,
            description=self.cleaned_data.get("description", ""),
        )
        problems = {key: value for key, value in problems.items() if key not in self.errors}
        apply_definition_errors(self, formset, definitions.DefinitionError(problems), rows)
        return None

    @staticmethod
    def initial_of(revision: JobDefinitionRevision) -> dict:
        definition = revision.definition
        return {
            "description": definition.description,
            "queues": list(definition.queues.all()),
            "command": "\n".join(revision.command),
            "environment": "\n".join(f"{k}={v}" for k, v in revision.environment.items()),
            "instance_type": revision.instance_type,
            "workload_class": revision.workload_class,
            **{
                name: getattr(revision, name)
                for name in (
                    "instances",
                    "expected_duration",
                    "checkpoint_interval",
                    "restart_overhead",
                    "stop_grace_seconds",
                    "wall_clock_limit",
                    "max_address_space_mb",
                    "max_cpu_seconds",
                    "network",
                )
            },
        }


class ParameterForm(forms.Form):
    name = forms.CharField(max_length=64, required=False)
    type = forms.ChoiceField(
        choices=[("integer", "integer"), ("choice", "one of a list"), ("pattern", "pattern")],
        required=False,
    )
    description = forms.CharField(required=False, max_length=definitions.MAX_DESCRIPTION)
    min = forms.IntegerField(required=False, label="Minimum", help_text="integer")
    max = forms.IntegerField(required=False, label="Maximum", help_text="integer")
    choices = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Values",
        help_text="one of a list: one per line",
    )
    pattern = forms.CharField(
        required=False, strip=False, help_text="pattern: RE2, matched in full"
    )
    default = forms.CharField(required=False, strip=False, help_text="empty: required")

    def spec(self) -> dict | None:
        """The parameter as the service reads it; None for an empty row."""
        data = self.cleaned_data
        if not data.get("name"):
            return None
        spec = {"name": data["name"].strip(), "type": data["type"]}
        if data["description"]:
            spec["description"] = data["description"]
        if data["type"] == "integer":
            spec["min"], spec["max"] = data["min"], data["max"]
        elif data["type"] == "choice":
            spec["choices"] = _lines(data["choices"])
        else:
            spec["pattern"] = data["pattern"]
        if data["default"] != "":
            spec["default"] = data["default"]
        return spec

    @staticmethod
    def initial_of(spec: dict) -> dict:
        return {
            **{key: spec.get(key) for key in ("name", "type", "description", "min", "max")},
            "choices": "\n".join(spec.get("choices", [])),
            "pattern": spec.get("pattern", ""),
            "default": "" if spec.get("default") is None else str(spec["default"]),
        }


ParameterFormSet = forms.formset_factory(
    ParameterForm,
    extra=2,
    max_num=definitions.MAX_PARAMETERS,
    absolute_max=definitions.MAX_PARAMETERS,
)

_ROW_KEY = re.compile(r"parameters\[(\d+)\]\.(\w+)")
_LINE_KEY = re.compile(r"\[(\d+)\]")


def apply_definition_errors(form: DefinitionForm, formset, error, rows: list[int]) -> None:
    """Service errors on the form and the parameter rows; `rows[i]` is the formset
    row of the i-th parameter given to the service."""
    for key, messages in error.errors.items():
        match = _ROW_KEY.fullmatch(key)
        if match and int(match.group(1)) < len(rows):
            row = formset.forms[rows[int(match.group(1))]]
            field = match.group(2) if match.group(2) in row.fields else None
            for message in messages:
                row.add_error(field, message)
            continue
        base = key.split(".", 1)[0].split("[", 1)[0]
        if base not in form.fields:
            for message in messages:
                form.add_error(None, _labelled(key, message))
            continue
        where = key.removeprefix(base)
        line = _LINE_KEY.fullmatch(where)
        if line:
            where = f"line {int(line.group(1)) + 1}"
        for message in messages:
            form.add_error(base, f"{where.lstrip('.')}: {message}" if where else message)


class RetireForm(forms.Form):
    reason = forms.CharField(
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Why retire it",
        help_text="Recorded in its history. It then refuses new jobs; submitted jobs run on.",
    )
