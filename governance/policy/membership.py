"""Membership is policy: who leads and belongs to a team, and who holds which role.

Team membership decides who may submit a team's jobs and who may not decide its
exception requests (core.rules, separations of duty), so a change of it is a policy
write like a share's: it needs a reason, is recorded as a PolicyChange (who, when,
why, the team's document before and after), and with POLICY_CHANGES_NEED_REVIEW it
becomes a proposal that applies only when another admin approves it (the `reviewable`
decorator of governance.policy.reviewable). Role assignments (a user's role groups and
exception-owner scopes) are recorded the same way.

A role group can also change outside these services (a shell, a script, the demo's
seeding, `exception_owner_add`): `record_direct_role_change` (connected to the groups'
m2m_changed and to ExceptionOwner's saves by governance.apps) records what changed
with the actor and the reason it can know (`role_changes_by`), cause DIRECT when it
knows none. Writes through `team_save` and `user_roles_set` record themselves and the
handler stays quiet for them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from core.bounds import check_lengths
from core.errors import NON_FIELD, InvalidInput
from core.permissions import ROLES
from fleet.models import Team
from governance.models import PolicyChange, PolicyProposal
from governance.policy.reviewable import (
    PolicyError,
    PolicyWrite,
    Proposal,
    as_revert_of,
    record_change,
    register_proposal_kind,
    require_reason,
    reviewable,
)

User = get_user_model()
Kind = PolicyProposal.Kind
Target = PolicyChange.Target
TEAM_FIELDS = ("name", "description", "leads", "members")
DIRECT_REASON = (
    "changed outside the product's services (a shell, a script or a data load): "
    "no reason was given and no review was possible"
)

# (actor, reason, cause) of the role changes being made now; None: nobody said.
_role_change_cause: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "role_change_cause", default=None
)
# True while a service below records its own change: the signal handler stays quiet.
_self_recording: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "membership_self_recording", default=False
)


@contextlib.contextmanager
def _recording_itself():
    token = _self_recording.set(True)
    try:
        yield
    finally:
        _self_recording.reset(token)


@contextlib.contextmanager
def role_changes_by(*, actor, reason: str, cause: str = PolicyChange.Cause.EDIT):
    """Role changes made inside the block are recorded with this actor, reason and cause
    (for services outside this module that grant a role as a step of their own write)."""
    token = _role_change_cause.set((actor, reason, cause))
    try:
        yield
    finally:
        _role_change_cause.reset(token)


# Teams.


@dataclass(frozen=True)
class TeamData:
    """A team as the API or a page gives it (users already looked up)."""

    name: str
    description: str = ""
    leads: Sequence = ()
    members: Sequence = ()


def team_document(team: Team) -> dict:
    """The team as the history records it: its name, description, leads and members."""
    return {
        "name": team.name,
        "description": team.description,
        "leads": sorted(user.get_username() for user in team.leads.all()),
        "members": sorted(user.get_username() for user in team.members.all()),
    }


def team_data_document(data: TeamData) -> dict:
    return {
        "name": (data.name or "").strip(),
        "description": (data.description or "").strip(),
        "leads": sorted({_username(user) for user in data.leads}),
        "members": sorted({_username(user) for user in data.members}),
    }


def team_data_from_document(doc: dict) -> TeamData:
    """TeamData from a history document or a proposal (usernames); unknown users are
    a field error, so a proposal naming a user deleted since does not apply."""
    errors: dict[str, list[str]] = {}
    users: dict[str, list] = {}
    for key in ("leads", "members"):
        names = list(doc.get(key) or [])
        found = {user.get_username(): user for user in User.objects.filter(username__in=names)}
        missing = [name for name in names if name not in found]
        if missing:
            errors[key] = [f"unknown user '{missing[0]}'"]
        users[key] = [found[name] for name in names if name in found]
    if errors:
        raise PolicyError(errors)
    return TeamData(
        name=doc.get("name", ""),
        description=doc.get("description", ""),
        leads=users["leads"],
        members=users["members"],
    )


def _username(user) -> str:
    return user if isinstance(user, str) else user.get_username()


def team_validate(*, data: TeamData, team: Team | None = None) -> dict[str, list[str]]:
    """Every problem with `data` as the new state of `team` (or a new team)."""
    errors: dict[str, list[str]] = {}
    name = (data.name or "").strip()
    if not name:
        errors["name"] = ["give the team a name"]
    elif Team.objects.filter(name=name).exclude(pk=getattr(team, "pk", None)).exists():
        errors["name"] = [f"a team named '{name}' already exists"]
    return errors


def _team_save_proposal(*, data: TeamData, team: Team | None, **_) -> Proposal:
    return Proposal(
        Kind.TEAM_CREATE if team is None else Kind.TEAM_UPDATE,
        {"data": team_data_document(data)},
        {"team": team},
    )


@reviewable(_team_save_proposal)
def team_save(
    *,
    actor,
    data: TeamData,
    reason: str,
    team: Team | None = None,
    expected: dict | None = None,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Create (team=None) or change a team: name, description, leads and members.
    `expected` is the team's document the change was made from (a proposal's `before`):
    when the team changed since, nothing applies, so a proposal applies exactly its
    diff. The team's row is locked, so an exception decision checking the team's
    membership (governance.exceptions.services) sees it before or after, never half."""
    reason = require_reason(reason)
    check_lengths(data, ["description"], error=PolicyError)
    before = None
    if team is not None:
        team = Team.objects.select_for_update().get(pk=team.pk)
        before = team_document(team)
        if expected is not None and before != expected:
            raise InvalidInput(
                {
                    NON_FIELD: [
                        f"team {before['name']} was changed since this was proposed: reject "
                        "it, and propose again from the team as it is now"
                    ]
                }
            )
    errors = team_validate(data=data, team=team)
    if errors:
        raise PolicyError(errors)
    proposed = team_data_document(data)
    if proposed == before:
        # Nothing changes: no history entry.
        return PolicyWrite(applied=team, entry=None)
    with _recording_itself():
        if team is None:
            team = Team.objects.create(name=proposed["name"], description=proposed["description"])
        else:
            team.name = proposed["name"]
            team.description = proposed["description"]
            team.save(update_fields=["name", "description"])
        team.leads.set(list(data.leads))
        team.members.set(list(data.members))
    after = team_document(team)
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=PolicyChange.Target.TEAM,
        object_repr=team.name,
        before=before,
        after=after,
        team=team,
        reverts=reverts,
    )
    return PolicyWrite(applied=team, entry=entry)


