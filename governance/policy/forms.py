"""Forms of the policy pages: they collect input and call the services.

A form here parses (a number is a number, a choice is one of the choices) and
nothing more. Every rule, and its message, lives in governance.policy.services;
a form calls the service and puts each `PolicyError` message next to the field
it names, including `capacity_limits.<type>` on the row of that instance type.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from core.bounds import MAX_COUNT, MAX_ID, MAX_TEXT
from core.form_errors import apply_errors
from engine.strategies import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    spoken_list,
    strategy_capabilities,
)
from fleet.models import (
    BORROWING_STRATEGIES,
    InstanceType,
    JobQueue,
    QuotaShare,
    Team,
    WorkloadClass,
)
from fleet.models import UrgencyDefinition as Urgency
from governance.models import PolicyChange
from governance.policy import executor_binding, prices, services, workload_classes
from governance.policy.membership import TeamData, team_save, team_validate
from governance.policy.reviewable import reason_problems
from governance.policy.services import PolicyError, PolicyWrite, ShareData

REASON_LABEL = "Reason for this change"
REASON_HELP = "Recorded in the policy history with your name. Say why, not what."


class CheckedByService:
    """A field shown as required whose "is it there?" rule, and message, belong to the
    service: an empty value passes the form so every problem is reported in one pass."""

    def validate(self, value):
        if value in self.empty_values:
            return
        super().validate(value)


class ServiceCharField(CheckedByService, forms.CharField):
    pass


class ServiceIntegerField(CheckedByService, forms.IntegerField):
    pass


class ServiceTeamField(CheckedByService, forms.ModelChoiceField):
    pass


def count_messages(maximum: int = MAX_COUNT) -> dict[str, str]:
    return {"max_value": f"must be at most {maximum}"}


class BoundedModelMultipleChoiceField(forms.ModelMultipleChoiceField):
    """Objects by id, where an id outside 1..2^63-1 is an invalid choice before any query
    (SQLite cannot even bind such a number)."""

    def _check_values(self, value):
        ids = forms.IntegerField(min_value=1, max_value=MAX_ID)
        for pk in value:
            try:
                ids.clean(pk)
            except forms.ValidationError:
                raise forms.ValidationError(
                    self.error_messages["invalid_pk_value"],
                    code="invalid_pk_value",
                    params={"pk": str(pk)[:30]},
                ) from None
        return super()._check_values(value)


# The reason does not change the impact, so its keystrokes and its blur do not ask the
# form for a new preview; a preview started by leaving the reason for the Save button
# would only be cut off by the save itself. static/js/app.js reads the attribute: the
# CSP forbids the eval that htmx's hx-on attributes would need.
NO_PREVIEW = {"data-no-preview": ""}


def _unbound(args, kwargs) -> bool:
    return (args[0] if args else kwargs.get("data")) is None


def _reason_field() -> ServiceCharField:
    return ServiceCharField(
        label=REASON_LABEL,
        max_length=MAX_TEXT,
        help_text=REASON_HELP,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class PolicyForm(forms.Form):
    """Shared plumbing: no HTML `required` (htmx previews an incomplete form), and
    service errors mapped onto fields, unknown field names onto the form itself."""

    use_required_attribute = False

    def apply_errors(self, errors: dict[str, list[str]]) -> None:
        apply_errors(self, errors)


# Share editor.


class LimitRowForm(forms.Form):
    """One row of the inline capacity limits table."""

    use_required_attribute = False

    instance_type = forms.ChoiceField(label="Instance type", required=False)
    max_instances = forms.IntegerField(
        label="Instances", required=False, max_value=MAX_COUNT, error_messages=count_messages()
    )

    def __init__(self, *args, type_choices: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["instance_type"].choices = [("", "—")] + type_choices
        self.fields["max_instances"].widget.attrs.update({"inputmode": "numeric"})

    def clean(self):
        data = super().clean()
        type_name, instances = data.get("instance_type"), data.get("max_instances")
        # Parsing only: a half-filled row cannot become an entry of the limits map.
        if type_name and instances is None and "max_instances" not in self.errors:
            self.add_error("max_instances", "enter the number of instances")
        if instances is not None and not type_name:
            self.add_error("instance_type", "choose the instance type of this limit")
        return data

    @property
    def entry(self) -> tuple[str, int] | None:
        data = getattr(self, "cleaned_data", {})
        if data.get("instance_type") and data.get("max_instances") is not None:
            return data["instance_type"], data["max_instances"]
        return None


class LimitRowsMixin:
    """A form with an inline table of (instance type, instances) rows: `limit_rows`."""

    limit_rows: list[LimitRowForm]
    limit_errors: list[str]

    def is_valid(self) -> bool:
        rows_valid = all([row.is_valid() for row in self.limit_rows])
        return super().is_valid() and rows_valid and not self._duplicate_types()

    def _duplicate_types(self) -> bool:
        seen: set[str] = set()
        duplicate = False
        for row in self.limit_rows:
            entry = row.entry
            if entry is None:
                continue
            if entry[0] in seen:
                row.add_error("instance_type", "this instance type already has a row above")
                duplicate = True
            seen.add(entry[0])
        return duplicate

    def entries(self) -> dict[str, int]:
        return dict(row.entry for row in self.limit_rows if row.entry)

    def _limit_errors(self, key: str, messages: list[str]) -> None:
        """`<map>.<type>` goes on that type's row; the map as a whole above the table."""
        type_name = key.partition(".")[2]
        row = next((r for r in self.limit_rows if r.entry and r.entry[0] == type_name), None)
        for message in messages:
            if row is None:
                self.limit_errors.append(f"{type_name}: {message}" if type_name else message)
            else:
                row.add_error("max_instances", message)

    @property
    def has_limit_errors(self) -> bool:
        return bool(self.limit_errors) or any(row.errors for row in self.limit_rows)


