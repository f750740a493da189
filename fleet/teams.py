"""Teams in the rules table (core.rules): the scopes "led_team" (the teams a lead leads)
and "team_member" (the teams a user belongs to or leads, for separations of duty), and
the `{team}` a refusal names. Registered when the fleet app is ready (fleet.apps)."""

from __future__ import annotations

from django.db.models import Q

from core import rules
from core.permissions import TEAM_LEADS, user_roles
from fleet.models import Team


def led_team_ids(user) -> frozenset[int]:
    """The teams `user` leads as a team lead (cached on the user for the request)."""
    if TEAM_LEADS not in user_roles(user):
        return frozenset()
    cached = getattr(user, "_rules_led_teams", None)
    if cached is None:
        cached = frozenset(Team.objects.filter(leads=user).values_list("pk", flat=True))
        user._rules_led_teams = cached
    return cached


def member_team_ids(user) -> frozenset[int]:
    """The teams `user` belongs to or leads, whatever their role (separation of duties)."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_rules_member_teams", None)
    if cached is None:
        cached = frozenset(
            Team.objects.filter(Q(members=user) | Q(leads=user)).values_list("pk", flat=True)
        )
        user._rules_member_teams = cached
    return cached


def team_id_of(obj) -> int | None:
    if isinstance(obj, Team):
        return obj.pk
    if hasattr(obj, "team_id"):
        return obj.team_id
    share = getattr(obj, "share", None)
    return share.team_id if share is not None else None


def team_path(model) -> str:
    """The lookup from `model` to its team's id."""
    if model is Team:
        return "pk"
    if any(field.name == "team" for field in model._meta.get_fields()):
        return "team_id"
    return "share__team_id"


def team_name_of(obj) -> str | None:
    team = obj if isinstance(obj, Team) else getattr(obj, "team", None)
    if team is None and getattr(obj, "share", None) is not None:
        team = obj.share.team
    return team.name if team is not None else None


def register() -> None:
    rules.register_scope(
        "led_team",
        rules.Scope(
            lambda user, obj: (
                bool(led_team_ids(user)) if obj is None else team_id_of(obj) in led_team_ids(user)
            ),
            lambda user, model: Q(**{f"{team_path(model)}__in": led_team_ids(user)}),
        ),
    )
    rules.register_scope(
        "team_member",
        rules.Scope(
            lambda user, obj: obj is not None and team_id_of(obj) in member_team_ids(user),
            lambda user, model: Q(**{f"{team_path(model)}__in": member_team_ids(user)}),
        ),
    )
    rules.register_word("team", team_name_of)