def _team_delete_proposal(*, team: Team, **_) -> Proposal:
    return Proposal(Kind.TEAM_DELETE, {}, {"team": team})


@reviewable(_team_delete_proposal)
def team_delete(
    *, actor, team: Team, reason: str, cause: str = PolicyChange.Cause.EDIT
) -> PolicyWrite:
    """Delete a team that owns nothing (a ProtectedError names what still uses it),
    recording its last document."""
    reason = require_reason(reason)
    team = Team.objects.select_for_update().get(pk=team.pk)
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=PolicyChange.Target.TEAM,
        object_repr=team.name,
        before=team_document(team),
        after=None,
        team=team,
    )
    with _recording_itself():
        team.delete()
    entry.refresh_from_db()
    return PolicyWrite(applied=entry, entry=entry)


def _team_save_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    return team_save(
        data=team_data_from_document(proposal.payload["data"]),
        team=proposal.team,
        expected=proposal.before,
        **common,
    )


def _team_delete_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    if proposal.team is None:
        raise InvalidInput({NON_FIELD: ["this team no longer exists"]})
    written = team_delete(team=proposal.team, **common)
    proposal.team = None  # deleted with the team's row (SET_NULL)
    return written


def _team_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    """Restore the fields `change` changed of its team, as a new change."""
    if change.before is None:
        raise PolicyError(
            {NON_FIELD: ["a team's creation is undone by deleting the team, not reverted"]}
        )
    if change.team is None:
        raise PolicyError({NON_FIELD: ["the team of this change no longer exists"]})
    restored = {**team_document(change.team), **{key: old for key, old, _new in diff}}
    return team_save(
        actor=actor,
        data=team_data_from_document(restored),
        reason=reason,
        team=change.team,
        **as_revert_of(change),
    )


register_proposal_kind(
    Kind.TEAM_CREATE, target=Target.TEAM, apply=_team_save_apply, revert=_team_revert
)
register_proposal_kind(
    Kind.TEAM_UPDATE, target=Target.TEAM, apply=_team_save_apply, revert=_team_revert
)
register_proposal_kind(
    Kind.TEAM_DELETE, target=Target.TEAM, apply=_team_delete_apply, revert=_team_revert
)


# Roles.


def role_document(user) -> dict:
    """A user's role assignments as the history records them: their role groups and
    the queues and shares they decide exception requests for."""
    from governance.models import ExceptionOwner

    scopes = ExceptionOwner.objects.filter(user=user).select_related("queue", "share__queue")
    return {
        "roles": sorted(
            Group.objects.filter(user=user, name__in=ROLES).values_list("name", flat=True)
        ),
        "exception_owner_of": sorted(_scope_name(owner) for owner in scopes),
    }


def _scope_name(owner) -> str:
    if owner.queue_id is not None:
        return f"queue {owner.queue.name}"
    return f"share {owner.share.queue.name}/{owner.share.name}"


def _roles_proposal(*, user, roles: Iterable[str], **_) -> Proposal:
    return Proposal(Kind.ROLES, {"roles": sorted(set(roles))}, {"subject": user})


