"""The REST API (/api/v1/): thin viewsets over the policy services.

Each action parses its input with an input serializer, calls one service
function (which checks the rules and records the history), and answers with
an output serializer. Errors have one shape (core.api.errors), documented on
every operation by core.api.schema; list filters are governance.filters.
"""

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api.base import BaseApiViewSet
from core.api.permissions import HistoryAccess, PolicyAccess
from core.errors import InvalidInput
from engine.strategies import DEFAULT_STRATEGY
from fleet.models import (
    CapacityLimit,
    InstanceType,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
    WorkloadClass,
)
from governance.filters import PolicyChangeFilter, ShareFilter
from governance.models import PolicyChange
from governance.policy import serializers as api
from governance.policy.executor_binding import (
    instance_type_binding_document,
    instance_type_binding_set,
    instance_type_fields_given,
    queue_binding_document,
    queue_binding_field_names,
    queue_binding_set,
)
from governance.policy.membership import TeamData, team_delete, team_save
from governance.policy.prices import instance_type_price_set
from governance.policy.services import (
    KEEP_CLASS,
    PolicyWrite,
    ShareData,
    policy_change_revert,
    queue_create,
    queue_set_capacity,
    share_create,
    share_update,
    urgency_document,
    urgency_save,
)
from governance.policy.workload_classes import (
    workload_class_delete,
    workload_class_document,
    workload_class_save,
)
from governance.proposals.api import ProposalSerializer, proposed


class ApiViewSet(BaseApiViewSet):
    permission_classes = [PolicyAccess]

    def fresh(self, obj):
        """The object as the output serializer reads it, with its relations prefetched."""
        return self.get_queryset().get(pk=obj.pk)

    def written(self, write: PolicyWrite, output_class, *, status=status.HTTP_200_OK):
        """The answer to a policy write, the one place the API tells an applied write from
        a proposed one: the saved object as `output_class` reads it, with `status`; or,
        when the write waits for another admin's review, 202 with the proposal."""
        if write.proposal is not None:
            return proposed(write.proposal)
        return Response(output_class(self.fresh(write.applied)).data, status=status)


# Instance types: plain records without policy rules or history, but for their price
# (a policy write, the `price` action).


@extend_schema_view(
    list=extend_schema(summary="List instance types"),
    retrieve=extend_schema(summary="Get an instance type"),
    create=extend_schema(summary="Create an instance type (admins)"),
    update=extend_schema(summary="Replace an instance type (admins)"),
    partial_update=extend_schema(summary="Change an instance type (admins)"),
    destroy=extend_schema(summary="Delete an unused instance type (admins)"),
)
class InstanceTypeViewSet(viewsets.ModelViewSet, ApiViewSet):
    queryset = InstanceType.objects.all()
    serializer_class = api.InstanceTypeSerializer

    @extend_schema(
        summary="Set or clear an instance type's price per hour (admins)",
        description="A policy write (governance.policy.prices): needs a `reason`, recorded "
        "in the policy history; with review required it answers 202 with the proposal.",
        request=api.InstanceTypePriceSerializer,
        responses={200: api.InstanceTypeSerializer, 202: ProposalSerializer},
    )
    @action(detail=True, methods=["post"], url_path="price")
    def price(self, request, pk=None):
        values = self.parse(api.InstanceTypePriceSerializer)
        write = instance_type_price_set(
            actor=request.user,
            instance_type=self.get_object(),
            price=values["price_per_hour"],
            reason=values["reason"],
        )
        return self.written(write, api.InstanceTypeSerializer)

    @extend_schema(
        summary="Change an instance type (admins)",
        description="A PATCH of an executor's settings (the fields of its binding schema, "
        "with a `reason`, and nothing else; left out: kept) is a policy write: recorded "
        "in the policy history, and with review required answered 202 with the "
        "proposal. Other fields are plain record edits.",
        request=api.InstanceTypeSerializer,
        responses={200: api.InstanceTypeSerializer, 202: ProposalSerializer},
    )
    def partial_update(self, request, *args, **kwargs):
        executor, given = instance_type_fields_given(request.data)
        if executor is None:
            return super().partial_update(request, *args, **kwargs)
        itype = self.get_object()
        others = sorted(set(request.data) - set(given) - {"reason"})
        if others:
            raise InvalidInput(
                {others[0]: ["change the executor's settings in a request of their own"]}
            )
        data = self.parse(api.BindingReasonSerializer)
        write = instance_type_binding_set(
            actor=request.user,
            instance_type=itype,
            executor=executor,
            binding={**instance_type_binding_document(itype, executor), **given},
            reason=data["reason"],
        )
        return self.written(write, api.InstanceTypeSerializer)


