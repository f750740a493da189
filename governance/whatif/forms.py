"""Forms of the what-if pages. They parse; the rules live in governance.whatif.services.

Draft shares are edited with the share editor's own ShareForm (governance.policy.forms), so
the fields, their parsing and their messages are the same as for a live share.
"""

from __future__ import annotations

import datetime as dt

from django import forms

from core.bounds import MAX_TEXT
from fleet.models import JobQueue, QuotaShare, Team
from governance.models import ExceptionRequest, KnowledgeArticle, WhatIfComparison
from governance.policy.forms import BoundedModelMultipleChoiceField, ShareForm
from governance.policy.workload_classes import MAX_CONTRACT_SECONDS
from governance.whatif import workloads


def draft_share_form(comparison: WhatIfComparison, index: int, data=None) -> ShareForm:
    """The share editor's form, filled from share `index` of the draft (not the live share)."""
    queue = comparison.queue
    form = ShareForm(data, queue=queue)
    if data is None:
        doc = comparison.draft_policy["shares"][index]
        team = Team.objects.filter(name=doc.get("team")).first()
        form.initial = {
            "name": doc["name"],
            "team": team.pk if team else None,
            "strategy": doc["strategy"],
            "borrow_limit": doc.get("borrow_limit"),
            "in_share_preemption": doc.get("in_share_preemption", False),
            "state": doc.get("state", QuotaShare.State.ENABLED),
        }
        for row, (type_name, instances) in zip(
            form.limit_rows, doc["capacity_limits"].items(), strict=False
        ):
            row.initial = {"instance_type": type_name, "max_instances": instances}
    # The reason is asked when the draft is applied, not for each draft edit.
    del form.fields["reason"]
    return form


class CreateForm(forms.Form):
    queue = forms.ModelChoiceField(
        label="Queue", queryset=JobQueue.objects.order_by("name"), empty_label=None
    )
    title = forms.CharField(
        label="Title", required=False, max_length=200, help_text="Optional; e.g. what you try."
    )
    exception_request = forms.ModelChoiceField(
        queryset=ExceptionRequest.objects.all(), required=False, widget=forms.HiddenInput
    )


class WorkloadForm(forms.Form):
    kind = forms.ChoiceField(
        label="Workload",
        choices=WhatIfComparison.Workload.choices,
        widget=forms.RadioSelect,
        initial=WhatIfComparison.Workload.RECORDED,
    )
    start = forms.DateField(
        label="From",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Recorded jobs: the first day, from 00:00 UTC (default: the 30 days up to "
        "the queue's last submission). "
        "Philly trace: 2017-09-04 to 2017-12-22 (default 2017-10-01).",
    )
    days = forms.FloatField(
        label="Days",
        required=False,
        min_value=0.01,
        max_value=120,
        initial=workloads.DEFAULT_DAYS,
        help_text="How many days from the first day.",
    )
    scale = forms.FloatField(
        label="GPU demand scale (traces)",
        required=False,
        initial=1.0,
        help_text="Multiplies each trace job's GPUs, to fit the trace to this fleet.",
    )
    upload = forms.FileField(
        label="Trace CSV (for an upload)",
        required=False,
        help_text="Columns timestamp,duration,num_gpus,gpu_time,cluster (the Philly format). "
        "Each cluster is a team: it goes to the share named like it (or vc-<cluster>); "
        "you see and change the mapping before the run.",
    )

    # The start the page showed, and the kind of workload it was for (hidden).
    start_of_kind = forms.CharField(required=False, widget=forms.HiddenInput)
    start_shown = forms.CharField(required=False, widget=forms.HiddenInput)

    def clean(self):
        data = super().clean()
        start = data.get("start")
        if (
            start is not None
            and data.get("kind")
            and data.get("start_of_kind")
            and data["kind"] != data["start_of_kind"]
            and start.isoformat() == data.get("start_shown")
        ):
            # Another kind chosen, the start left as shown: it was the other kind's
            # start, so this kind's own default applies.
            data["start"] = None
        problem = workload_start_problem(data.get("start"), data.get("days"))
        if problem:
            self.add_error("start", problem)
        return data


LEAVE_OUT = ""


class MappingForm(forms.Form):
    """Which share each team of the workload sends its jobs to: one select per team,
    in the stored mapping's order (most jobs first); "leave out" drops its jobs."""

    def __init__(self, *args, comparison: WhatIfComparison, **kwargs):
        super().__init__(*args, **kwargs)
        shares = [share["name"] for share in comparison.current_policy["shares"]]
        choices = [(LEAVE_OUT, "— leave its jobs out —"), *((name, name) for name in shares)]
        self.teams = []
        for number, entry in enumerate((comparison.share_mapping or {}).get("teams", [])):
            name = f"team_{number}"
            self.fields[name] = forms.ChoiceField(
                label=entry["team"],
                choices=choices,
                required=False,
                initial=entry["share"] or LEAVE_OUT,
                error_messages={
                    "invalid_choice": "no share named '%(value)s' in the cloned policy"
                },
            )
            self.teams.append((name, entry))

    def rows(self):
        """(bound field, mapping entry) per team, for the page's table."""
        return [(self[name], entry) for name, entry in self.teams]

    def mapping(self) -> dict[str, str]:
        return {entry["team"]: self.cleaned_data[name] for name, entry in self.teams}

    def field_of(self, team: str) -> str | None:
        return next((name for name, entry in self.teams if entry["team"] == team), None)


def workload_start_problem(start: dt.date | None, days: float | None) -> str | None:
    """Why `start` cannot begin a workload of `days` (the form and the API ask it)."""
    if start is None:
        return None
    try:
        dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC) + dt.timedelta(
            days=days or workloads.DEFAULT_DAYS
        )
    except OverflowError:
        return "too late: the workload would end after the year 9999"
    return None


