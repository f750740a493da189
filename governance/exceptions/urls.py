"""Routes of the exception and knowledge pages, and of their API (/api/v1/...)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from governance.exceptions import api
from governance.exceptions import views as exceptions
from governance.knowledge import views as knowledge

router = SimpleRouter()
router.register(
    "api/v1/exception-requests", api.ExceptionRequestViewSet, basename="api-exception-request"
)
router.register("api/v1/knowledge/articles", api.ArticleViewSet, basename="api-knowledge-article")

urlpatterns = [
    path("exceptions/", exceptions.exception_list, name="exception-list"),
    path("exceptions/new/", exceptions.exception_create, name="exception-create"),
    path("exceptions/urgency-help/", exceptions.urgency_help, name="exception-urgency-help"),
    path("exceptions/decisions/", exceptions.decision_queue, name="decision-queue"),
    path("exceptions/counts/", exceptions.exception_counts, name="exception-counts"),
    path("exceptions/owners/", exceptions.exception_owners, name="exception-owners"),
    path(
        "exceptions/owners/<int:pk>/remove/",
        exceptions.exception_owner_remove,
        name="exception-owner-remove",
    ),
    path("exceptions/<int:pk>/", exceptions.exception_detail, name="exception-detail"),
    path("exceptions/<int:pk>/edit/", exceptions.exception_edit, name="exception-edit"),
    path("exceptions/<int:pk>/submit/", exceptions.exception_submit, name="exception-submit"),
    path("exceptions/<int:pk>/withdraw/", exceptions.exception_withdraw, name="exception-withdraw"),
    path("exceptions/<int:pk>/approve/", exceptions.exception_approve, name="exception-approve"),
    path("exceptions/<int:pk>/deny/", exceptions.exception_deny, name="exception-deny"),
    path("exceptions/<int:pk>/revoke/", exceptions.exception_revoke, name="exception-revoke"),
    path("knowledge/", knowledge.knowledge_search, name="knowledge-search"),
    path("knowledge/new/", knowledge.article_new, name="knowledge-create"),
    path("knowledge/<slug:slug>/", knowledge.article_detail, name="knowledge-article"),
    path("knowledge/<slug:slug>/edit/", knowledge.article_edit, name="knowledge-edit"),
    *router.urls,
]
