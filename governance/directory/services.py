"""The directory's groups become roles and team memberships (writes).

directory_sync is the one place that applies the mapping to a user: at each login
through the directory (ldap.DirectoryLDAPBackend) and at each periodic check
(tasks.sync_directory). It goes through the policy services of governance.policy.
membership (user_roles_set, team_save) with cause DIRECTORY, so every change is a
history entry like an admin's edit (the reason says whose login or check, and which
groups), applies at once (never a proposal: the mapping is the admins' decision), and
separation of duties reads the new membership from the next decision on.

What the directory decides:
- roles that some mapping names: the user has exactly those of them their groups give;
  roles no mapping names stay as admins set them;
- teams that some mapping names: the user leads / belongs to exactly those their groups
  give; other teams stay as admins set them;
- queues whose exception-owner scope some mapping names: the user decides the requests
  of exactly those their groups give (recorded as role changes, through
  membership.role_changes_by); other scopes stay as admins set them;
- a user the directory no longer lists (`groups=None`) loses every role, every team
  membership, every exception-owner scope and every API token, and their open sessions
  end (core.signals.directory_user_unlisted; accounts.directory).

Mapping edits (mapping_create, mapping_delete) are policy writes like any other: a
reason (required), a history entry of target GROUP_MAPPING (who, the mapping before and
after), a proposal of kind MAPPING_CREATE / MAPPING_DELETE under
POLICY_CHANGES_NEED_REVIEW (the `reviewable` decorator of governance.policy.reviewable;
governance.proposals applies it on approval, through the kind's apply registered here)
and a revert (mapping_revert).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from core import rules
from core.errors import NON_FIELD, InvalidInput
from core.permissions import ROLES
from core.signals import directory_user_unlisted
from fleet.models import JobQueue, Team
from governance.directory.models import DirectoryAccount, GroupMapping
from governance.models import ExceptionOwner, PolicyChange, PolicyProposal
from governance.policy.membership import (
    TeamData,
    role_changes_by,
    role_document,
    team_document,
    team_save,
    user_roles_set,
)
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

Kind = GroupMapping.Kind
ProposalKind = PolicyProposal.Kind


@dataclass
class SyncResult:
    """What a sync changed: the history entries it wrote, and whether tokens went."""

    listed: bool
    changes: list[PolicyChange] = field(default_factory=list)
    unlisted_now: bool = False


def _matches(mapping: GroupMapping, groups: set[str]) -> bool:
    return mapping.group.strip().lower() in groups


def _why(trigger: str, username: str, source: str) -> str:
    return f"directory ({DirectoryAccount.Source(source).label} {trigger} of {username})"


@transaction.atomic
def directory_sync(
    *, user, groups: Iterable[str] | None, source: str, trigger: str = "login"
) -> SyncResult:
    """Make `user`'s roles and mapped teams follow `groups` (the names and DNs of their
    directory groups, nested ones included), or, with `groups=None`, take away what a
    user the directory no longer lists must lose."""
    account, _ = DirectoryAccount.objects.select_for_update().get_or_create(
        user=user, defaults={"source": source}
    )
    listed = groups is not None
    names = sorted({name for name in groups or ()})
    lowered = {name.strip().lower() for name in names}
    mappings = list(GroupMapping.objects.select_related("team", "queue"))
    matched = [m for m in mappings if _matches(m, lowered)]
    why = _why(trigger, user.get_username(), source)
    result = SyncResult(listed=listed)

    # Roles.
    current = set(role_document(user)["roles"])
    managed = {m.role for m in mappings if m.kind == Kind.ROLE}
    given = {m.role: m.group for m in matched if m.kind == Kind.ROLE}
    wanted = (current - managed) | set(given) if listed else set()
    if wanted != current:
        parts = [f"{role} from group {given[role]}" for role in sorted(wanted - current)]
        gone = sorted(current - wanted)
        if gone:
            parts.append(
                f"{', '.join(gone)} removed ("
                + ("the directory no longer lists them" if not listed else "no group of theirs")
                + ")"
            )
        write = user_roles_set(
            actor=None,
            user=user,
            roles=sorted(r for r in wanted if r in ROLES),
            reason=f"{why}: {'; '.join(parts)}",
            cause=PolicyChange.Cause.DIRECTORY,
        )
        if write.entry is not None:
            result.changes.append(write.entry)

    # Teams.
    managed_teams = {m.team_id for m in mappings if m.team_id is not None}
    touched = set(managed_teams)
    if not listed:
        touched |= set(user.teams.values_list("pk", flat=True))
        touched |= set(user.led_teams.values_list("pk", flat=True))
    for team in Team.objects.filter(pk__in=touched).order_by("name"):
        result.changes.extend(_sync_team(user, team, matched if listed else [], why, listed))

    # Exception-owner scopes.
    if listed:
        result.changes.extend(_sync_owner_scopes(user, mappings, matched, why))
    else:
        result.changes.extend(_drop_every_scope(user, why))

    account.source = source
    account.groups = names
    account.checked_at = timezone.now()
    if not listed and account.listed:
        result.unlisted_now = True
    account.listed = listed
    account.save()
    if not listed:
        directory_user_unlisted.send(sender=DirectoryAccount, user=user)
    return result


def _sync_team(user, team: Team, matched: list[GroupMapping], why: str, listed: bool):
    doc = team_document(team)
    username = user.get_username()
    lead_from = [m.group for m in matched if m.team_id == team.pk and m.kind == Kind.TEAM_LEAD]
    member_from = [m.group for m in matched if m.team_id == team.pk and m.kind == Kind.TEAM_MEMBER]
    parts = []
    leads, members = set(doc["leads"]), set(doc["members"])
    for role, now_in, source_groups, people in (
        ("lead", username in leads, lead_from, leads),
        ("member", username in members, member_from, members),
    ):
        if source_groups and not now_in:
            people.add(username)
            parts.append(f"{role} of {team.name} from group {', '.join(sorted(source_groups))}")
        elif not source_groups and now_in:
            people.discard(username)
            cause = "the directory no longer lists them" if not listed else "no group of theirs"
            parts.append(f"no longer {role} of {team.name} ({cause})")
    if not parts:
        return []
    users = {u.get_username(): u for u in type(user).objects.filter(username__in=leads | members)}
    write = team_save(
        actor=None,
        team=team,
        data=TeamData(
            name=team.name,
            description=team.description,
            leads=[users[name] for name in sorted(leads)],
            members=[users[name] for name in sorted(members)],
        ),
        reason=f"{why}: {'; '.join(parts)}",
        cause=PolicyChange.Cause.DIRECTORY,
    )
    return [write.entry] if write.entry is not None else []


def _sync_owner_scopes(user, mappings, matched, why: str) -> list[PolicyChange]:
    """Give and take the queues' exception-owner scopes the mapping manages."""
    managed = {m.queue_id for m in mappings if m.kind == Kind.EXCEPTION_OWNER}
    given: dict[int, list[GroupMapping]] = {}
    for m in matched:
        if m.kind == Kind.EXCEPTION_OWNER:
            given.setdefault(m.queue_id, []).append(m)
    held = {
        owner.queue_id: owner
        for owner in ExceptionOwner.objects.filter(user=user, queue__isnull=False).select_related(
            "queue"
        )
    }
    first = _last_change_id()
    for queue_id, sources in given.items():
        if queue_id in held:
            continue
        groups = ", ".join(sorted(m.group for m in sources))
        with role_changes_by(
            actor=None,
            reason=f"{why}: exception owner of queue {sources[0].queue.name} from group {groups}",
            cause=PolicyChange.Cause.DIRECTORY,
        ):
            ExceptionOwner.objects.create(user=user, queue_id=queue_id)
    for queue_id, owner in held.items():
        if queue_id in managed and queue_id not in given:
            with role_changes_by(
                actor=None,
                reason=f"{why}: no longer exception owner of queue {owner.queue.name} "
                "(no group of theirs)",
                cause=PolicyChange.Cause.DIRECTORY,
            ):
                owner.delete()
    return _changes_since(first, user)


