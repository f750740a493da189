"""Who may do what: the one rules table of the product.

Every action is declared once in RULES, as data: the roles that may take it, each
within a scope (anything, the teams they lead, the requests they filed, ...), the
sentence that says why not, and the separations of duty that refuse it even to a
role that holds it ("nobody decides a request of a team they lead"). Pages, the API
(governance.api.permissions), templates (`{% allowed %}`), services and selectors
all ask this module, so no entry point decides on its own:

- `allowed(user, action, obj=None)` and `refusal(...)` (None, or the sentence why not);
  without `obj` the answer is "may this user ever take it" (for links and buttons);
- `require(user, action, obj=None)` raises `Refused` (a PermissionDenied) with that
  sentence: what services call with their `actor` before they write;
- `visible(user, action, queryset)` keeps the rows the user may take the action on
  (lists, search, counts), with the same scopes expressed as queries.

Roles are Django groups (governance.permissions.user_roles); SIGNED_IN is every
signed-in user. Anonymous users may do nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q, QuerySet

from governance.errors import Refused
from governance.permissions import (
    ADMINS,
    EXCEPTION_OWNERS,
    LEADERSHIP,
    TEAM_LEADS,
    user_roles,
)

SIGNED_IN = "signed_in"
WRITERS = (ADMINS, TEAM_LEADS, EXCEPTION_OWNERS)  # the roles that write knowledge


@dataclass(frozen=True)
class Grant:
    role: str
    scope: str = "any"


@dataclass(frozen=True)
class Rule:
    grants: tuple[Grant, ...]
    # Why not, to a user without any of the roles.
    refusal: str
    # (scope, sentence): refused when the scope holds, even to a role that may act.
    unless: tuple[tuple[str, str], ...] = ()
    # Why not, to a user with one of the roles but outside its scope ("" = `refusal`).
    out_of_scope: str = ""


def _roles(*roles: str, scope: str = "any") -> tuple[Grant, ...]:
    return tuple(Grant(role, scope) for role in roles)


POLICY_READERS = (ADMINS, TEAM_LEADS, EXCEPTION_OWNERS, LEADERSHIP)

RULES: dict[str, Rule] = {
    # Policy: queues, shares, limits, teams, instance types, urgency definitions.
    "policy.view": Rule(
        _roles(*POLICY_READERS),
        "policies are for platform admins, team leads, exception owners and leadership",
    ),
    "policy.edit": Rule(_roles(ADMINS), "only platform admins change the policy"),
    "history.view": Rule(
        _roles(ADMINS, EXCEPTION_OWNERS),
        "the policy history is for platform admins and exception owners",
    ),
    "proposal.view": Rule(_roles(ADMINS), "policy proposals are for platform admins"),
    "proposal.review": Rule(
        _roles(ADMINS),
        "only platform admins review policy proposals",
        unless=(("author", "you proposed this change: another admin must review it"),),
    ),
    "proposal.withdraw": Rule(
        _roles(SIGNED_IN, scope="author"), "only the admin who proposed this change withdraws it"
    ),
    "exception_owner.manage": Rule(
        _roles(ADMINS), "only platform admins appoint and remove exception owners"
    ),
    # Exception requests.
    "exception.list": Rule(
        _roles(ADMINS, TEAM_LEADS, EXCEPTION_OWNERS),
        "exception requests are for platform admins, team leads and exception owners",
    ),
    "exception.view": Rule(
        (
            Grant(ADMINS),
            Grant(SIGNED_IN, "requester"),
            Grant(TEAM_LEADS, "led_team"),
            Grant(EXCEPTION_OWNERS, "owner_scope"),
        ),
        "you may not see this exception request",
    ),
    "exception.file": Rule(
        (Grant(ADMINS), Grant(TEAM_LEADS, "led_team")),
        "only team leads file exception requests",
        out_of_scope="you can only file requests for teams you lead, and you do not lead {team}",
    ),
    "exception.edit": Rule(
        _roles(SIGNED_IN, scope="requester"), "only the requester may edit this draft"
    ),
    "exception.submit": Rule(
        (Grant(ADMINS), Grant(SIGNED_IN, "requester"), Grant(TEAM_LEADS, "led_team")),
        "only the requester or a lead of the team may submit this request",
    ),
    "exception.withdraw": Rule(
        _roles(SIGNED_IN, scope="requester"),
        "only the requester may withdraw this request",
    ),
    "exception.decide": Rule(
        (Grant(ADMINS), Grant(EXCEPTION_OWNERS, "owner_scope")),
        "only exception owners decide exception requests",
        out_of_scope="this request is outside your scope: its queue and share have other owners",
        unless=(
            ("requester", "you filed this request: another exception owner must decide it"),
            (
                "led_team",
                "you lead team {team}: an exception owner outside the team must decide it",
            ),
            (
                "team_member",
                "you belong to team {team}: an exception owner outside the team must decide it",
            ),
        ),
    ),
    "exception.revoke": Rule(
        (Grant(ADMINS), Grant(EXCEPTION_OWNERS, "owner_scope")),
        "only an exception owner of its queue or share, or an admin, may revoke it",
    ),
    "exception.decision_queue": Rule(
        _roles(EXCEPTION_OWNERS), "the decision queue is for exception owners"
    ),
    "exception.counts": Rule(
        _roles(ADMINS, LEADERSHIP), "exception counts are for leadership and platform admins"
    ),
    # Knowledge base.
    "knowledge.view": Rule(_roles(SIGNED_IN), "sign in to read the knowledge base"),
    "knowledge.write": Rule(
        _roles(*WRITERS), "leadership reads the knowledge base; ask an admin to write"
    ),
    "article.view": Rule(
        _roles(SIGNED_IN, scope="record_visible"),
        "this decision record belongs to an exception request you may not see",
    ),
    "article.edit": Rule(
        (
            Grant(ADMINS),
            *_roles(*WRITERS, scope="article_owner"),
            *_roles(*WRITERS, scope="article_editor"),
        ),
        "only the article's owner, its editors and platform admins may change it",
        unless=(
            (
                "decision_record",
                "a decision record is append-only: nobody changes it after the decision",
            ),
        ),
    ),
    "article.editors": Rule(
        (Grant(ADMINS), *_roles(*WRITERS, scope="article_owner")),
        "only the article's owner or a platform admin changes who may edit it",
    ),
    "article.delete": Rule(
        (Grant(ADMINS), *_roles(*WRITERS, scope="article_owner")),
        "only the article's owner and platform admins may delete it",
        unless=(
            (
                "decision_record",
                "a decision record is append-only: nobody deletes it after the decision",
            ),
        ),
    ),
    # Jobs (a queue is shared: who holds what, and why, is the point, so leads see all).
    "job.view": Rule(_roles(ADMINS, TEAM_LEADS), "jobs are for platform admins and team leads"),
    "job.submit": Rule(
        (Grant(ADMINS), Grant(TEAM_LEADS, "led_team")),
        "only team leads and platform admins submit jobs",
        out_of_scope="you may only submit jobs to shares of teams you lead, and you do not lead "
        "{team}",
    ),
    "job.manage": Rule(
        (Grant(ADMINS), Grant(TEAM_LEADS, "led_team")),
        "only platform admins and the leads of its team change a job",
    ),
    # Why jobs wait and when they start (issue 16): the queue's pending list is read as
    # the jobs are; "if you submit this now" is asked of a share one may submit to.
    "job.pending.view": Rule(
        _roles(ADMINS, TEAM_LEADS), "queues' waiting jobs are for platform admins and team leads"
    ),
    "job.estimate": Rule(
        (Grant(ADMINS), Grant(TEAM_LEADS, "led_team")),
        "only team leads and platform admins ask when a job would start",
        out_of_scope="you may only ask about shares of teams you lead, and you do not lead {team}",
    ),
    "job_definition.manage": Rule(
        _roles(ADMINS), "only platform admins register and change job definitions"
    ),
    # The signed-in user's own things: the start page, the API's schema and docs, tokens.
    "account.use": Rule(_roles(SIGNED_IN), "sign in first"),
    "lockout.manage": Rule(_roles(ADMINS), "only platform admins see login lockouts"),
    "outbox.view": Rule(_roles(ADMINS), "only platform admins read the e-mails the product sent"),
    # Dashboard and what-if.
    "dashboard.view": Rule(
        _roles(ADMINS, LEADERSHIP), "the dashboard is for leadership and platform admins"
    ),
    "dashboard.refresh": Rule(_roles(ADMINS), "only platform admins refresh the figures"),
    "whatif.use": Rule(_roles(ADMINS), "what-if comparisons are for platform admins"),
    "whatif.review": Rule(
        _roles(ADMINS),
        "only platform admins review what-if drafts",
        unless=(("author", "you wrote this draft: another admin must review it"),),
    ),
}


# Scopes: whether a grant covers one object, and the same as a query over a model.


def led_team_ids(user) -> frozenset[int]:
    """The teams `user` leads as a team lead (cached on the user for the request)."""
    if TEAM_LEADS not in user_roles(user):
        return frozenset()
    cached = getattr(user, "_rules_led_teams", None)
    if cached is None:
        from governance.models import Team

        cached = frozenset(Team.objects.filter(leads=user).values_list("pk", flat=True))
        user._rules_led_teams = cached
    return cached


def member_team_ids(user) -> frozenset[int]:
    """The teams `user` belongs to or leads, whatever their role (separation of duties)."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_rules_member_teams", None)
    if cached is None:
        from governance.models import Team

        cached = frozenset(
            Team.objects.filter(Q(members=user) | Q(leads=user)).values_list("pk", flat=True)
        )
        user._rules_member_teams = cached
    return cached


