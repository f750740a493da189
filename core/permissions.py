"""Roles: who a user is. What each role may do is core.rules, the one table.

Roles are Django groups; a superuser is an admin.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User

ADMINS = "admins"
TEAM_LEADS = "team_leads"
EXCEPTION_OWNERS = "exception_owners"
LEADERSHIP = "leadership"
ROLES = (ADMINS, TEAM_LEADS, EXCEPTION_OWNERS, LEADERSHIP)
ROLE_LABELS = {
    ADMINS: "Platform admin",
    TEAM_LEADS: "Team lead",
    EXCEPTION_OWNERS: "Exception owner",
    LEADERSHIP: "Leadership",
}


def user_roles(user: User | AnonymousUser) -> frozenset[str]:
    """The user's roles, cached on the user object for the request."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_governance_roles", None)
    if cached is None:
        cached = frozenset(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        if user.is_superuser:
            cached = cached | {ADMINS}
        user._governance_roles = cached
    return cached


def has_role(user, *roles: str) -> bool:
    return bool(user_roles(user) & set(roles))


def is_admin(user) -> bool:
    return has_role(user, ADMINS)


def role_label(user) -> str:
    roles = user_roles(user)
    return ", ".join(ROLE_LABELS[r] for r in ROLES if r in roles) or "No role"
