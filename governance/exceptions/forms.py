"""Forms of the exception and knowledge pages. They parse; the rules are the services'
(request_validate, article_validate), whose messages land next to the named field."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.contrib.auth import get_user_model

from core.bounds import MAX_ARTICLE_BODY, MAX_COUNT, MAX_TEXT
from core.form_errors import apply_errors
from core.permissions import ADMINS, EXCEPTION_OWNERS, TEAM_LEADS, is_admin
from core.widgets import NarrowedCheckboxes, NarrowedSelect
from fleet.models import (
    InstanceType,
    Job,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
)
from governance.exceptions.services import (
    RequestData,
    exception_owner_validate,
    request_validate,
)
from governance.knowledge.services import ArticleData, article_validate
from governance.models import ExceptionRequest, KnowledgeArticle
from governance.policy.forms import BoundedModelMultipleChoiceField, count_messages

DATETIME_FORMAT = "%Y-%m-%dT%H:%M"


class StorableDateTimeField(forms.DateTimeField):
    """A moment the database can store: in UTC too (9999-12-31 23:00 in a zone west of
    UTC is already in the year 10000 there)."""

    def to_python(self, value):
        moment = super().to_python(value)
        if moment is not None:
            try:
                moment.astimezone(dt.UTC)
            except OverflowError:
                raise forms.ValidationError(
                    "out of range: choose a moment before the year 9999", code="overflow"
                ) from None
        return moment


def _datetime_field(label: str, help_text: str) -> forms.DateTimeField:
    return StorableDateTimeField(
        label=label,
        help_text=help_text,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=DATETIME_FORMAT),
    )


class JobChoiceField(BoundedModelMultipleChoiceField):
    def label_from_instance(self, job):
        state = job.get_state_display().lower()
        return f"{job.name} ({job.share.name}, {state}, priority {job.priority})"


class ShareChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, share):
        return f"{share.queue.name} / {share.name} ({share.team.name})"


class UrgencyChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, urgency):
        return f"{urgency.name} (up to {urgency.max_window_hours} h)"


def _shares_by_type(shares) -> dict[int, list[int]]:
    """Instance type id -> the ids of `shares` whose queue has capacity of it."""
    queues: dict[int, list[int]] = {}
    for share_id, queue_id in shares.values_list("pk", "queue_id"):
        queues.setdefault(queue_id, []).append(share_id)
    found: dict[int, list[int]] = {}
    for queue_id, type_id in QueueCapacity.objects.filter(queue_id__in=queues).values_list(
        "queue_id", "instance_type_id"
    ):
        found.setdefault(type_id, []).extend(queues[queue_id])
    return found


class ExceptionRequestForm(forms.Form):
    kind = forms.ChoiceField(
        label="What the team needs",
        choices=ExceptionRequest.Kind.choices,
        widget=forms.RadioSelect,
    )
    team = forms.ModelChoiceField(label="Team", queryset=Team.objects.none())
    urgency = UrgencyChoiceField(
        label="Urgency definition",
        queryset=UrgencyDefinition.objects.prefetch_related("invokers"),
        help_text="The shared reason for the exception; it limits the kinds and the window.",
    )
    justification = forms.CharField(
        label="Justification",
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Why the team needs it now; the exception owner reads this first.",
    )
    window_start = _datetime_field("Window start", "When the exception takes effect.")
    window_end = _datetime_field("Window end", "When it ends by itself.")
    share = ShareChoiceField(
        label="Share",
        queryset=QuotaShare.objects.none(),
        required=False,
        help_text="The share that gets the extra instances.",
        # The share follows the chosen team, the instance type the share's queue, the
        # jobs the team (request_validate refuses any other, naming the field).
        widget=NarrowedSelect(narrow_by="id_team", attribute="team_id"),
    )
    instance_type = forms.ModelChoiceField(
        label="Instance type",
        queryset=InstanceType.objects.all(),
        required=False,
        widget=NarrowedSelect(narrow_by="id_share", mapping=dict),  # the form's shares
    )
    extra_instances = forms.IntegerField(
        label="Extra instances",
        required=False,
        min_value=1,
        max_value=MAX_COUNT,
        error_messages=count_messages(),
        help_text="How many more instances than the share's limit, for the window.",
    )
    jobs = JobChoiceField(
        label="Jobs",
        queryset=Job.objects.none(),
        required=False,
        widget=NarrowedCheckboxes(narrow_by="id_team", attribute="share.team_id"),
        help_text="Waiting or running jobs of your teams.",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        teams = Team.objects.all() if is_admin(user) else Team.objects.filter(leads=user)
        self.fields["team"].queryset = teams.order_by("name")
        self.fields["share"].queryset = (
            QuotaShare.objects.filter(team__in=teams)
            .select_related("queue", "team")
            .order_by("queue__name", "name")
        )
        self.fields["jobs"].queryset = (
            Job.objects.filter(
                share__team__in=teams, state__in=[Job.State.RUNNABLE, Job.State.RUNNING]
            )
            .select_related("share")
            .order_by("name", "id")
        )
        shares = self.fields["share"].queryset
        self.fields["instance_type"].widget.mapping = lambda: _shares_by_type(shares)

    def request_data(self) -> RequestData:
        data = self.cleaned_data
        return RequestData(
            kind=data.get("kind") or "",
            team=data.get("team"),
            urgency=data.get("urgency"),
            justification=data.get("justification") or "",
            window_start=data.get("window_start"),
            window_end=data.get("window_end"),
            share=data.get("share"),
            instance_type=data.get("instance_type"),
            extra_instances=data.get("extra_instances"),
            jobs=list(data.get("jobs") or []),
        )

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        apply_errors(self, request_validate(actor=self.user, data=self.request_data()))
        return cleaned

    @classmethod
    def initial_for(cls, request: ExceptionRequest) -> dict:
        """The form's values for editing the draft `request`."""
        return {
            "kind": request.kind,
            "team": request.team_id,
            "urgency": request.urgency_id,
            "justification": request.justification,
            "window_start": request.window_start,
            "window_end": request.window_end,
            "share": request.share_id if request.kind == request.Kind.TEMPORARY_CAPACITY else None,
            "instance_type": request.instance_type_id,
            "extra_instances": request.extra_instances,
            "jobs": [job.pk for job in request.jobs.all()],
        }


