"""Who may do what with exception requests and knowledge articles.

Role checks come from governance.permissions; this module adds the object rules.
The `*_refusal` functions return None when the action is allowed and otherwise the
sentence that tells the user why not: pages and the API show that same sentence,
and the services ask the same functions before they write.
"""

from __future__ import annotations

from governance.permissions import (
    ADMINS,
    EXCEPTION_OWNERS,
    LEADERSHIP,
    TEAM_LEADS,
    has_role,
    is_admin,
)

# Pages and lists.


def can_view_exceptions(user) -> bool:
    return has_role(user, ADMINS, TEAM_LEADS, EXCEPTION_OWNERS)


def can_file_requests(user) -> bool:
    return has_role(user, ADMINS, TEAM_LEADS)


def can_decide_requests(user) -> bool:
    """Owners decide in their scope; admins may decide any request."""
    return has_role(user, ADMINS, EXCEPTION_OWNERS)


def can_view_decision_queue(user) -> bool:
    return has_role(user, EXCEPTION_OWNERS)


def can_view_exception_counts(user) -> bool:
    return has_role(user, ADMINS, LEADERSHIP)


def leads_team(user, team) -> bool:
    return team.leads.filter(pk=user.pk).exists()


def owns_scope(user, request) -> bool:
    """`user` is an exception owner whose scope (the queue or the share) covers `request`."""
    if not has_role(user, EXCEPTION_OWNERS):
        return False
    from governance.models import ExceptionOwner

    scopes = ExceptionOwner.objects.filter(user=user)
    if request.share_id is not None:
        return (
            scopes.filter(queue_id=request.queue_id).exists()
            or scopes.filter(share_id=request.share_id).exists()
        )
    return scopes.filter(queue_id=request.queue_id).exists()


# One request.


def can_view_request(user, request) -> bool:
    if is_admin(user) or request.requested_by_id == user.pk:
        return True
    if has_role(user, TEAM_LEADS) and leads_team(user, request.team):
        return True
    return owns_scope(user, request)


def file_refusal(user, team) -> str | None:
    if not can_file_requests(user):
        return "only team leads file exception requests"
    if team is not None and not is_admin(user) and not leads_team(user, team):
        return f"you can only file requests for teams you lead, and you do not lead {team}"
    return None


def submit_refusal(user, request) -> str | None:
    if request.requested_by_id == user.pk or is_admin(user):
        return None
    if has_role(user, TEAM_LEADS) and leads_team(user, request.team):
        return None
    return "only the requester or a lead of the team may submit this request"


def decide_refusal(user, request) -> str | None:
    if request.requested_by_id == user.pk:
        return "you filed this request: another exception owner must decide it"
    if is_admin(user):
        return None
    if not has_role(user, EXCEPTION_OWNERS):
        return "only exception owners decide exception requests"
    if not owns_scope(user, request):
        return "this request is outside your scope: its queue and share have other owners"
    return None


def revoke_refusal(user, request) -> str | None:
    if is_admin(user) or owns_scope(user, request):
        return None
    return "only an exception owner of its queue or share, or an admin, may revoke it"


# Knowledge articles.


def can_view_knowledge(user) -> bool:
    return user.is_authenticated


def can_write_articles(user) -> bool:
    """Leadership reads; everyone with another role may write articles."""
    return has_role(user, ADMINS, TEAM_LEADS, EXCEPTION_OWNERS)


def can_edit_article(user, article) -> bool:
    if is_admin(user):
        return True
    if not user.is_authenticated:
        return False
    if article.owner_id == user.pk:
        return True
    return any(editor.pk == user.pk for editor in article.editors.all())


def who_may_change(article) -> list[str]:
    """The people who may change `article`, in words, for its page."""
    names = []
    if article.owner is not None:
        names.append(f"{_name(article.owner)} (owner)")
    names += [_name(editor) for editor in article.editors.all() if editor != article.owner]
    names.append("platform admins")
    return names


def _name(user) -> str:
    return user.get_full_name() or user.get_username()