class StrategyRadioSelect(forms.RadioSelect):
    """Each strategy's radio says what it takes (engine.strategies), so the page's script
    enables the borrow limit by asking that, not the strategy's name."""

    def create_option(self, name, value, *args, **kwargs):
        option = super().create_option(name, value, *args, **kwargs)
        if value in STRATEGIES:
            takes = strategy_capabilities(value).takes_borrow_limit
            option["attrs"]["data-takes-borrow-limit"] = "true" if takes else "false"
        return option


class ShareForm(LimitRowsMixin, PolicyForm):
    """Create or edit a quota share with its capacity limits (one row per queue type)."""

    # Fields whose empty value keeps the stored one (governance.policy.conflicts).
    empty_keeps = ("priority_ceiling",)

    name = ServiceCharField(max_length=100, label="Name")
    team = ServiceTeamField(queryset=Team.objects.all(), label="Owning team", empty_label="—")
    strategy = forms.ChoiceField(
        label="Strategy", choices=QuotaShare.Strategy.choices, widget=StrategyRadioSelect
    )
    borrow_limit = forms.IntegerField(
        label="Borrow limit (%)",
        required=False,
        help_text="Percent of the share's own limit it may borrow on top, per instance type: "
        f"0 to {services.BORROW_LIMIT_MAX}; −1 or empty = unlimited. "
        f"Only with {spoken_list(BORROWING_STRATEGIES)}.",
    )
    in_share_preemption = forms.BooleanField(label="In-share preemption", required=False)
    priority_ceiling = forms.IntegerField(
        label="Priority ceiling",
        required=False,
        min_value=0,
        max_value=9999,
        help_text="The highest job priority the team's leads may set on their own; above it "
        "a job needs an approved priority-raise exception or an urgency that names the team. "
        "Empty keeps it as it is (new shares: 100).",
    )
    default_workload_class = forms.ModelChoiceField(
        label="Default workload class",
        queryset=WorkloadClass.objects.all(),
        to_field_name="name",
        required=False,
        empty_label="none (no interruption contract)",
        help_text="The interruption contract the share's jobs copy when their job "
        "definition names no class. Its minimum runtime and grace are how long the shares "
        "it borrows from may wait to get their capacity back.",
    )
    state = forms.ChoiceField(
        label="State",
        choices=QuotaShare.State.choices,
        help_text="A disabled share keeps its history but accepts no new jobs.",
    )
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)
    reason = _reason_field()

    def __init__(self, *args, queue: JobQueue, share: QuotaShare | None = None, **kwargs):
        if share is not None and _unbound(args, kwargs):
            kwargs.setdefault("initial", self.initial_for(share))
        super().__init__(*args, **kwargs)
        self.queue = queue
        self.share = share
        self.fields["borrow_limit"].widget.attrs.update({"inputmode": "numeric"})
        self.fields["reason"].widget.attrs.update(NO_PREVIEW)
        type_names = [cap.instance_type.name for cap in queue.capacities.all()]
        choices = [(name, name) for name in type_names]
        existing = []
        if share is not None and not self.is_bound:
            existing = [
                {"instance_type": lim.instance_type.name, "max_instances": lim.max_instances}
                for lim in share.limits.all()
            ]
        # One row per instance type of the queue: a share may name each type once.
        rows = max(1, min(services.MAX_LIMITS_PER_SHARE, len(type_names)), len(existing))
        self.limit_rows = [
            LimitRowForm(
                self.data if self.is_bound else None,
                prefix=f"limit-{i}",
                initial=existing[i] if i < len(existing) else None,
                type_choices=choices,
            )
            for i in range(rows)
        ]
        self.limit_errors: list[str] = []

    @staticmethod
    def initial_for(share: QuotaShare) -> dict:
        return {
            "name": share.name,
            "team": share.team_id,
            "strategy": share.strategy,
            "borrow_limit": share.borrow_limit,
            "in_share_preemption": share.in_share_preemption,
            "priority_ceiling": share.priority_ceiling,
            "default_workload_class": share.default_workload_class,
            "state": share.state,
            "version": share.version,
        }

    def clean(self):
        """When a field failed to parse, the service's rules still judge the rest, so one
        submit shows every error next to its field (issue 28, point 7)."""
        data = super().clean()
        if self.errors:
            problems = services.share_validate(
                queue=self.queue, data=self.share_data(), share=self.share
            )
            if "reason" not in self.errors:
                problems = {**problems, **reason_problems(data.get("reason") or "")}
            self.apply_errors({k: v for k, v in problems.items() if k not in self.errors})
        return data

    def share_data(self) -> ShareData:
        data = self.cleaned_data
        return ShareData(
            name=data.get("name") or "",
            team=data.get("team"),
            strategy=data.get("strategy") or DEFAULT_STRATEGY,
            borrow_limit=data.get("borrow_limit"),
            in_share_preemption=bool(data.get("in_share_preemption")),
            state=data.get("state") or QuotaShare.State.ENABLED,
            capacity_limits=self.entries(),
            priority_ceiling=data.get("priority_ceiling"),
            default_workload_class=(
                data["default_workload_class"].name if data.get("default_workload_class") else None
            ),
        )

    def apply_errors(self, errors: dict[str, list[str]]) -> None:
        field_errors = {}
        for key, messages in errors.items():
            if key.startswith("capacity_limits"):
                self._limit_errors(key, messages)
            else:
                field_errors[key] = messages
        super().apply_errors(field_errors)

    def save(self, *, actor) -> PolicyWrite:
        """Create or update through the services. Raises PolicyError (already mapped onto
        the form) or VersionConflict."""
        data = self.share_data()
        reason = self.cleaned_data.get("reason") or ""
        try:
            if self.share is None:
                return services.share_create(
                    actor=actor, queue=self.queue, data=data, reason=reason
                )
            return services.share_update(
                actor=actor,
                share=self.share,
                data=data,
                reason=reason,
                expected_version=self.cleaned_data.get("version") or self.share.version,
            )
        except PolicyError as error:
            errors = dict(error.errors)
            if set(errors) == {"reason"}:
                # The reason is checked first; report the policy's own problems in the same pass.
                errors.update(
                    services.share_validate(queue=self.queue, data=data, share=self.share)
                )
            self.apply_errors(errors)
            raise