# Teams: membership is policy (governance.policy.membership), written with a reason,
# recorded in the history, and proposed when changes need review.

_TEAM = api.TeamOutputSerializer
_TEAM_WRITE = "Needs a `reason`, recorded in the policy history with the team's leads and "
_TEAM_WRITE += "members before and after; with review required it answers 202 with the proposal."


@extend_schema_view(
    list=extend_schema(summary="List teams", responses=_TEAM(many=True)),
    retrieve=extend_schema(summary="Get a team", responses=_TEAM),
    create=extend_schema(
        summary="Create a team (admins)",
        description=_TEAM_WRITE,
        request=api.TeamInputSerializer,
        responses={201: _TEAM, 202: ProposalSerializer},
    ),
    update=extend_schema(
        summary="Replace a team (admins)",
        description=_TEAM_WRITE + " Leads and members left out become none.",
        request=api.TeamInputSerializer,
        responses={200: _TEAM, 202: ProposalSerializer},
    ),
    partial_update=extend_schema(
        summary="Change a team (admins)",
        description=_TEAM_WRITE + " Fields left out keep their current value.",
        request=api.TeamInputSerializer,
        responses={200: _TEAM, 202: ProposalSerializer},
    ),
    destroy=extend_schema(
        summary="Delete a team without shares (admins)",
        description=_TEAM_WRITE,
        request=api.TeamDeleteSerializer,
        responses={204: None, 202: ProposalSerializer},
    ),
)
class TeamViewSet(ApiViewSet):
    queryset = Team.objects.prefetch_related("members", "leads")
    serializer_class = api.TeamOutputSerializer

    def list(self, request):
        return self.paginated(self.get_queryset(), api.TeamOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.TeamOutputSerializer(self.get_object()).data)

    def create(self, request):
        values = self.parse(api.TeamInputSerializer)
        write = team_save(
            actor=request.user, data=_team_data(values, base=None), reason=values["reason"]
        )
        return self.written(write, api.TeamOutputSerializer, status=status.HTTP_201_CREATED)

    def update(self, request, pk=None, partial=False):
        team = self.get_object()
        values = self.parse(api.TeamInputSerializer, instance=team, partial=partial)
        write = team_save(
            actor=request.user,
            data=_team_data(values, base=team if partial else None),
            reason=values.get("reason", ""),
            team=team,
        )
        return self.written(write, api.TeamOutputSerializer)

    def partial_update(self, request, pk=None):
        return self.update(request, pk, partial=True)

    def destroy(self, request, pk=None):
        team = self.get_object()
        values = self.parse(api.TeamDeleteSerializer)
        write = team_delete(actor=request.user, team=team, reason=values["reason"])
        if write.proposal is not None:
            return proposed(write.proposal)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _team_data(values: dict, *, base: Team | None) -> TeamData:
    """TeamData from parsed input; fields the client did not send come from `base` (a
    partial change) or are empty."""

    def value(name: str, current):
        if name in values:
            return values[name]
        return current() if base is not None else ([] if name in ("leads", "members") else "")

    return TeamData(
        name=value("name", lambda: base.name),
        description=value("description", lambda: base.description),
        leads=list(value("leads", lambda: base.leads.all())),
        members=list(value("members", lambda: base.members.all())),
    )


# Queues.


