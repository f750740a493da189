"""The REST API (/api/v1/): thin viewsets over the policy services.

Each action parses its input with an input serializer, calls one service
function (which checks the rules and records the history), and answers with
an output serializer. Errors have one shape (governance.api.errors).
"""

from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from governance.api import serializers as api
from governance.api.base import BaseApiViewSet
from governance.api.permissions import HistoryAccess, PolicyAccess
from governance.models import (
    CapacityLimit,
    InstanceType,
    JobQueue,
    PolicyChange,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
)
from governance.services.policy import (
    ShareData,
    policy_change_revert,
    queue_create,
    queue_set_capacity,
    share_create,
    share_update,
    urgency_document,
    urgency_save,
)

ERRORS = {
    400: api.ErrorSerializer,
    401: api.ErrorSerializer,
    403: api.ErrorSerializer,
    404: api.ErrorSerializer,
}
WRITE_ERRORS = {**ERRORS, 409: api.ConflictSerializer}


class ApiViewSet(BaseApiViewSet):
    permission_classes = [PolicyAccess]

    def fresh(self, obj):
        """The object as the output serializer reads it, with its relations prefetched."""
        return self.get_queryset().get(pk=obj.pk)


# Instance types and teams: plain records without policy rules or history.


_TYPE_OK = {200: api.InstanceTypeSerializer, **ERRORS}


@extend_schema_view(
    list=extend_schema(summary="List instance types"),
    retrieve=extend_schema(summary="Get an instance type", responses=_TYPE_OK),
    create=extend_schema(
        summary="Create an instance type (admins)",
        responses={201: api.InstanceTypeSerializer, **ERRORS},
    ),
    update=extend_schema(summary="Replace an instance type (admins)", responses=_TYPE_OK),
    partial_update=extend_schema(summary="Change an instance type (admins)", responses=_TYPE_OK),
    destroy=extend_schema(
        summary="Delete an unused instance type (admins)", responses={204: None, **WRITE_ERRORS}
    ),
)
class InstanceTypeViewSet(viewsets.ModelViewSet, ApiViewSet):
    queryset = InstanceType.objects.all()
    serializer_class = api.InstanceTypeSerializer


_TEAM_OK = {200: api.TeamOutputSerializer, **ERRORS}