# Queue capacity editor.


class CapacityForm(LimitRowsMixin, PolicyForm):
    """A queue's capacity: instances per instance type, one to five rows."""

    limits_name = "capacity"  # the service's name of the rows' map (conflicts, errors)

    version = forms.IntegerField(widget=forms.HiddenInput, required=False)
    reason = _reason_field()

    def __init__(self, *args, queue: JobQueue, **kwargs):
        if _unbound(args, kwargs):
            kwargs.setdefault("initial", {"version": queue.version})
        super().__init__(*args, **kwargs)
        self.queue = queue
        self.fields["reason"].widget.attrs.update(NO_PREVIEW)
        choices = [(t.name, t.name) for t in InstanceType.objects.all()]
        existing = [
            {"instance_type": cap.instance_type.name, "max_instances": cap.instances}
            for cap in queue.capacities.all()
        ]
        rows = max(1, min(services.MAX_LIMITS_PER_SHARE, len(choices)), len(existing))
        self.limit_rows = [
            LimitRowForm(
                self.data if self.is_bound else None,
                prefix=f"capacity-{i}",
                initial=existing[i] if i < len(existing) and not self.is_bound else None,
                type_choices=choices,
            )
            for i in range(rows)
        ]
        self.limit_errors: list[str] = []

    def apply_errors(self, errors: dict[str, list[str]]) -> None:
        field_errors = {}
        for key, messages in errors.items():
            if key.startswith("capacity"):
                self._limit_errors(key, messages)
            else:
                field_errors[key] = messages
        super().apply_errors(field_errors)

    def save(self, *, actor) -> PolicyWrite:
        try:
            return services.queue_set_capacity(
                actor=actor,
                queue=self.queue,
                capacity=self.entries(),
                reason=self.cleaned_data.get("reason") or "",
                expected_version=self.cleaned_data.get("version") or self.queue.version,
            )
        except PolicyError as error:
            self.apply_errors(error.errors)
            raise