@extend_schema_view(
    list=extend_schema(summary="List queues", responses=api.QueueOutputSerializer(many=True)),
    retrieve=extend_schema(
        summary="Get a queue with its capacity map", responses=api.QueueOutputSerializer
    ),
    create=extend_schema(
        summary="Create a queue with its capacity (admins)",
        request=api.QueueCreateSerializer,
        responses={201: api.QueueOutputSerializer},
    ),
    partial_update=extend_schema(
        summary="Replace a queue's capacity map, or change its executor binding (admins)",
        description="Send the whole new `capacity` map, or the executor binding's fields "
        "(its binding schema's, at the top level or in `binding`; left out: kept), with "
        "a `reason` and the `version` you read. A changed binding is checked with the "
        "executor (its live check, within its timeout); a problem is a 400 naming the "
        "field and nothing is saved. With review required: 202 and the proposal.",
        request=api.QueueCapacitySerializer,
        responses=api.QueueOutputSerializer,
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
        write = queue_create(actor=request.user, capacity=capacity, reason=reason, **data)
        return self.written(write, api.QueueOutputSerializer, status=status.HTTP_201_CREATED)

    def partial_update(self, request, pk=None):
        queue = self.get_object()
        data = self.parse(
            api.QueueCapacitySerializer,
            context={"binding_fields": queue_binding_field_names(queue)},
        )
        if "capacity" not in data:
            write = queue_binding_set(
                actor=request.user,
                queue=queue,
                binding={**queue_binding_document(queue), **data["binding"]},
                reason=data["reason"],
                expected_version=data["version"],
            )
            return self.written(write, api.QueueOutputSerializer)
        write = queue_set_capacity(
            actor=request.user,
            queue=queue,
            capacity=data["capacity"],
            reason=data["reason"],
            expected_version=data["version"],
        )
        return self.written(write, api.QueueOutputSerializer)


# Quota shares.

_SHARE_DEFAULTS = {
    "name": "",
    "team": None,
    "strategy": DEFAULT_STRATEGY,
    "borrow_limit": None,
    "in_share_preemption": False,
    "state": QuotaShare.State.ENABLED,
    "capacity_limits": {},
    "priority_ceiling": None,
    "default_workload_class": KEEP_CLASS,
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
        "priority_ceiling": share.priority_ceiling,
        "default_workload_class": KEEP_CLASS,
    }


@extend_schema_view(
    list=extend_schema(summary="List quota shares", responses=api.ShareOutputSerializer(many=True)),
    retrieve=extend_schema(
        summary="Get a quota share with its capacity limits", responses=api.ShareOutputSerializer
    ),
    create=extend_schema(
        summary="Create a quota share (admins)",
        request=api.ShareCreateSerializer,
        responses={201: api.ShareOutputSerializer},
    ),
    update=extend_schema(
        summary="Replace a quota share (admins)",
        description="Fields left out take their defaults. Disable a share with "
        '`"state": "DISABLED"`.',
        request=api.ShareUpdateSerializer,
        responses=api.ShareOutputSerializer,
    ),
    partial_update=extend_schema(
        summary="Change a quota share (admins)",
        description="Fields left out keep their current value. `capacity_limits` replaces "
        "the whole map.",
        request=api.ShareUpdateSerializer,
        responses=api.ShareOutputSerializer,
    ),
)
class ShareViewSet(ApiViewSet):
    queryset = QuotaShare.objects.select_related(
        "queue", "team", "default_workload_class"
    ).prefetch_related(
        Prefetch("limits", queryset=CapacityLimit.objects.select_related("instance_type"))
    )
    serializer_class = api.ShareOutputSerializer
    filterset_class = ShareFilter

    def list(self, request):
        shares = self.filter_queryset(self.get_queryset())
        return self.paginated(shares, api.ShareOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.ShareOutputSerializer(self.get_object()).data)

    def create(self, request):
        values = self.parse(api.ShareCreateSerializer)
        write = share_create(
            actor=request.user,
            queue=values["queue"],
            data=_share_data(values, base=_SHARE_DEFAULTS),
            reason=values["reason"],
        )
        return self.written(write, api.ShareOutputSerializer, status=status.HTTP_201_CREATED)

    def update(self, request, pk=None, partial=False):
        share = self.get_object()
        values = self.parse(api.ShareUpdateSerializer)
        base = _share_base(share) if partial else _SHARE_DEFAULTS
        write = share_update(
            actor=request.user,
            share=share,
            data=_share_data(values, base=base),
            reason=values["reason"],
            expected_version=values["version"],
        )
        return self.written(write, api.ShareOutputSerializer)

    def partial_update(self, request, pk=None):
        return self.update(request, pk, partial=True)


# Urgency definitions.

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
        summary="Get an urgency definition", responses=api.UrgencyOutputSerializer
    ),
    create=extend_schema(
        summary="Create an urgency definition (admins)",
        request=api.UrgencyCreateSerializer,
        responses={201: api.UrgencyOutputSerializer},
    ),
    update=extend_schema(
        summary="Replace an urgency definition (admins)",
        request=api.UrgencyUpdateSerializer,
        responses=api.UrgencyOutputSerializer,
    ),
    partial_update=extend_schema(
        summary="Change an urgency definition (admins)",
        description="Fields left out keep their current value.",
        request=api.UrgencyUpdateSerializer,
        responses=api.UrgencyOutputSerializer,
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
        write = urgency_save(
            actor=request.user,
            data={name: values[name] for name in _URGENCY_FIELDS if name in values},
            reason=values["reason"],
        )
        return self.written(write, api.UrgencyOutputSerializer, status=status.HTTP_201_CREATED)

    def update(self, request, pk=None, partial=False):
        urgency = self.get_object()
        values = self.parse(api.UrgencyUpdateSerializer)
        data = urgency_document(urgency) if partial else {"invokers": []}
        data.update({name: values[name] for name in _URGENCY_FIELDS if name in values})
        write = urgency_save(
            actor=request.user,
            data=data,
            reason=values["reason"],
            urgency=urgency,
            expected_version=values["version"],
        )
        return self.written(write, api.UrgencyOutputSerializer)

    def partial_update(self, request, pk=None):
        return self.update(request, pk, partial=True)


# Workload classes.

_CLASS_WRITE = (
    "A policy write: needs a `reason`, is recorded in the policy history, and with "
    "POLICY_CHANGES_NEED_REVIEW becomes a proposal (202). Jobs already submitted keep the "
    "contract they copied."
)


@extend_schema_view(
    list=extend_schema(
        summary="List workload classes", responses=api.WorkloadClassOutputSerializer(many=True)
    ),
    retrieve=extend_schema(
        summary="Get a workload class", responses=api.WorkloadClassOutputSerializer
    ),
    create=extend_schema(
        summary="Create a workload class (admins)",
        description=_CLASS_WRITE,
        request=api.WorkloadClassCreateSerializer,
        responses={201: api.WorkloadClassOutputSerializer, 202: ProposalSerializer},
    ),
    update=extend_schema(
        summary="Replace a workload class (admins)",
        description=_CLASS_WRITE + " Fields left out take their defaults (0, none).",
        request=api.WorkloadClassUpdateSerializer,
        responses={200: api.WorkloadClassOutputSerializer, 202: ProposalSerializer},
    ),
    partial_update=extend_schema(
        summary="Change a workload class (admins)",
        description=_CLASS_WRITE + " Fields left out keep their current value.",
        request=api.WorkloadClassUpdateSerializer,
        responses={200: api.WorkloadClassOutputSerializer, 202: ProposalSerializer},
    ),
    destroy=extend_schema(
        summary="Delete a workload class nothing uses (admins)",
        description=_CLASS_WRITE,
        request=api.WorkloadClassDeleteSerializer,
        responses={204: None, 202: ProposalSerializer},
    ),
)
class WorkloadClassViewSet(ApiViewSet):
    queryset = WorkloadClass.objects.all()
    serializer_class = api.WorkloadClassOutputSerializer

    def list(self, request):
        return self.paginated(self.get_queryset(), api.WorkloadClassOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.WorkloadClassOutputSerializer(self.get_object()).data)

    def create(self, request):
        values = self.parse(api.WorkloadClassCreateSerializer)
        reason = values.pop("reason")
        write = workload_class_save(actor=request.user, data=values, reason=reason)
        return self.written(
            write, api.WorkloadClassOutputSerializer, status=status.HTTP_201_CREATED
        )

    def update(self, request, pk=None, partial=False):
        workload_class = self.get_object()
        values = self.parse(api.WorkloadClassUpdateSerializer)
        reason, version = values.pop("reason"), values.pop("version")
        data = workload_class_document(workload_class) if partial else {}
        data.update(values)
        write = workload_class_save(
            actor=request.user,
            data=data,
            reason=reason,
            workload_class=workload_class,
            expected_version=version,
        )
        return self.written(write, api.WorkloadClassOutputSerializer)

    def partial_update(self, request, pk=None):
        return self.update(request, pk, partial=True)

    def destroy(self, request, pk=None):
        workload_class = self.get_object()
        values = self.parse(api.WorkloadClassDeleteSerializer)
        write = workload_class_delete(
            actor=request.user, workload_class=workload_class, reason=values["reason"]
        )
        if write.proposal is not None:
            return proposed(write.proposal)
        return Response(status=status.HTTP_204_NO_CONTENT)


# Policy history.


@extend_schema_view(
    list=extend_schema(
        summary="List policy changes, newest first",
        responses=api.PolicyChangeOutputSerializer(many=True),
    ),
    retrieve=extend_schema(
        summary="Get a policy change with its field-level diff",
        responses=api.PolicyChangeOutputSerializer,
    ),
)
class PolicyChangeViewSet(ApiViewSet):
    queryset = PolicyChange.objects.select_related("actor", "subject")
    serializer_class = api.PolicyChangeOutputSerializer
    permission_classes = [HistoryAccess]
    filterset_class = PolicyChangeFilter

    def list(self, request):
        changes = self.filter_queryset(self.get_queryset())
        return self.paginated(changes, api.PolicyChangeOutputSerializer)

    def retrieve(self, request, pk=None):
        return Response(api.PolicyChangeOutputSerializer(self.get_object()).data)

    @extend_schema(
        summary="Revert a change (admins)",
        description="Restores only the fields this change changed, as a new change.",
        request=api.RevertSerializer,
        responses={201: api.PolicyChangeOutputSerializer},
    )
    @action(detail=True, methods=["post"])
    def revert(self, request, pk=None):
        change = self.get_object()
        values = self.parse(api.RevertSerializer)
        write = policy_change_revert(actor=request.user, change=change, reason=values["reason"])
        return self.written(write, api.PolicyChangeOutputSerializer, status=status.HTTP_201_CREATED)