def _team_id(obj) -> int | None:
    from governance.models import Team

    if isinstance(obj, Team):
        return obj.pk
    if hasattr(obj, "team_id"):
        return obj.team_id
    share = getattr(obj, "share", None)
    return share.team_id if share is not None else None


def _team_path(model) -> str:
    from governance.models import Team

    if model is Team:
        return "pk"
    if any(field.name == "team" for field in model._meta.get_fields()):
        return "team_id"
    return "share__team_id"


def _owns_scope(user, obj) -> bool:
    if obj is None:
        return True
    from governance.models import ExceptionOwner

    scope = Q(queue_id=obj.queue_id)
    if obj.share_id is not None:
        scope |= Q(share_id=obj.share_id)
    return ExceptionOwner.objects.filter(scope, user=user).exists()


def _owner_scope_query(user, model) -> Q:
    from governance.models import ExceptionOwner

    return Q(
        Exists(
            ExceptionOwner.objects.filter(user=user).filter(
                Q(queue=OuterRef("queue")) | Q(share=OuterRef("share"))
            )
        )
    )


def _editor(user, article) -> bool:
    return any(editor.pk == user.pk for editor in article.editors.all())


def _record_visible(user, article) -> bool:
    if article is None or getattr(article, "decision_for_id", None) is None:
        return True
    return allowed(user, "exception.view", article.decision_for)