# The executor binding: a queue's settings for its executor and an instance type's
# (governance.policy.executor_binding). The fields are the executor's binding schema's,
# so a new executor's settings need no form here.


def _binding_field(field) -> forms.CharField:
    if field.many:
        return forms.CharField(
            label=field.label,
            help_text=f"{field.help} One a line.".strip(),
            required=False,
            max_length=field.max_length,
            widget=forms.Textarea(attrs={"rows": 3}),
        )
    return forms.CharField(
        label=field.label, help_text=field.help, required=False, max_length=field.max_length
    )


def _binding_initial(described, document: dict) -> dict:
    return {
        field.name: "\n".join(document.get(field.name) or [])
        if field.many
        else document.get(field.name) or ""
        for field in described
    }


class _BindingForm(PolicyForm):
    """The fields of `described` (scheduler.executors.base.BindingField), then a reason."""

    def _add_binding_fields(self, described) -> None:
        self.described = list(described)
        reason = self.fields.pop("reason")
        for field in self.described:
            self.fields[field.name] = _binding_field(field)
        self.fields["reason"] = reason

    def binding_fields(self):
        return [self[field.name] for field in self.described]

    def binding(self) -> dict:
        return {
            field.name: (self.cleaned_data.get(field.name) or "").split()
            if field.many
            else self.cleaned_data.get(field.name) or ""
            for field in self.described
        }


class QueueBindingForm(_BindingForm):
    """A queue's settings for its executor."""

    version = forms.IntegerField(widget=forms.HiddenInput, required=False)
    reason = _reason_field()

    def __init__(self, *args, queue: JobQueue, **kwargs):
        described = executor_binding.queue_binding_fields(queue.executor)
        if _unbound(args, kwargs):
            kwargs.setdefault(
                "initial",
                {
                    "version": queue.version,
                    **_binding_initial(described, executor_binding.queue_binding_document(queue)),
                },
            )
        super().__init__(*args, **kwargs)
        self.queue = queue
        self._add_binding_fields(described)
        self.fields["reason"].widget.attrs.update(NO_PREVIEW)

    def save(self, *, actor) -> PolicyWrite:
        try:
            return executor_binding.queue_binding_set(
                actor=actor,
                queue=self.queue,
                binding=self.binding(),
                reason=self.cleaned_data.get("reason") or "",
                expected_version=self.cleaned_data.get("version") or self.queue.version,
            )
        except PolicyError as error:
            self.apply_errors(error.errors)
            raise


class InstanceTypeBindingForm(_BindingForm):
    """What one instance of a type asks one executor for."""

    reason = _reason_field()

    def __init__(self, *args, instance_type: InstanceType, executor: str, **kwargs):
        described = executor_binding.instance_type_binding_fields(executor)
        if _unbound(args, kwargs):
            document = executor_binding.instance_type_binding_document(instance_type, executor)
            kwargs.setdefault("initial", _binding_initial(described, document))
        super().__init__(*args, **kwargs)
        self.instance_type = instance_type
        self.executor = executor
        self._add_binding_fields(described)

    def save(self, *, actor) -> PolicyWrite:
        try:
            return executor_binding.instance_type_binding_set(
                actor=actor,
                instance_type=self.instance_type,
                executor=self.executor,
                binding=self.binding(),
                reason=self.cleaned_data.get("reason") or "",
            )
        except PolicyError as error:
            self.apply_errors(error.errors)
            raise