def _last_change_id() -> int:
    return PolicyChange.objects.order_by("-id").values_list("id", flat=True).first() or 0


def _changes_since(first: int, user) -> list[PolicyChange]:
    return list(PolicyChange.objects.filter(id__gt=first, subject=user).order_by("id"))


def _drop_every_scope(user, why: str) -> list[PolicyChange]:
    """A user the directory no longer lists decides nothing: every scope goes."""
    first = _last_change_id()
    for owner in ExceptionOwner.objects.filter(user=user).select_related("queue", "share__queue"):
        scope = (
            owner.queue.name if owner.queue_id else f"{owner.share.queue.name}/{owner.share.name}"
        )
        with role_changes_by(
            actor=None,
            reason=f"{why}: no longer exception owner of {scope} "
            "(the directory no longer lists them)",
            cause=PolicyChange.Cause.DIRECTORY,
        ):
            owner.delete()
    return _changes_since(first, user)


# The mapping (admins, on the directory page).


def _validate_mapping(*, group: str, kind: str, role: str, team, queue) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not (group or "").strip():
        errors["group"] = ["name the directory group (its cn or its DN)"]
    elif len(group.strip()) > 255:
        errors["group"] = ["a group name is at most 255 characters"]
    if kind not in Kind.values:
        errors["kind"] = [f"choose one of {', '.join(Kind.values)}"]
        return errors
    needs = {Kind.ROLE: "role", Kind.EXCEPTION_OWNER: "queue"}.get(kind, "team")
    if needs == "role" and role not in ROLES:
        errors["role"] = [f"choose the role this group gives ({', '.join(ROLES)})"]
    if needs == "team" and team is None:
        errors["team"] = ["choose the team this group's members join"]
    if needs == "queue" and queue is None:
        errors["queue"] = ["choose the queue whose exception requests this group decides"]
    label = Kind(kind).label.lower()
    for name, value in (("role", role), ("team", team), ("queue", queue)):
        if name != needs and value:
            errors[name] = [f"a mapping to “{label}” names no {name}: leave it empty"]
    if not errors:
        duplicate = GroupMapping.objects.filter(
            group__iexact=group.strip(), kind=kind, role=role, team=team, queue=queue
        )
        if duplicate.exists():
            errors["group"] = [f"group {group.strip()} already gives this"]
    return errors