def _record_visible_query(user, model) -> Q:
    from governance.models import ExceptionRequest

    seen = visible(user, "exception.view", ExceptionRequest.objects.all())
    return Q(decision_for__isnull=True) | Q(decision_for__in=seen.values("pk"))


@dataclass(frozen=True)
class Scope:
    # (user, obj) -> bool; with obj None: could the grant hold for some object?
    check: Callable
    # (user, model) -> Q, or None when the scope has no query form.
    query: Callable | None = None


EVERYTHING = Q()

SCOPES: dict[str, Scope] = {
    "any": Scope(lambda user, obj: True, lambda user, model: EVERYTHING),
    "led_team": Scope(
        lambda user, obj: (
            bool(led_team_ids(user)) if obj is None else _team_id(obj) in led_team_ids(user)
        ),
        lambda user, model: Q(**{f"{_team_path(model)}__in": led_team_ids(user)}),
    ),
    "team_member": Scope(
        lambda user, obj: obj is not None and _team_id(obj) in member_team_ids(user),
        lambda user, model: Q(**{f"{_team_path(model)}__in": member_team_ids(user)}),
    ),
    "owner_scope": Scope(_owns_scope, _owner_scope_query),
    "requester": Scope(
        lambda user, obj: obj is None or obj.requested_by_id == user.pk,
        lambda user, model: Q(requested_by=user),
    ),
    "author": Scope(lambda user, obj: obj is None or obj.author_id == user.pk),
    "article_owner": Scope(lambda user, obj: obj is None or obj.owner_id == user.pk),
    "article_editor": Scope(lambda user, obj: obj is None or _editor(user, obj)),
    "record_visible": Scope(_record_visible, _record_visible_query),
    "decision_record": Scope(lambda user, obj: getattr(obj, "decision_for_id", None) is not None),
}