class InstanceTypePriceForm(PolicyForm):
    """The price of one instance of a type per hour. The text goes to the service as
    typed, so its messages (not a number, 0 or less, too many digits) are the API's."""

    price_per_hour = ServiceCharField(
        required=False,
        max_length=40,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off"}),
    )
    reason = _reason_field()

    def __init__(self, *args, instance_type: InstanceType, currency: str, **kwargs):
        if _unbound(args, kwargs):
            price = instance_type.price_per_hour
            kwargs.setdefault(
                "initial", {"price_per_hour": "" if price is None else prices.price_short(price)}
            )
        super().__init__(*args, **kwargs)
        self.instance_type = instance_type
        field = self.fields["price_per_hour"]
        field.label = f"Price of one instance per hour ({currency})"
        field.help_text = (
            f"A number above 0, e.g. 2.20, with at most 4 digits after the point; "
            f"one instance is {instance_type.gpu_count} GPU"
            f"{'' if instance_type.gpu_count == 1 else 's'}. Empty: no price, so the type "
            "has no cost anywhere (never a cost of 0)."
        )

    def save(self, *, actor) -> PolicyWrite:
        try:
            return prices.instance_type_price_set(
                actor=actor,
                instance_type=self.instance_type,
                price=self.cleaned_data.get("price_per_hour") or "",
                reason=self.cleaned_data.get("reason") or "",
            )
        except PolicyError as error:
            self.apply_errors(error.errors)
            raise


# Urgency definitions.


class UrgencyForm(PolicyForm):
    name = ServiceCharField(max_length=100, label="Name")
    meaning = ServiceCharField(
        label="Meaning",
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What this urgency means, in plain words.",
    )
    examples = forms.CharField(
        label="Examples",
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Situations that qualify.",
    )
    priority = ServiceIntegerField(
        label="Priority it grants", help_text="A job priority from 0 to 9999."
    )
    max_window_hours = ServiceIntegerField(
        label="Longest window (hours)",
        help_text="The longest exception window it allows.",
        max_value=MAX_COUNT,
        error_messages=count_messages(),
    )
    allowed_kinds = forms.MultipleChoiceField(
        label="Allowed kinds",
        choices=Urgency.Kind.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    invokers = BoundedModelMultipleChoiceField(
        label="Teams that may invoke it",
        queryset=Team.objects.all(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None selected = every team.",
    )
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)
    reason = _reason_field()

    def __init__(self, *args, urgency: Urgency | None = None, **kwargs):
        if urgency is not None and _unbound(args, kwargs):
            kwargs.setdefault(
                "initial",
                {
                    "name": urgency.name,
                    "meaning": urgency.meaning,
                    "examples": urgency.examples,
                    "priority": urgency.priority,
                    "max_window_hours": urgency.max_window_hours,
                    "allowed_kinds": urgency.allowed_kinds,
                    "invokers": list(urgency.invokers.all()),
                    "version": urgency.version,
                },
            )
        super().__init__(*args, **kwargs)
        self.urgency = urgency
        for name in ("priority", "max_window_hours"):
            self.fields[name].widget.attrs.update({"inputmode": "numeric"})

    def save(self, *, actor) -> PolicyWrite:
        data = {key: self.cleaned_data.get(key) for key in services.URGENCY_FIELDS}
        data["invokers"] = list(self.cleaned_data.get("invokers") or [])
        try:
            return services.urgency_save(
                actor=actor,
                data=data,
                reason=self.cleaned_data.get("reason") or "",
                urgency=self.urgency,
                expected_version=self.cleaned_data.get("version") if self.urgency else None,
            )
        except PolicyError as error:
            errors = dict(error.errors)
            if set(errors) == {"reason"}:
                errors.update(services.urgency_validate(data, urgency=self.urgency))
            self.apply_errors(errors)
            raise


class WorkloadClassForm(PolicyForm):
    """Create or edit a workload class; every rule is the service's
    (governance.policy.workload_classes.workload_class_validate)."""

    name = ServiceCharField(max_length=100, label="Name")
    description = forms.CharField(
        label="Description",
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="What kind of work it is, and why its jobs need this contract.",
    )
    min_runtime_reclaim = ServiceIntegerField(
        label="Protected from reclaim (seconds)",
        help_text="From the start of each run, its jobs are not taken back by the share "
        "they borrow from for this long. 0: no protection.",
    )
    min_runtime_preempt = ServiceIntegerField(
        label="Protected from in-share preemption (seconds)",
        help_text="From the start of each run, a higher-priority job of the same share "
        "does not preempt them for this long. 0: no protection.",
    )
    grace = ServiceIntegerField(
        label="Notice before stopping (grace, seconds)",
        help_text="A victim keeps its capacity this long after notice, to save and exit. "
        "0: it stops at once.",
    )
    checkpoint_on_notice = forms.IntegerField(
        label="Checkpoints on notice within (seconds)",
        required=False,
        help_text="How soon after notice its jobs save a checkpoint and exit; at least 1. "
        "Empty: they do not checkpoint on notice. Needs a grace: with grace 0 no notice "
        "is given.",
    )
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)
    reason = _reason_field()

    def __init__(self, *args, workload_class: WorkloadClass | None = None, **kwargs):
        if workload_class is not None and _unbound(args, kwargs):
            kwargs.setdefault(
                "initial",
                {
                    **workload_classes.workload_class_document(workload_class),
                    "version": workload_class.version,
                },
            )
        elif _unbound(args, kwargs):
            kwargs.setdefault(
                "initial", {"min_runtime_reclaim": 0, "min_runtime_preempt": 0, "grace": 0}
            )
        super().__init__(*args, **kwargs)
        self.workload_class = workload_class
        for name in ("min_runtime_reclaim", "min_runtime_preempt", "grace"):
            self.fields[name].widget.attrs.update({"inputmode": "numeric"})
        self.fields["reason"].widget.attrs.update(NO_PREVIEW)

    def class_data(self) -> dict:
        return {key: self.cleaned_data.get(key) for key in workload_classes.CLASS_FIELDS}

    def save(self, *, actor) -> PolicyWrite:
        data = self.class_data()
        try:
            return workload_classes.workload_class_save(
                actor=actor,
                data=data,
                reason=self.cleaned_data.get("reason") or "",
                workload_class=self.workload_class,
                expected_version=self.cleaned_data.get("version") if self.workload_class else None,
            )
        except PolicyError as error:
            errors = dict(error.errors)
            if set(errors) == {"reason"}:
                errors.update(
                    workload_classes.workload_class_validate(
                        data, workload_class=self.workload_class
                    )
                )
            self.apply_errors(errors)
            raise


