"""What exceptions add to the layers below, registered when the governance app is ready
(governance.apps): the exception owners' scopes in the rules table (core.rules),
"owner_scope" (an owner of the object's queue or share) and "record_visible" (a
decision record of a request the user may see); and the priority an active priority
raise grants a job (scheduler.services.priorities)."""

from __future__ import annotations

from django.db.models import Exists, Max, OuterRef, Q

from core import rules
from governance.exceptions.models import ExceptionOwner, ExceptionRequest
from scheduler.services import priorities


def _owns_scope(user, obj) -> bool:
    if obj is None:
        return True
    scope = Q(queue_id=obj.queue_id)
    if obj.share_id is not None:
        scope |= Q(share_id=obj.share_id)
    return ExceptionOwner.objects.filter(scope, user=user).exists()


def _owner_scope_query(user, model) -> Q:
    return Q(
        Exists(
            ExceptionOwner.objects.filter(user=user).filter(
                Q(queue=OuterRef("queue")) | Q(share=OuterRef("share"))
            )
        )
    )


def _record_visible(user, article) -> bool:
    if article is None or getattr(article, "decision_for_id", None) is None:
        return True
    return rules.allowed(user, "exception.view", article.decision_for)


def _record_visible_query(user, model) -> Q:
    seen = rules.visible(user, "exception.view", ExceptionRequest.objects.all())
    return Q(decision_for__isnull=True) | Q(decision_for__in=seen.values("pk"))


def granted_priority(job) -> int | None:
    """The highest priority the job's active priority-raise exceptions grant it."""
    return ExceptionRequest.objects.filter(
        state=ExceptionRequest.State.ACTIVE,
        kind=ExceptionRequest.Kind.PRIORITY_RAISE,
        jobs=job,
    ).aggregate(granted=Max("urgency__priority"))["granted"]


def register() -> None:
    rules.register_scope("owner_scope", rules.Scope(_owns_scope, _owner_scope_query))
    rules.register_scope("record_visible", rules.Scope(_record_visible, _record_visible_query))
    priorities.register_priority_grant(granted_priority)