# Asking the table.


class _Words(dict):
    def __missing__(self, key):
        return "it"


def _say(sentence: str, obj) -> str:
    words = _Words()
    if obj is not None:
        from governance.models import Team

        team = obj if isinstance(obj, Team) else getattr(obj, "team", None)
        if team is None and getattr(obj, "share", None) is not None:
            team = obj.share.team
        if team is not None:
            words["team"] = team.name
    return sentence.format_map(words)


def _roles_of(user) -> frozenset[str]:
    return user_roles(user) | {SIGNED_IN}


def refusal(user, action: str, obj=None) -> str | None:
    """None when `user` may take `action` (on `obj`); otherwise the sentence why not.
    An unknown action raises KeyError, so a typo fails its tests."""
    rule = RULES[action]
    if user is None or not user.is_authenticated:
        return "sign in first"
    if obj is not None:
        for scope, sentence in rule.unless:
            if SCOPES[scope].check(user, obj):
                return _say(sentence, obj)
    roles = _roles_of(user)
    held = [grant for grant in rule.grants if grant.role in roles]
    if not held:
        return _say(rule.refusal, obj)
    if not any(SCOPES[grant.scope].check(user, obj) for grant in held):
        return _say(rule.out_of_scope or rule.refusal, obj)
    return None


def allowed(user, action: str, obj=None) -> bool:
    return refusal(user, action, obj) is None


def require(user, action: str, obj=None) -> None:
    """Raise Refused, with the sentence why not, unless `user` may take `action`."""
    why = refusal(user, action, obj)
    if why is not None:
        raise Refused(why)


def visible(user, action: str, queryset: QuerySet) -> QuerySet:
    """The rows of `queryset` on which `user` may take `action`: the grants' scopes as
    one query, the separations of duty excluded."""
    rule = RULES[action]
    if user is None or not user.is_authenticated:
        return queryset.none()
    roles = _roles_of(user)
    model = queryset.model
    parts = []
    for grant in rule.grants:
        if grant.role not in roles:
            continue
        query = SCOPES[grant.scope].query
        if query is None:
            raise ValueError(f"scope {grant.scope!r} of {action!r} has no query form")
        part = query(user, model)
        if part == EVERYTHING:
            parts = [EVERYTHING]
            break
        parts.append(part)
    if not parts:
        return queryset.none()
    if parts != [EVERYTHING]:
        combined = parts[0]
        for part in parts[1:]:
            combined |= part
        queryset = queryset.filter(combined)
    for scope, _sentence in rule.unless:
        query = SCOPES[scope].query
        if query is None:
            raise ValueError(f"scope {scope!r} of {action!r} has no query form")
        queryset = queryset.exclude(query(user, model))
    return queryset
