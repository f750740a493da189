"""API v1 for exception requests and the knowledge base: serializers and thin viewsets.

Same rules and messages as the pages: the serializers parse and bound (ids, lengths,
choices: core.api.fields), the services decide (governance.exceptions.services /
.knowledge), refusals carry the sentence of core.rules, and errors have the project's
one shape, documented on every operation by core.api.schema.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, serializers, status
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from core import rules as table
from core.api.base import BaseApiViewSet
from core.api.fields import BoundedPrimaryKeyRelatedField, NameRelatedField, count_field, text_field
from core.bounds import MAX_ARTICLE_BODY
from fleet.models import InstanceType, Job, QuotaShare, Team, UrgencyDefinition
from governance.exceptions import permissions as rules
from governance.exceptions import selectors, services
from governance.filters import ArticleFilter, ExceptionCountsFilter, ExceptionRequestFilter
from governance.knowledge.selectors import article_search
from governance.knowledge.services import (
    MAX_TAGS,
    ArticleData,
    article_create,
    article_delete,
    article_update,
)
from governance.models import ExceptionRequest, KnowledgeArticle

MAX_JOBS_PER_REQUEST = 100
MAX_LINKS = 100


def _ids(queryset, *, max_items: int, help_text: str) -> serializers.ListField:
    """A list of ids of `queryset` (each 1 to 2^63-1), at most `max_items` long."""
    return serializers.ListField(
        child=BoundedPrimaryKeyRelatedField(queryset=queryset),
        required=False,
        max_length=max_items,
        help_text=help_text,
    )


# Exception requests.


class JobRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class ExceptionEventSerializer(serializers.Serializer):
    type = serializers.CharField()
    at = serializers.DateTimeField()
    actor = serializers.CharField(source="actor.username", allow_null=True, default=None)
    note = serializers.CharField()


class ExceptionRequestOutputSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")
    queue = serializers.CharField(source="queue.name")
    share = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    share_name = serializers.CharField(source="share.name", allow_null=True, default=None)
    instance_type = serializers.CharField(
        source="instance_type.name", allow_null=True, default=None
    )
    urgency = serializers.PrimaryKeyRelatedField(read_only=True)
    urgency_name = serializers.CharField(source="urgency.name")
    jobs = JobRefSerializer(many=True, read_only=True)
    # Plain strings: "state" names another enum (shares') in the schema already.
    state = serializers.CharField(
        help_text="DRAFT, SUBMITTED, APPROVED, DENIED, ACTIVE, EXPIRED or REVOKED."
    )
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)

    class Meta:
        model = ExceptionRequest
        fields = [
            "id",
            "kind",
            "state",
            "team",
            "queue",
            "share",
            "share_name",
            "instance_type",
            "extra_instances",
            "jobs",
            "urgency",
            "urgency_name",
            "justification",
            "window_start",
            "window_end",
            "requested_by",
            "created_at",
            "submitted_at",
            "decided_by",
            "decided_at",
            "decision_note",
            "activated_at",
            "ended_at",
        ]


class ExceptionRequestDetailSerializer(ExceptionRequestOutputSerializer):
    events = ExceptionEventSerializer(many=True, read_only=True)
    policy_changes = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    applied = serializers.JSONField(read_only=True)
    decided_membership = serializers.JSONField(
        read_only=True,
        help_text="The decider's memberships the decision was checked against: the "
        "request's team (member, lead), their roles and exception-owner scopes.",
    )

    class Meta(ExceptionRequestOutputSerializer.Meta):
        fields = [
            *ExceptionRequestOutputSerializer.Meta.fields,
            "decided_membership",
            "applied",
            "events",
            "policy_changes",
        ]


class ExceptionRequestInputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ExceptionRequest.Kind.choices)
    team = NameRelatedField(
        max_length=100,
        slug_field="name",
        queryset=Team.objects.all(),
        error_messages={"does_not_exist": "unknown team '{value}'"},
    )
    urgency = BoundedPrimaryKeyRelatedField(
        queryset=UrgencyDefinition.objects.prefetch_related("invokers"),
        help_text="Id of the urgency definition.",
    )
    justification = text_field(allow_blank=True, default="")
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()
    share = BoundedPrimaryKeyRelatedField(
        queryset=QuotaShare.objects.select_related("queue", "team"),
        required=False,
        allow_null=True,
        help_text="Temporary capacity: id of the share that gets the instances.",
    )
    instance_type = NameRelatedField(
        max_length=64,
        slug_field="name",
        queryset=InstanceType.objects.all(),
        required=False,
        allow_null=True,
        error_messages={"does_not_exist": "unknown instance type '{value}'"},
    )
    extra_instances = count_field(
        required=False,
        allow_null=True,
        error_messages={"min_value": "must be a whole number of instances, at least 1"},
        help_text="Temporary capacity: how many instances above the share's limit.",
    )
    jobs = _ids(
        Job.objects.select_related("share"),
        max_items=MAX_JOBS_PER_REQUEST,
        help_text="Priority raise or protection: ids of the jobs.",
    )
    submit = serializers.BooleanField(
        default=False, help_text="Submit at once instead of saving a draft."
    )


class NoteSerializer(serializers.Serializer):
    note = text_field(allow_blank=True, default="", help_text="To the requester; required to deny.")


class RevokeSerializer(serializers.Serializer):
    reason = text_field(allow_blank=True, default="", help_text="Required.")


class CountRowSerializer(serializers.Serializer):
    label = serializers.CharField()
    counts = serializers.DictField(child=serializers.IntegerField())
    total = serializers.IntegerField()


class ExceptionCountsSerializer(serializers.Serializer):
    by_state = serializers.DictField(child=serializers.IntegerField())
    by_urgency = CountRowSerializer(many=True)
    by_team = CountRowSerializer(many=True)
    total = serializers.IntegerField()


class ExceptionAccess(BasePermission):
    """Pages and API agree: who sees the exception pages sees these endpoints."""

    def has_permission(self, request, view):
        if view.action == "counts":
            return rules.can_view_exception_counts(request.user)
        if view.action == "create":
            return rules.can_file_requests(request.user)
        return rules.can_view_exceptions(request.user)


_REQUEST_OK = ExceptionRequestDetailSerializer


@extend_schema_view(
    list=extend_schema(
        summary="List the exception requests you may see",
        responses=ExceptionRequestOutputSerializer(many=True),
    ),
    retrieve=extend_schema(
        summary="Get an exception request with its timeline", responses=_REQUEST_OK
    ),
    create=extend_schema(
        summary="File an exception request (team leads, for teams they lead)",
        request=ExceptionRequestInputSerializer,
        responses={201: ExceptionRequestDetailSerializer},
    ),
)
class ExceptionRequestViewSet(BaseApiViewSet):
    permission_classes = [ExceptionAccess]
    serializer_class = ExceptionRequestOutputSerializer
    queryset = ExceptionRequest.objects.none()
    filterset_class = ExceptionRequestFilter

    def _get(self, pk) -> ExceptionRequest:
        try:
            obj = selectors.exception_request_get(pk=int(pk))
        except (ExceptionRequest.DoesNotExist, ValueError):
            raise exceptions.NotFound("no such exception request") from None
        if not rules.can_view_request(self.request.user, obj):
            raise exceptions.PermissionDenied("you may not see this exception request")
        return obj

    def _detail(self, obj, *, status_code=status.HTTP_200_OK) -> Response:
        obj = selectors.exception_request_get(pk=obj.pk)
        return Response(ExceptionRequestDetailSerializer(obj).data, status=status_code)

    def list(self, request):
        query = self.query()
        requests = selectors.exception_request_list(
            user=request.user,
            state=query["state"] or None,
            kind=query["kind"] or None,
            team_id=query["team"],
            urgency_id=query["urgency"],
            queue_id=query["queue"],
        )
        page = self.paginate_queryset(requests)
        return self.get_paginated_response(ExceptionRequestOutputSerializer(page, many=True).data)

    def retrieve(self, request, pk=None):
        return self._detail(self._get(pk))

    def create(self, request):
        values = self.parse(ExceptionRequestInputSerializer)
        data = services.RequestData(
            kind=values["kind"],
            team=values["team"],
            urgency=values["urgency"],
            justification=values["justification"],
            window_start=values["window_start"],
            window_end=values["window_end"],
            share=values.get("share"),
            instance_type=values.get("instance_type"),
            extra_instances=values.get("extra_instances"),
            jobs=values.get("jobs") or [],
        )
        obj = services.exception_request_create(
            actor=request.user,
            data=data,
            submit=values["submit"],
        )
        return self._detail(obj, status_code=status.HTTP_201_CREATED)

    @extend_schema(summary="Submit a draft for decision", request=None, responses=_REQUEST_OK)
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        obj = self._get(pk)
        services.exception_request_submit(actor=request.user, request=obj)
        return self._detail(obj)

    @extend_schema(
        summary="Withdraw a submitted request before it is decided (its requester): "
        "it is a draft again",
        request=None,
        responses=_REQUEST_OK,
    )
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        obj = self._get(pk)
        services.exception_request_withdraw(actor=request.user, request=obj)
        return self._detail(obj)

    @extend_schema(
        summary="Approve a submitted request (its exception owners; not your own)",
        request=NoteSerializer,
        responses=_REQUEST_OK,
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        obj = self._get(pk)
        note = self.parse(NoteSerializer)["note"]
        services.exception_request_approve(actor=request.user, request=obj, note=note)
        return self._detail(obj)

    @extend_schema(
        summary="Deny a submitted request, with a note",
        request=NoteSerializer,
        responses=_REQUEST_OK,
    )
    @action(detail=True, methods=["post"])
    def deny(self, request, pk=None):
        obj = self._get(pk)
        note = self.parse(NoteSerializer)["note"]
        services.exception_request_deny(actor=request.user, request=obj, note=note)
        return self._detail(obj)

    @extend_schema(
        summary="Revoke an approved or active exception (owners of its scope, admins)",
        request=RevokeSerializer,
        responses=_REQUEST_OK,
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        obj = self._get(pk)
        reason = self.parse(RevokeSerializer)["reason"]
        services.exception_request_revoke(actor=request.user, request=obj, reason=reason)
        return self._detail(obj)

    @extend_schema(
        summary="Counts by state, urgency and team (leadership, admins)",
        responses=ExceptionCountsSerializer,
    )
    @action(detail=False, methods=["get"], filterset_class=ExceptionCountsFilter)
    def counts(self, request):
        counts = selectors.exception_counts(queue_id=self.query()["queue"])
        return Response(ExceptionCountsSerializer(counts).data)


# Knowledge articles.

ARTICLE_KINDS = "One of " + ", ".join(KnowledgeArticle.Kind.values) + "."


class ArticleOutputSerializer(serializers.ModelSerializer):
    tags = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    owner = serializers.CharField(source="owner.username", allow_null=True, default=None)
    shares = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    kind = serializers.CharField(help_text=ARTICLE_KINDS)

    class Meta:
        model = KnowledgeArticle
        fields = [
            "id",
            "slug",
            "title",
            "kind",
            "tags",
            "owner",
            "shares",
            "version",
            "created_at",
            "updated_at",
        ]


class ArticleHitSerializer(serializers.Serializer):
    article = ArticleOutputSerializer()
    rank = serializers.FloatField(help_text="Higher is better; 0 when there is no query.")
    snippet = serializers.CharField(help_text="HTML: escaped text, matches in <mark>.")


class ArticleDetailSerializer(ArticleOutputSerializer):
    editors = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    urgencies = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    exception_requests = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta(ArticleOutputSerializer.Meta):
        fields = [
            *ArticleOutputSerializer.Meta.fields,
            "body",
            "body_html",
            "editors",
            "urgencies",
            "exception_requests",
        ]


class ArticleInputSerializer(serializers.Serializer):
    title = serializers.CharField(
        allow_blank=True,
        required=False,
        max_length=200,
        error_messages={"max_length": "keep the title under 200 characters"},
    )
    body = text_field(
        allow_blank=True, required=False, max_length=MAX_ARTICLE_BODY, help_text="Markdown."
    )
    kind = serializers.ChoiceField(choices=KnowledgeArticle.Kind.choices, required=False)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        max_length=MAX_TAGS,
        error_messages={"max_length": f"use at most {MAX_TAGS} tags"},
    )
    shares = _ids(QuotaShare.objects.all(), max_items=MAX_LINKS, help_text="Ids of shares.")
    urgencies = _ids(
        UrgencyDefinition.objects.all(),
        max_items=MAX_LINKS,
        help_text="Ids of urgency definitions.",
    )
    exception_requests = _ids(
        ExceptionRequest.objects.all(),
        max_items=MAX_LINKS,
        help_text="Ids of exception requests.",
    )
    editors = serializers.ListField(
        child=NameRelatedField(
            max_length=150,
            slug_field="username",
            queryset=get_user_model().objects.all(),
            error_messages={"does_not_exist": "unknown user '{value}'"},
        ),
        required=False,
        max_length=MAX_LINKS,
        help_text="Usernames of who else may change it.",
    )
    reason = text_field(allow_blank=True, default="")
    version = count_field(
        required=False, help_text="For changes: the version you read (409 if it moved on)."
    )


class KnowledgeAccess(BasePermission):
    def has_permission(self, request, view):
        if view.action == "create":
            return rules.can_write_articles(request.user)
        return rules.can_view_knowledge(request.user)


_ARTICLE_FIELDS = (
    "title",
    "body",
    "kind",
    "tags",
    "shares",
    "urgencies",
    "exception_requests",
    "editors",
)


@extend_schema_view(
    list=extend_schema(
        summary="Search or list knowledge articles", responses=ArticleHitSerializer(many=True)
    ),
    retrieve=extend_schema(summary="Get an article", responses=ArticleDetailSerializer),
    create=extend_schema(
        summary="Write an article",
        request=ArticleInputSerializer,
        responses={201: ArticleDetailSerializer},
    ),
    partial_update=extend_schema(
        summary="Change an article (owner, editors, admins)",
        request=ArticleInputSerializer,
        responses=ArticleDetailSerializer,
    ),
    destroy=extend_schema(summary="Delete an article (owner, admins)", responses={204: None}),
)
class ArticleViewSet(BaseApiViewSet):
    permission_classes = [KnowledgeAccess]
    serializer_class = ArticleDetailSerializer
    queryset = KnowledgeArticle.objects.none()
    filterset_class = ArticleFilter

    def _get(self, pk) -> KnowledgeArticle:
        article = (
            KnowledgeArticle.objects.select_related("owner")
            .prefetch_related("tags", "shares", "editors", "urgencies", "exception_requests")
            .filter(pk=pk if str(pk).isdigit() else 0)
            .first()
        )
        # A decision record of a request the user may not see does not exist for them.
        if article is None or not table.allowed(self.request.user, "article.view", article):
            raise exceptions.NotFound("no such article")
        return article

    def _parse_article(self) -> dict:
        """The input, where an exception request the user may not see is an unknown id
        (the same error, so a guessed id reveals nothing)."""
        serializer = ArticleInputSerializer(data=self.request.data)
        links = serializer.fields["exception_requests"].child
        links.queryset = table.visible(self.request.user, "exception.view", links.queryset)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def _require(self, action_name: str, article: KnowledgeArticle) -> None:
        """Refused before the input is read, so a refusal never reveals what is valid."""
        why = table.refusal(self.request.user, action_name, article)
        if why is not None:
            raise exceptions.PermissionDenied(why)

    def list(self, request):
        query = self.query()
        hits = article_search(
            user=request.user,
            query=query["q"] or "",
            tag=query["tag"] or None,
            share_id=query["share"],
        )
        page = self.paginate_queryset(hits)
        return self.get_paginated_response(ArticleHitSerializer(page, many=True).data)

    def retrieve(self, request, pk=None):
        return Response(ArticleDetailSerializer(self._get(pk)).data)

    def _data(self, values: dict, base: KnowledgeArticle | None) -> ArticleData:
        current = {
            "title": base.title if base else "",
            "body": base.body if base else "",
            "kind": base.kind if base else KnowledgeArticle.Kind.REFERENCE,
            "tags": [t.name for t in base.tags.all()] if base else [],
            "shares": list(base.shares.all()) if base else [],
            "urgencies": list(base.urgencies.all()) if base else [],
            "exception_requests": list(base.exception_requests.all()) if base else [],
            "editors": list(base.editors.all()) if base else [],
        }
        current.update({name: values[name] for name in _ARTICLE_FIELDS if name in values})
        return ArticleData(**current)

    def create(self, request):
        values = self._parse_article()
        article = article_create(
            actor=request.user,
            data=self._data(values, None),
            reason=values["reason"],
        )
        return Response(
            ArticleDetailSerializer(self._get(article.pk)).data, status=status.HTTP_201_CREATED
        )

    def partial_update(self, request, pk=None):
        article = self._get(pk)
        self._require("article.edit", article)
        values = self._parse_article()
        if "version" not in values:
            raise exceptions.ValidationError({"version": ["send the version you read"]})
        article = article_update(
            actor=request.user,
            article=article,
            data=self._data(values, article),
            expected_version=values["version"],
            reason=values["reason"],
        )
        return Response(ArticleDetailSerializer(self._get(article.pk)).data)

    def destroy(self, request, pk=None):
        article = self._get(pk)
        self._require("article.delete", article)
        article_delete(actor=request.user, article=article)
        return Response(status=status.HTTP_204_NO_CONTENT)