class WorkloadClassDeleteForm(PolicyForm):
    reason = _reason_field()

    def save(self, *, actor, workload_class: WorkloadClass) -> PolicyWrite:
        try:
            return workload_classes.workload_class_delete(
                actor=actor,
                workload_class=workload_class,
                reason=self.cleaned_data.get("reason") or "",
            )
        except PolicyError as error:
            self.apply_errors(error.errors)
            raise


class RevertForm(PolicyForm):
    reason = _reason_field()

    def save(self, *, actor, change: PolicyChange) -> PolicyWrite:
        try:
            return services.policy_change_revert(
                actor=actor, change=change, reason=self.cleaned_data.get("reason") or ""
            )
        except PolicyError as error:
            self.apply_errors(error.errors)
            raise


# Teams: membership is policy (governance.policy.membership).


def _users_field(label: str, help_text: str) -> BoundedModelMultipleChoiceField:
    return BoundedModelMultipleChoiceField(
        label=label,
        queryset=get_user_model().objects.order_by("username"),
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 8}),
        help_text=help_text,
    )


class TeamForm(PolicyForm):
    name = ServiceCharField(label="Name", max_length=100)
    description = forms.CharField(
        label="Description",
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    leads = _users_field(
        "Leads", "Leads submit and manage the team's jobs and file its exception requests."
    )
    members = _users_field(
        "Members",
        "Members and leads may not decide the team's exception requests (separation of duties).",
    )
    reason = _reason_field()

    def __init__(self, *args, team: Team | None = None, **kwargs):
        if team is not None and _unbound(args, kwargs):
            kwargs.setdefault(
                "initial",
                {
                    "name": team.name,
                    "description": team.description,
                    "leads": list(team.leads.all()),
                    "members": list(team.members.all()),
                },
            )
        super().__init__(*args, **kwargs)
        self.team = team

    def save(self, *, actor) -> PolicyWrite:
        data = TeamData(
            name=self.cleaned_data.get("name") or "",
            description=self.cleaned_data.get("description") or "",
            leads=list(self.cleaned_data.get("leads") or []),
            members=list(self.cleaned_data.get("members") or []),
        )
        try:
            return team_save(
                actor=actor, data=data, reason=self.cleaned_data.get("reason") or "", team=self.team
            )
        except PolicyError as error:
            errors = dict(error.errors)
            if set(errors) == {"reason"}:
                errors.update(team_validate(data=data, team=self.team))
            self.apply_errors(errors)
            raise
