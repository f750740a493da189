"""Who may do what: the one rules table of the product.

Every action is declared once in RULES, as data: the roles that may take it, each
within a scope (anything, the teams they lead, the requests they filed, ...), the
sentence that says why not, and the separations of duty that refuse it even to a
role that holds it ("nobody decides a request of a team they lead"). Pages, the API
(core.api.permissions), templates (`{% allowed %}`), services and selectors
all ask this module, so no entry point decides on its own:

- `allowed(user, action, obj=None)` and `refusal(...)` (None, or the sentence why not);
  without `obj` the answer is "may this user ever take it" (for links and buttons);
- `require(user, action, obj=None)` raises `Refused` (a PermissionDenied) with that
  sentence: what services call with their `actor` before they write;
- `visible(user, action, queryset)` keeps the rows the user may take the action on
  (lists, search, counts), with the same scopes expressed as queries.

Roles are Django groups (core.permissions.user_roles); SIGNED_IN is every
signed-in user. Anonymous users may do nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from core.errors import Refused
from core.permissions import ADMINS, EXCEPTION_OWNERS, LEADERSHIP, TEAM_LEADS, user_roles

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
    # A job's output is its team's (it may print their data, paths or tokens): unlike
    # the job itself, not every lead's to read.
    "job.logs.view": Rule(
        (Grant(ADMINS), Grant(TEAM_LEADS, "led_team")),
        "only platform admins and the leads of its team read a job's output",
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
    "directory.manage": Rule(
        _roles(ADMINS), "only platform admins map directory groups to roles and teams"
    ),
    "outbox.view": Rule(_roles(ADMINS), "only platform admins read the e-mails the product sent"),
    "runner.view": Rule(_roles(ADMINS), "only platform admins see the runners and their hosts"),
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


def _editor(user, article) -> bool:
    return any(editor.pk == user.pk for editor in article.editors.all())


@dataclass(frozen=True)
class Scope:
    # (user, obj) -> bool; with obj None: could the grant hold for some object?
    check: Callable
    # (user, model) -> Q, or None when the scope has no query form.
    query: Callable | None = None


EVERYTHING = Q()

SCOPES: dict[str, Scope] = {
    "any": Scope(lambda user, obj: True, lambda user, model: EVERYTHING),
    "requester": Scope(
        lambda user, obj: obj is None or obj.requested_by_id == user.pk,
        lambda user, model: Q(requested_by=user),
    ),
    "author": Scope(lambda user, obj: obj is None or obj.author_id == user.pk),
    "article_owner": Scope(lambda user, obj: obj is None or obj.owner_id == user.pk),
    "article_editor": Scope(lambda user, obj: obj is None or _editor(user, obj)),
    "decision_record": Scope(lambda user, obj: getattr(obj, "decision_for_id", None) is not None),
}

# Words a refusal may name ("you do not lead {team}"): word -> (obj -> text or None).
WORDS: dict[str, Callable] = {}


def register_scope(name: str, scope: Scope) -> None:
    """A scope that needs the data of a higher layer: the team scopes come from
    fleet.teams, the exception owners' from governance.exceptions.scopes, each
    registered when its app is ready. (This module sits below them all.)"""
    SCOPES[name] = scope


def register_word(name: str, describe: Callable) -> None:
    """What `{name}` in a refusal says of an object (None: "it")."""
    WORDS[name] = describe


def unknown_scopes() -> set[str]:
    """Scopes that RULES name and nothing registered: empty once the apps are ready."""
    named = {grant.scope for rule in RULES.values() for grant in rule.grants}
    named |= {scope for rule in RULES.values() for scope, _sentence in rule.unless}
    return named - SCOPES.keys()


# Asking the table.


class _Words(dict):
    def __missing__(self, key):
        return "it"


def _say(sentence: str, obj) -> str:
    words = _Words()
    if obj is not None:
        for name, describe in WORDS.items():
            text = describe(obj)
            if text is not None:
                words[name] = text
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