def mapping_document(mapping: GroupMapping) -> dict:
    """The mapping as the history records it (names, so that it reads after a rename)."""
    return {
        "group": mapping.group,
        "kind": mapping.kind,
        "role": mapping.role,
        "team": mapping.team.name if mapping.team_id else None,
        "queue": mapping.queue.name if mapping.queue_id else None,
        "gives": mapping.gives,
    }


def _record_mapping(*, actor, mapping, before, after, reason, cause, reverts=None):
    return record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=PolicyChange.Target.GROUP_MAPPING,
        object_repr=str(mapping),
        before=before,
        after=after,
        team=mapping.team if mapping.team_id else None,
        queue=mapping.queue if mapping.queue_id else None,
        reverts=reverts,
    )


def _create_proposal(*, group, kind, role="", team=None, queue=None, **_) -> Proposal:
    return Proposal(
        ProposalKind.MAPPING_CREATE,
        {
            "group": (group or "").strip(),
            "kind": kind,
            "role": role or "",
            "team_id": team.pk if team is not None else None,
            "queue_id": queue.pk if queue is not None else None,
        },
    )


@reviewable(_create_proposal)
def mapping_create(
    *,
    actor,
    group: str,
    kind: str,
    role: str = "",
    team=None,
    queue=None,
    reason: str,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """A new mapping (admins), recorded in the policy history (who, what it gives, why).
    It applies at each user's next login or sync. Its problems (the reason's and the
    mapping's) are raised together, each naming its field."""
    rules.require(actor, "directory.manage")
    errors = _validate_mapping(group=group, kind=kind, role=role or "", team=team, queue=queue)
    try:
        reason = require_reason(reason)
    except PolicyError as error:
        errors = {**error.errors, **errors}
    if errors:
        raise PolicyError(errors)
    mapping = GroupMapping.objects.create(
        group=group.strip(), kind=kind, role=role or "", team=team, queue=queue, created_by=actor
    )
    entry = _record_mapping(
        actor=actor,
        mapping=mapping,
        before=None,
        after=mapping_document(mapping),
        reason=reason,
        cause=cause,
        reverts=reverts,
    )
    return PolicyWrite(applied=mapping, entry=entry)


def _delete_proposal(*, mapping: GroupMapping, **_) -> Proposal:
    return Proposal(ProposalKind.MAPPING_DELETE, {"mapping_id": mapping.pk})


@reviewable(_delete_proposal)
def mapping_delete(
    *,
    actor,
    mapping: GroupMapping,
    reason: str,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Remove a mapping (admins), recorded in the policy history with what it gave."""
    rules.require(actor, "directory.manage")
    reason = require_reason(reason)
    # Ordered by pk alone: the model's ordering joins the nullable team, and
    # PostgreSQL cannot lock the nullable side of an outer join.
    mapping = GroupMapping.objects.select_for_update().filter(pk=mapping.pk).order_by("pk").first()
    if mapping is None:
        raise PolicyError({NON_FIELD: ["this mapping has been removed already"]})
    entry = _record_mapping(
        actor=actor,
        mapping=mapping,
        before=mapping_document(mapping),
        after=None,
        reason=reason,
        cause=cause,
        reverts=reverts,
    )
    mapping.delete()
    return PolicyWrite(applied=entry, entry=entry)


def _delete_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    """Carry out an approved MAPPING_DELETE proposal, or say why it no longer can."""
    mapping = GroupMapping.objects.filter(pk=proposal.payload["mapping_id"]).first()
    if mapping is None:
        raise PolicyError({NON_FIELD: ["this mapping has been removed already"]})
    return mapping_delete(mapping=mapping, **common)


def _create_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    """Carry out an approved MAPPING_CREATE proposal, or say why it no longer can."""
    payload = proposal.payload
    team = queue = None
    if payload["team_id"] is not None:
        team = Team.objects.filter(pk=payload["team_id"]).first()
        if team is None:
            raise PolicyError({NON_FIELD: ["the team of this mapping no longer exists"]})
    if payload["queue_id"] is not None:
        queue = JobQueue.objects.filter(pk=payload["queue_id"]).first()
        if queue is None:
            raise PolicyError({NON_FIELD: ["the queue of this mapping no longer exists"]})
    try:
        return mapping_create(
            group=payload["group"],
            kind=payload["kind"],
            role=payload["role"],
            team=team,
            queue=queue,
            **common,
        )
    except InvalidInput as error:
        # The form's fields are not on the review page: say it on the proposal itself.
        problems = [message for messages in error.errors.values() for message in messages]
        raise PolicyError({NON_FIELD: problems}) from error


def mapping_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    """Take a mapping's addition back (remove it) or its removal (add it again)."""
    if change.before is None:
        doc = change.after
        mapping = GroupMapping.objects.filter(
            group__iexact=doc["group"],
            kind=doc["kind"],
            role=doc["role"],
            team__name=doc["team"],
            queue__name=doc["queue"],
        ).first()
        if mapping is None:
            raise PolicyError({NON_FIELD: ["this mapping has been removed already"]})
        return mapping_delete(
            actor=actor,
            mapping=mapping,
            reason=reason,
            **as_revert_of(change),
        )
    doc = change.before
    team = Team.objects.filter(name=doc["team"]).first() if doc["team"] else None
    queue = JobQueue.objects.filter(name=doc["queue"]).first() if doc["queue"] else None
    if (doc["team"] and team is None) or (doc["queue"] and queue is None):
        raise PolicyError(
            {NON_FIELD: [f"the {'team' if doc['team'] else 'queue'} of this mapping is gone"]}
        )
    return mapping_create(
        actor=actor,
        group=doc["group"],
        kind=doc["kind"],
        role=doc["role"],
        team=team,
        queue=queue,
        reason=reason,
        **as_revert_of(change),
    )


register_proposal_kind(
    ProposalKind.MAPPING_CREATE,
    target=PolicyChange.Target.GROUP_MAPPING,
    apply=_create_apply,
    revert=mapping_revert,
)
register_proposal_kind(
    ProposalKind.MAPPING_DELETE,
    target=PolicyChange.Target.GROUP_MAPPING,
    apply=_delete_apply,
    revert=mapping_revert,
)