class SaveForm(forms.Form):
    title = forms.CharField(label="Title", max_length=200)
    note = forms.CharField(
        label="Note",
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What this comparison shows, for whoever reads it later.",
    )
    articles = BoundedModelMultipleChoiceField(
        label="Attach to knowledge articles",
        queryset=KnowledgeArticle.objects.order_by("title"),
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 4}),
    )
    exception_requests = BoundedModelMultipleChoiceField(
        label="Attach to exception requests",
        queryset=ExceptionRequest.objects.order_by("-id"),
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 4}),
    )


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(
        label="Decision",
        choices=[("approve", "Approve"), ("reject", "Send back")],
        widget=forms.RadioSelect,
    )
    note = forms.CharField(
        label="Note to the author",
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Required when you send the draft back.",
    )


class ApplyForm(forms.Form):
    reason = forms.CharField(
        label="Reason for this change",
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Recorded in the policy history with your name and a link to this comparison.",
    )


CONTRACT_FIELD_NAMES = (
    "min_runtime_reclaim",
    "min_runtime_preempt",
    "grace",
    "checkpoint_on_notice",
)


class _ContractFields(forms.Form):
    """One interruption contract for one run of the comparison (spec v2, V1); a blank
    field is no override. The bounds are the service's (contracts_clean), shown early."""

    run = forms.ChoiceField(
        choices=[("current", "Current policy"), ("draft", "Draft policy")], label="Run"
    )
    min_runtime_reclaim = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_CONTRACT_SECONDS,
        label="Minimum runtime before reclaim (seconds)",
    )
    min_runtime_preempt = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_CONTRACT_SECONDS,
        label="Minimum runtime before in-share preemption (seconds)",
    )
    grace = forms.IntegerField(
        required=False, min_value=0, max_value=MAX_CONTRACT_SECONDS, label="Grace: notice (seconds)"
    )
    checkpoint_on_notice = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_CONTRACT_SECONDS,
        label="Checkpoint on notice: seconds to save and exit (blank: it does not)",
    )

    def contract(self) -> dict:
        return {
            name: self.cleaned_data[name]
            for name in CONTRACT_FIELD_NAMES
            if self.cleaned_data.get(name) is not None
        }


class ContractForm(_ContractFields):
    """One share's contract: the replayed jobs of the share get it."""

    share = forms.ChoiceField(label="Share (its jobs get the contract)")
    field_order = ["run", "share"]

    def __init__(self, *args, comparison: WhatIfComparison, **kwargs):
        super().__init__(*args, **kwargs)
        names = [share["name"] for share in comparison.current_policy["shares"]]
        self.fields["share"].choices = [(name, name) for name in names]


class ClassContractForm(_ContractFields):
    """One workload class's contract: the replayed jobs of the class get it (a recorded
    job's class is the one it copied at submission, a trace job's its share's default)."""

    workload_class = forms.ChoiceField(
        label="Workload class (its jobs get the contract)",
        error_messages={
            "invalid_choice": "no workload class named '%(value)s': choose one of the list"
        },
    )
    field_order = ["run", "workload_class"]

    def __init__(self, *args, classes: list[tuple[str, int]], **kwargs):
        """`classes`: (name, jobs of the workload in it) of every class the service
        accepts (selectors.workload_class_names)."""
        # The page shows the share form beside it, with the same field names: other ids.
        kwargs.setdefault("auto_id", "id_class_%s")
        super().__init__(*args, **kwargs)
        self.fields["workload_class"].choices = [
            (name, f"{name} ({jobs:,} job{'s' if jobs != 1 else ''} in this workload)")
            for name, jobs in classes
        ]
