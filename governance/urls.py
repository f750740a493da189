"""The policy pages and policy proposals (with their API). `/` redirects to the queue overview
(governance.system.home)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from governance import system
from governance.policy import binding_views as binding
from governance.policy import history_views as history
from governance.policy import team_views as teams
from governance.policy import urgency_views as urgency
from governance.policy import views as policy
from governance.policy import workload_class_views as classes
from governance.policy_code import views as policy_code
from governance.proposals import views as proposals
from governance.proposals.api import ProposalViewSet

router = SimpleRouter()
router.register("api/v1/policy-proposals", ProposalViewSet, basename="api-policy-proposal")

urlpatterns = [
    path("outbox/", system.outbox, name="outbox"),
    path("queues/", policy.queues, name="queue-list"),
    path("queues/<int:pk>/", policy.queue_detail, name="queue-detail"),
    path("queues/<int:pk>/capacity/", policy.queue_capacity, name="queue-capacity"),
    path(
        "queues/<int:pk>/capacity/impact/",
        policy.queue_capacity_impact,
        name="queue-capacity-impact",
    ),
    path("queues/<int:pk>/binding/", binding.queue_binding, name="queue-binding"),
    path(
        "queues/<int:pk>/binding/impact/",
        binding.queue_binding_impact,
        name="queue-binding-impact",
    ),
    path("instance-types/", binding.instance_types, name="instance-type-list"),
    path(
        "instance-types/<int:pk>/binding/",
        binding.instance_type_binding,
        name="instance-type-binding",
    ),
    path("instance-types/<int:pk>/price/", binding.instance_type_price, name="instance-type-price"),
    path("queues/<int:pk>/policy-code/", policy_code.queue_policy_code, name="queue-policy-code"),
    path(
        "queues/<int:pk>/policy-code/<str:format>/download/",
        policy_code.queue_policy_download,
        name="queue-policy-download",
    ),
    path(
        "queues/<int:pk>/policy-code/plan/", policy_code.queue_policy_plan, name="queue-policy-plan"
    ),
    path(
        "queues/<int:pk>/policy-code/apply/",
        policy_code.queue_policy_apply,
        name="queue-policy-apply",
    ),
    path("queues/<int:queue_pk>/shares/new/", policy.share_create, name="share-create"),
    path("queues/<int:queue_pk>/shares/impact/", policy.share_impact, name="share-impact"),
    path("policies/", policy.policy_list, name="policy-list"),
    path("policies/proposals/", proposals.proposals, name="proposal-list"),
    path(
        "policies/proposals/<int:pk>/approve/",
        proposals.proposal_approve,
        name="proposal-approve",
    ),
    path("policies/proposals/<int:pk>/reject/", proposals.proposal_reject, name="proposal-reject"),
    path(
        "policies/proposals/<int:pk>/withdraw/",
        proposals.proposal_withdraw,
        name="proposal-withdraw",
    ),
    path("shares/<int:pk>/edit/", policy.share_edit, name="share-edit"),
    path("history/", history.history, name="history"),
    path("history/<int:pk>/revert/", history.history_revert, name="history-revert"),
    path("teams/", teams.teams, name="team-list"),
    path("teams/new/", teams.team_edit, name="team-create"),
    path("teams/<int:pk>/edit/", teams.team_edit, name="team-edit"),
    path("urgency/", urgency.urgencies, name="urgency-list"),
    path("urgency/new/", urgency.urgency_edit, name="urgency-create"),
    path("urgency/<int:pk>/edit/", urgency.urgency_edit, name="urgency-edit"),
    path("workload-classes/", classes.workload_classes, name="workload-class-list"),
    path("workload-classes/new/", classes.workload_class_edit, name="workload-class-create"),
    path(
        "workload-classes/<int:pk>/edit/", classes.workload_class_edit, name="workload-class-edit"
    ),
    path(
        "workload-classes/<int:pk>/impact/",
        classes.workload_class_impact,
        name="workload-class-impact",
    ),
    path(
        "workload-classes/<int:pk>/delete/",
        classes.workload_class_delete,
        name="workload-class-delete",
    ),
    *router.urls,
    # An executor's own binding address from before the generic page (bookmarks);
    # last, so every page above is matched first.
    path(
        "queues/<int:pk>/<slug:executor>/",
        binding.legacy_binding,
        {"holder": "queue"},
        name="queue-binding-legacy",
    ),
    path(
        "instance-types/<int:pk>/<slug:executor>/",
        binding.legacy_binding,
        {"holder": "instance_type"},
        name="instance-type-binding-legacy",
    ),
]