@extend_schema_view(
    list=extend_schema(summary="List teams", responses=api.TeamOutputSerializer(many=True)),
    retrieve=extend_schema(summary="Get a team", responses=_TEAM_OK),
    create=extend_schema(
        summary="Create a team (admins)",
        request=api.TeamInputSerializer,
        responses={201: api.TeamOutputSerializer, **ERRORS},
    ),
    update=extend_schema(
        summary="Replace a team (admins)", request=api.TeamInputSerializer, responses=_TEAM_OK
    ),
    partial_update=extend_schema(
        summary="Change a team (admins)", request=api.TeamInputSerializer, responses=_TEAM_OK
    ),
    destroy=extend_schema(
        summary="Delete a team without shares (admins)", responses={204: None, **WRITE_ERRORS}
    ),
)
class TeamViewSet(mixins.DestroyModelMixin, ApiViewSet):
    queryset = Team.objects.prefetch_related("members", "leads")
    serializer_class = api.TeamOutputSerializer

    def list(self, request):
        return self.paginated(self.get_queryset(), api.TeamOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.TeamOutputSerializer(self.get_object()).data)

    def create(self, request):
        serializer = api.TeamInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        team = serializer.save()
        return Response(
            api.TeamOutputSerializer(self.fresh(team)).data, status=status.HTTP_201_CREATED
        )

    def update(self, request, pk=None, partial=False):
        team = self.get_object()
        serializer = api.TeamInputSerializer(team, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        serializer.save()
        return Response(api.TeamOutputSerializer(self.fresh(team)).data)

    def partial_update(self, request, pk=None):
        return self.update(request, pk, partial=True)


# Queues.


@extend_schema_view(
    list=extend_schema(summary="List queues", responses=api.QueueOutputSerializer(many=True)),
    retrieve=extend_schema(
        summary="Get a queue with its capacity map",
        responses={200: api.QueueOutputSerializer, **ERRORS},
    ),
    create=extend_schema(
        summary="Create a queue with its capacity (admins)",
        request=api.QueueCreateSerializer,
        responses={201: api.QueueOutputSerializer, **ERRORS},
    ),
    partial_update=extend_schema(
        summary="Replace a queue's capacity map (admins)",
        description="Send the whole new `capacity` map, a `reason` and the `version` you read.",
        request=api.QueueCapacitySerializer,
        responses={200: api.QueueOutputSerializer, **WRITE_ERRORS},
    ),
)
class QueueViewSet(ApiViewSet):
    queryset = JobQueue.objects.prefetch_related(
        Prefetch("capacities", queryset=QueueCapacity.objects.select_related("instance_type"))
    )
    serializer_class = api.QueueOutputSerializer

    def list(self, request):
        return self.paginated(self.get_queryset(), api.QueueOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.QueueOutputSerializer(self.get_object()).data)

    def create(self, request):
        data = self.parse(api.QueueCreateSerializer)
        capacity = data.pop("capacity")
        reason = data.pop("reason")
        queue = queue_create(actor=request.user, capacity=capacity, reason=reason, **data)
        return Response(
            api.QueueOutputSerializer(self.fresh(queue)).data, status=status.HTTP_201_CREATED
        )

    def partial_update(self, request, pk=None):
        queue = self.get_object()
        data = self.parse(api.QueueCapacitySerializer)
        queue = queue_set_capacity(
            actor=request.user,
            queue=queue,
            capacity=data["capacity"],
            reason=data["reason"],
            expected_version=data["version"],
        )
        return Response(api.QueueOutputSerializer(self.fresh(queue)).data)


# Quota shares.

_SHARE_OK = {200: api.ShareOutputSerializer, **WRITE_ERRORS}
_SHARE_DEFAULTS = {
    "name": "",
    "team": None,
    "strategy": QuotaShare.Strategy.LEND,
    "borrow_limit": None,
    "in_share_preemption": False,
    "state": QuotaShare.State.ENABLED,
    "capacity_limits": {},
}


def _share_data(values: dict, *, base: dict) -> ShareData:
    """ShareData from parsed input; fields the client did not send come from `base`."""
    return ShareData(**{name: values.get(name, default) for name, default in base.items()})


def _share_base(share: QuotaShare) -> dict:
    return {
        "name": share.name,
        "team": share.team,
        "strategy": share.strategy,
        "borrow_limit": share.borrow_limit,
        "in_share_preemption": share.in_share_preemption,
        "state": share.state,
        "capacity_limits": {
            limit.instance_type.name: limit.max_instances for limit in share.limits.all()
        },
    }


@extend_schema_view(
    list=extend_schema(
        summary="List quota shares",
        parameters=[
            OpenApiParameter("queue", OpenApiTypes.INT, description="Only this queue's shares."),
            OpenApiParameter("team", OpenApiTypes.STR, description="Only this team's (name)."),
            OpenApiParameter("state", OpenApiTypes.STR, description="ENABLED or DISABLED."),
        ],
        responses=api.ShareOutputSerializer(many=True),
    ),
    retrieve=extend_schema(
        summary="Get a quota share with its capacity limits",
        responses={200: api.ShareOutputSerializer, **ERRORS},
    ),
    create=extend_schema(
        summary="Create a quota share (admins)",
        request=api.ShareCreateSerializer,
        responses={201: api.ShareOutputSerializer, **ERRORS},
    ),
    update=extend_schema(
        summary="Replace a quota share (admins)",
        description="Fields left out take their defaults. Disable a share with "
        '`"state": "DISABLED"`.',
        request=api.ShareUpdateSerializer,
        responses=_SHARE_OK,
    ),
    partial_update=extend_schema(
        summary="Change a quota share (admins)",
        description="Fields left out keep their current value. `capacity_limits` replaces "
        "the whole map.",
        request=api.ShareUpdateSerializer,
        responses=_SHARE_OK,
    ),
)
class ShareViewSet(ApiViewSet):
    queryset = QuotaShare.objects.select_related("queue", "team").prefetch_related(
        Prefetch("limits", queryset=CapacityLimit.objects.select_related("instance_type"))
    )
    serializer_class = api.ShareOutputSerializer

    def list(self, request):
        shares = self.get_queryset()
        queue_id = self.int_param("queue")
        if queue_id is not None:
            shares = shares.filter(queue_id=queue_id)
        if team := request.query_params.get("team"):
            shares = shares.filter(team__name=team)
        if state := request.query_params.get("state"):
            shares = shares.filter(state=state)
        return self.paginated(shares, api.ShareOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.ShareOutputSerializer(self.get_object()).data)

    def create(self, request):
        values = self.parse(api.ShareCreateSerializer)
        share = share_create(
            actor=request.user,
            queue=values["queue"],
            data=_share_data(values, base=_SHARE_DEFAULTS),
            reason=values["reason"],
        )
        return Response(
            api.ShareOutputSerializer(self.fresh(share)).data, status=status.HTTP_201_CREATED
        )

    def update(self, request, pk=None, partial=False):
        share = self.get_object()
        values = self.parse(api.ShareUpdateSerializer)
        base = _share_base(share) if partial else _SHARE_DEFAULTS
        share = share_update(
            actor=request.user,
            share=share,
            data=_share_data(values, base=base),
            reason=values["reason"],
            expected_version=values["version"],
        )
        return Response(api.ShareOutputSerializer(self.fresh(share)).data)

    def partial_update(self, request, pk=None):
        return self.update(request, pk, partial=True)


# Urgency definitions.

_URGENCY_OK = {200: api.UrgencyOutputSerializer, **WRITE_ERRORS}
_URGENCY_FIELDS = (
    "name",
    "meaning",
    "examples",
    "priority",
    "max_window_hours",
    "allowed_kinds",
    "invokers",
)


@extend_schema_view(
    list=extend_schema(
        summary="List urgency definitions", responses=api.UrgencyOutputSerializer(many=True)
    ),
    retrieve=extend_schema(
        summary="Get an urgency definition",
        responses={200: api.UrgencyOutputSerializer, **ERRORS},
    ),
    create=extend_schema(
        summary="Create an urgency definition (admins)",
        request=api.UrgencyCreateSerializer,
        responses={201: api.UrgencyOutputSerializer, **ERRORS},
    ),
    update=extend_schema(
        summary="Replace an urgency definition (admins)",
        request=api.UrgencyUpdateSerializer,
        responses=_URGENCY_OK,
    ),
    partial_update=extend_schema(
        summary="Change an urgency definition (admins)",
        description="Fields left out keep their current value.",
        request=api.UrgencyUpdateSerializer,
        responses=_URGENCY_OK,
    ),
)
class UrgencyDefinitionViewSet(ApiViewSet):
    queryset = UrgencyDefinition.objects.prefetch_related("invokers")
    serializer_class = api.UrgencyOutputSerializer

    def list(self, request):
        return self.paginated(self.get_queryset(), api.UrgencyOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.UrgencyOutputSerializer(self.get_object()).data)

    def create(self, request):
        values = self.parse(api.UrgencyCreateSerializer)
        urgency = urgency_save(
            actor=request.user,
            data={name: values[name] for name in _URGENCY_FIELDS if name in values},
            reason=values["reason"],
        )
        return Response(
            api.UrgencyOutputSerializer(self.fresh(urgency)).data, status=status.HTTP_201_CREATED
        )

    def update(self, request, pk=None, partial=False):
        urgency = self.get_object()
        values = self.parse(api.UrgencyUpdateSerializer)
        data = urgency_document(urgency) if partial else {"invokers": []}
        data.update({name: values[name] for name in _URGENCY_FIELDS if name in values})
        urgency = urgency_save(
            actor=request.user,
            data=data,
            reason=values["reason"],
            urgency=urgency,
            expected_version=values["version"],
        )
        return Response(api.UrgencyOutputSerializer(self.fresh(urgency)).data)

    def partial_update(self, request, pk=None):
        return self.update(request, pk, partial=True)


# Policy history.

_HISTORY_FILTERS = [
    OpenApiParameter("queue", OpenApiTypes.INT, description="Changes of this queue (id)."),
    OpenApiParameter("share", OpenApiTypes.INT, description="Changes of this share (id)."),
    OpenApiParameter("urgency", OpenApiTypes.INT, description="Changes of this urgency (id)."),
    OpenApiParameter("actor", OpenApiTypes.STR, description="Changes made by this username."),
    OpenApiParameter(
        "cause", OpenApiTypes.STR, enum=PolicyChange.Cause.values, description="Why it happened."
    ),
    OpenApiParameter(
        "target", OpenApiTypes.STR, enum=PolicyChange.Target.values, description="What changed."
    ),
]


@extend_schema_view(
    list=extend_schema(
        summary="List policy changes, newest first",
        parameters=_HISTORY_FILTERS,
        responses=api.PolicyChangeOutputSerializer(many=True),
    ),
    retrieve=extend_schema(
        summary="Get a policy change with its field-level diff",
        responses={200: api.PolicyChangeOutputSerializer, **ERRORS},
    ),
)
class PolicyChangeViewSet(ApiViewSet):
    queryset = PolicyChange.objects.select_related("actor")
    serializer_class = api.PolicyChangeOutputSerializer
    permission_classes = [HistoryAccess]

    def list(self, request):
        changes = self.get_queryset()
        for name in ("queue", "share", "urgency"):
            value = self.int_param(name)
            if value is not None:
                changes = changes.filter(**{f"{name}_id": value})
        if actor := request.query_params.get("actor"):
            changes = changes.filter(actor__username=actor)
        for name in ("cause", "target"):
            if value := request.query_params.get(name):
                changes = changes.filter(**{name: value})
        return self.paginated(changes, api.PolicyChangeOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.PolicyChangeOutputSerializer(self.get_object()).data)

    @extend_schema(
        summary="Revert a change (admins)",
        description="Restores only the fields this change changed, as a new change.",
        request=api.RevertSerializer,
        responses={201: api.PolicyChangeOutputSerializer, **WRITE_ERRORS},
    )
    @action(detail=True, methods=["post"])
    def revert(self, request, pk=None):
        change = self.get_object()
        values = self.parse(api.RevertSerializer)
        revert = policy_change_revert(actor=request.user, change=change, reason=values["reason"])
        return Response(
            api.PolicyChangeOutputSerializer(self.fresh(revert)).data,
            status=status.HTTP_201_CREATED,
        )