class ExceptionOwnerForm(forms.Form):
    """Appoint an exception owner: a member of the exception owners group, for exactly
    one queue or one share."""

    user = forms.ModelChoiceField(
        label="Person",
        queryset=get_user_model().objects.none(),
        help_text="Only members of the exception owners group can be appointed.",
    )
    queue = forms.ModelChoiceField(
        label="Queue",
        queryset=JobQueue.objects.order_by("name"),
        required=False,
        empty_label="No queue",
        help_text="They decide every request of this queue. Choose a queue or a share.",
    )
    share = ShareChoiceField(
        label="Share",
        queryset=QuotaShare.objects.select_related("queue", "team").order_by("queue__name", "name"),
        required=False,
        empty_label="No share",
        help_text="They decide the requests of this share only.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        users = get_user_model().objects.filter(is_active=True).order_by("username")
        self.fields["user"].queryset = users
        owners = set(users.filter(groups__name=EXCEPTION_OWNERS).values_list("pk", flat=True))

        def label(user):
            name = user.get_full_name() or user.get_username()
            if user.get_full_name():
                name = f"{name} ({user.get_username()})"
            return name if user.pk in owners else f"{name}: not in the exception owners group"

        self.fields["user"].label_from_instance = label

    def clean(self):
        cleaned = super().clean()
        problems = exception_owner_validate(
            user=cleaned.get("user"), queue=cleaned.get("queue"), share=cleaned.get("share")
        )
        # A field the form refused already (e.g. "This field is required") is said once.
        apply_errors(self, problems, skip_fields_in_error=True)
        return cleaned


class DecisionForm(forms.Form):
    note = forms.CharField(
        label="Note to the requester",
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Required to deny: say what the team could do instead.",
    )


class RevokeForm(forms.Form):
    reason = forms.CharField(
        label="Reason for revoking", max_length=MAX_TEXT, widget=forms.Textarea(attrs={"rows": 2})
    )


# Knowledge base.


class ArticleForm(forms.Form):
    title = forms.CharField(label="Title", max_length=200)
    kind = forms.ChoiceField(label="Kind of article", choices=KnowledgeArticle.Kind.choices)
    body = forms.CharField(
        label="Body",
        max_length=MAX_ARTICLE_BODY,
        widget=forms.Textarea(attrs={"rows": 16}),
        help_text="Markdown: ## headings, - lists, **bold**, [links](https://…), | tables |. "
        "Say why the policy exists and who may change it.",
    )
    tags = forms.CharField(
        label="Tags",
        required=False,
        max_length=1000,
        help_text="Separated by commas, e.g. reclaim, aws-sample.",
    )
    shares = BoundedModelMultipleChoiceField(
        label="Shares it explains",
        required=False,
        queryset=QuotaShare.objects.select_related("queue").order_by("queue__name", "name"),
        widget=forms.SelectMultiple(attrs={"size": 6}),
    )
    urgencies = BoundedModelMultipleChoiceField(
        label="Urgency definitions it concerns",
        required=False,
        queryset=UrgencyDefinition.objects.order_by("name"),
        widget=forms.SelectMultiple(attrs={"size": 4}),
    )
    editors = BoundedModelMultipleChoiceField(
        label="Who else may change it",
        required=False,
        queryset=get_user_model()
        .objects.filter(groups__name__in=[ADMINS, TEAM_LEADS, EXCEPTION_OWNERS])
        .distinct()
        .order_by("username"),
        widget=forms.SelectMultiple(attrs={"size": 4}),
        help_text="Besides you (the owner) and platform admins.",
    )
    reason = forms.CharField(label="What changed and why", required=False, max_length=MAX_TEXT)
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["shares"].label_from_instance = (
            lambda share: f"{share.queue.name} / {share.name}"
        )

    def article_data(self, *, exception_requests=()) -> ArticleData:
        data = self.cleaned_data
        return ArticleData(
            title=data.get("title") or "",
            body=data.get("body") or "",
            kind=data.get("kind") or "",
            tags=[t.strip() for t in (data.get("tags") or "").split(",") if t.strip()],
            shares=list(data.get("shares") or []),
            urgencies=list(data.get("urgencies") or []),
            editors=list(data.get("editors") or []),
            exception_requests=list(exception_requests),
        )

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        apply_errors(self, article_validate(self.article_data()))
        return cleaned

    @classmethod
    def initial_for(cls, article: KnowledgeArticle) -> dict:
        return {
            "title": article.title,
            "kind": article.kind,
            "body": article.body,
            "tags": ", ".join(tag.name for tag in article.tags.all()),
            "shares": list(article.shares.all()),
            "urgencies": list(article.urgencies.all()),
            "editors": list(article.editors.all()),
            "version": article.version,
        }
