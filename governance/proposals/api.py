"""Policy proposals in the API (/api/v1/policy-proposals/): list, read, approve, reject,
withdraw; and the 202 answer of a policy write that became a proposal.

With POLICY_CHANGES_NEED_REVIEW a write (share, queue, urgency definition, team, roles,
revert)
answers 202 Accepted with the proposal: nothing applies until another admin approves
it here. Who may do what is core.rules.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from core import rules
from core.api.base import BaseApiViewSet
from core.api.permissions import TableAccess
from governance.models import PolicyProposal
from governance.proposals import services
from governance.proposals.selectors import proposal_list


class ProposalSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username", allow_null=True, default=None)
    reviewer = serializers.CharField(source="reviewer.username", allow_null=True, default=None)
    subject = serializers.CharField(
        source="subject.username",
        allow_null=True,
        default=None,
        help_text="For a change of roles: the user whose roles it changes.",
    )
    # Plain strings: "kind" and "state" name other enums in the schema already.
    kind = serializers.CharField(help_text="One of " + ", ".join(PolicyProposal.Kind.values))
    state = serializers.CharField(help_text="One of " + ", ".join(PolicyProposal.State.values))
    after = serializers.JSONField(source="payload.after", help_text="What it would make it.")

    class Meta:
        model = PolicyProposal
        fields = [
            "id",
            "kind",
            "state",
            "object_repr",
            "author",
            "reason",
            "queue",
            "share",
            "urgency",
            "reverts",
            "team",
            "subject",
            "before",
            "after",
            "base_version",
            "created_at",
            "reviewer",
            "reviewed_at",
            "review_note",
            "applied_change",
        ]


def proposed(proposal: PolicyProposal) -> Response:
    """The answer to a write that waits for another admin's review."""
    return Response(ProposalSerializer(proposal).data, status=status.HTTP_202_ACCEPTED)


class ReviewSerializer(serializers.Serializer):
    note = serializers.CharField(
        allow_blank=True, default="", max_length=10_000, help_text="Required to reject."
    )


class ProposalAccess(TableAccess):
    rule_actions = {"read": "proposal.view", "write": "proposal.view"}


@extend_schema_view(
    list=extend_schema(summary="List policy proposals (admins), waiting ones first"),
    retrieve=extend_schema(summary="Get a policy proposal (admins)"),
)
class ProposalViewSet(BaseApiViewSet):
    permission_classes = [ProposalAccess]
    serializer_class = ProposalSerializer
    queryset = PolicyProposal.objects.none()

    def _get(self, pk) -> PolicyProposal:
        proposal = proposal_list().filter(pk=pk if str(pk).isdigit() else 0).first()
        if proposal is None:
            raise exceptions.NotFound("no such proposal")
        return proposal

    def _call(self, function, proposal, action_name: str, **kwargs) -> Response:
        why = rules.refusal(self.request.user, action_name, proposal)
        if why is not None:
            raise exceptions.PermissionDenied(why)
        done = function(actor=self.request.user, proposal=proposal, **kwargs)
        return Response(ProposalSerializer(self._get(done.pk)).data)

    def list(self, request):
        return self.paginated(proposal_list(), ProposalSerializer)

    def retrieve(self, request, pk=None):
        return Response(ProposalSerializer(self._get(pk)).data)

    @extend_schema(
        summary="Approve a proposal: it applies now (another admin than its author)",
        request=ReviewSerializer,
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        proposal = self._get(pk)
        note = self.parse(ReviewSerializer)["note"]
        return self._call(services.proposal_approve, proposal, "proposal.review", note=note)

    @extend_schema(summary="Reject a proposal, with a note", request=ReviewSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        proposal = self._get(pk)
        note = self.parse(ReviewSerializer)["note"]
        return self._call(services.proposal_reject, proposal, "proposal.review", note=note)

    @extend_schema(summary="Withdraw your own proposal", request=None)
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        return self._call(services.proposal_withdraw, self._get(pk), "proposal.withdraw")