@reviewable(_roles_proposal)
def user_roles_set(
    *,
    actor,
    user,
    roles: Iterable[str],
    reason: str,
    expected: dict | None = None,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Give `user` exactly `roles` (role group names; other groups stay). `expected`:
    the role document the change was made from (see team_save)."""
    reason = require_reason(reason)
    roles = sorted(set(roles))
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        choices = ", ".join(ROLES)
        raise PolicyError({"roles": [f"unknown role '{unknown[0]}'; choose from {choices}"]})
    user = User.objects.select_for_update().get(pk=user.pk)
    before = role_document(user)
    if expected is not None and before != expected:
        raise InvalidInput(
            {
                NON_FIELD: [
                    f"the roles of {user.get_username()} were changed since this was "
                    "proposed: reject it, and propose again"
                ]
            }
        )
    if roles == before["roles"]:
        return PolicyWrite(applied=user, entry=None)
    with _recording_itself():
        groups = [Group.objects.get_or_create(name=role)[0] for role in roles]
        user.groups.remove(*user.groups.filter(name__in=ROLES).exclude(name__in=roles))
        user.groups.add(*groups)
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=PolicyChange.Target.ROLE,
        object_repr=user.get_username(),
        before=before,
        after=role_document(user),
        subject=user,
        reverts=reverts,
    )
    return PolicyWrite(applied=user, entry=entry)


def _roles_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    if proposal.subject is None:
        raise InvalidInput({NON_FIELD: ["this user no longer exists"]})
    return user_roles_set(
        user=proposal.subject, roles=proposal.payload["roles"], expected=proposal.before, **common
    )


def _roles_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    """Give the user of `change` the role groups they had before it, as a new change."""
    if change.subject is None or change.before is None:
        raise PolicyError({NON_FIELD: ["this change cannot be reverted"]})
    if any(key == "exception_owner_of" for key, _old, _new in diff):
        raise PolicyError(
            {NON_FIELD: ["an exception-owner appointment is undone on the exception owners page"]}
        )
    return user_roles_set(
        actor=actor,
        user=change.subject,
        roles=change.before["roles"],
        reason=reason,
        **as_revert_of(change),
    )


register_proposal_kind(Kind.ROLES, target=Target.ROLE, apply=_roles_apply, revert=_roles_revert)


# Direct changes (outside the services above).


def record_direct_role_change(
    *, user_ids: Iterable[int], before: dict[int, dict], change: str = ""
) -> None:
    """Record, for each user whose role document differs from `before`, a ROLE change
    with the actor and reason `role_changes_by` gave, or none (cause DIRECT)."""
    if _self_recording.get():
        return
    cause = _role_change_cause.get()
    actor, reason, kind = cause if cause else (None, DIRECT_REASON, PolicyChange.Cause.DIRECT)
    for user in User.objects.filter(pk__in=list(user_ids)):
        after = role_document(user)
        old = before.get(user.pk)
        if old is None or old == after:
            continue
        record_change(
            actor=actor,
            reason=reason,
            cause=kind,
            target=PolicyChange.Target.ROLE,
            object_repr=user.get_username(),
            before=old,
            after=after,
            subject=user,
        )


def _group_change_users(instance, reverse: bool, pk_set) -> list[int] | None:
    """The users whose role groups a groups m2m change touches; None when it touches no
    role group."""
    if isinstance(instance, Group):  # group.user_set.add(...)
        if instance.name not in ROLES:
            return None
        if pk_set is None:
            return list(instance.user_set.values_list("pk", flat=True))
        return list(pk_set)
    if pk_set is not None and not Group.objects.filter(pk__in=pk_set, name__in=ROLES).exists():
        return None
    return [instance.pk]


def on_groups_changed(sender, instance, action, reverse, model, pk_set, **_):
    """m2m_changed of User.groups: keep each touched user's role document before the
    change, and record the difference after it."""
    if _self_recording.get() or action not in (
        "pre_add",
        "pre_remove",
        "pre_clear",
        "post_add",
        "post_remove",
        "post_clear",
    ):
        return
    if action.startswith("pre_"):
        users = _group_change_users(instance, reverse, pk_set)
        instance._role_documents_before = (
            None if users is None else {pk: role_document(User(pk=pk)) for pk in users}
        )
        return
    before = instance.__dict__.pop("_role_documents_before", None)
    if before:
        record_direct_role_change(user_ids=before, before=before)


def on_exception_owner_saved(sender, instance, created, raw=False, **_):
    if created and not raw:
        _record_scope_change(instance, appointed=True)


def on_exception_owner_deleted(sender, instance, origin=None, **_):
    if isinstance(origin, User):
        return  # the user is being deleted: there is nobody left to record it for
    _record_scope_change(instance, appointed=False)


def _record_scope_change(owner, *, appointed: bool) -> None:
    """An exception-owner scope given or taken: the user's role document with and
    without it."""
    if _self_recording.get():
        return
    user = User.objects.filter(pk=owner.user_id).first()
    if user is None:
        return
    now = role_document(user)
    scope = _scope_name(owner)
    other = sorted(
        set(now["exception_owner_of"]) - {scope}
        if appointed
        else set(now["exception_owner_of"]) | {scope}
    )
    record_direct_role_change(
        user_ids=[user.pk], before={user.pk: {**now, "exception_owner_of": other}}
    )
