"""Workload classes are policy: the interruption contracts (spec v2) jobs copy.

A class says how long each run of its jobs is protected from reclaim and from in-share
preemption, how much notice a victim gets and how soon after notice it saves and exits.
Creating, changing and deleting one is a policy write like a share's: a reason, a
PolicyChange with the class's document before and after, a proposal under
POLICY_CHANGES_NEED_REVIEW (the `reviewable` decorator of governance.policy.reviewable),
and a revert. A class in use (a share's default, a definition revision's class) cannot
be deleted: the error names what uses it.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db.models import F, ProtectedError

from core.bounds import check_lengths
from core.errors import NON_FIELD, InvalidInput
from engine.contracts import CONTRACT_FIELDS, contract_problems
from fleet.models import WorkloadClass
from governance.models import PolicyChange, PolicyProposal
from governance.policy.reviewable import (
    PolicyError,
    PolicyWrite,
    Proposal,
    VersionConflict,
    as_revert_of,
    record_change,
    register_proposal_kind,
    require_reason,
    reviewable,
)

Kind = PolicyProposal.Kind
Target = PolicyChange.Target
CLASS_FIELDS = ("name", "description", *CONTRACT_FIELDS)
# A week: a longer protection or notice is a typo, not a contract.
MAX_CONTRACT_SECONDS = 7 * 24 * 3600


def workload_class_document(workload_class: WorkloadClass) -> dict:
    """The class as the history records it."""
    return {name: getattr(workload_class, name) for name in CLASS_FIELDS}


def workload_class_data_document(data: Mapping) -> dict:
    """The document saving `data` would store (validated before)."""
    return {
        "name": (data.get("name") or "").strip(),
        "description": (data.get("description") or "").strip(),
        "min_runtime_reclaim": data.get("min_runtime_reclaim") or 0,
        "min_runtime_preempt": data.get("min_runtime_preempt") or 0,
        "grace": data.get("grace") or 0,
        "checkpoint_on_notice": data.get("checkpoint_on_notice"),
    }


def workload_class_validate(
    data: Mapping, *, workload_class: WorkloadClass | None = None
) -> dict[str, list[str]]:
    """Every problem with `data` as the new state of `workload_class` (or a new class):
    the one check the page, the API, policy files and the service share. The ranges are
    the engine's (engine.contracts.contract_problems) within MAX_CONTRACT_SECONDS; on
    top, a class that checkpoints on notice must give notice."""
    errors: dict[str, list[str]] = {}
    name = data.get("name")
    name = name.strip() if isinstance(name, str) else ""
    if not name:
        errors["name"] = ["give the class a name"]
    elif len(name) > 100:
        errors["name"] = ["at most 100 characters"]
    elif (
        WorkloadClass.objects.filter(name=name)
        .exclude(pk=getattr(workload_class, "pk", None))
        .exists()
    ):
        errors["name"] = [f"a workload class named '{name}' already exists"]
    contract = {key: data.get(key) for key in CONTRACT_FIELDS}
    for key, message in contract_problems(contract, maximum=MAX_CONTRACT_SECONDS).items():
        if key == "checkpoint_on_notice":
            message += ", or empty (its jobs do not checkpoint on notice)"
        errors[key] = [message]
    if (
        "checkpoint_on_notice" not in errors
        and "grace" not in errors
        and contract["checkpoint_on_notice"] is not None
        and not contract["grace"]
    ):
        errors["checkpoint_on_notice"] = [
            "needs a grace: with grace 0 no notice is given, so leave it empty or give a grace"
        ]
    return errors


def _save_proposal(
    *, data: Mapping, workload_class: WorkloadClass | None, expected_version: int | None, **_
) -> Proposal:
    return Proposal(
        Kind.CLASS_CREATE if workload_class is None else Kind.CLASS_UPDATE,
        {"data": workload_class_data_document(data)},
        {"workload_class": workload_class, "base_version": expected_version},
    )


@reviewable(_save_proposal)
def workload_class_save(
    *,
    actor,
    data: Mapping,
    reason: str,
    workload_class: WorkloadClass | None = None,
    expected_version: int | None = None,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Create (workload_class=None) or change a class from CLASS_FIELDS. Jobs already
    submitted keep the contract they copied."""
    reason = require_reason(reason)
    check_lengths(data, ["description"], error=PolicyError)
    before = None
    if workload_class is not None:
        workload_class = WorkloadClass.objects.select_for_update().get(pk=workload_class.pk)
        before = workload_class_document(workload_class)
        if expected_version is not None and workload_class.version != expected_version:
            raise VersionConflict(
                current=before, current_version=workload_class.version, submitted=dict(data)
            )
    errors = workload_class_validate(data, workload_class=workload_class)
    if errors:
        raise PolicyError(errors)
    proposed = workload_class_data_document(data)
    if proposed == before:
        # Nothing changes: no new version, no history entry.
        return PolicyWrite(applied=workload_class, entry=None)
    if workload_class is None:
        workload_class = WorkloadClass(**proposed)
    else:
        for name, value in proposed.items():
            setattr(workload_class, name, value)
        workload_class.version = F("version") + 1
    workload_class.save()
    workload_class.refresh_from_db()
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=PolicyChange.Target.WORKLOAD_CLASS,
        object_repr=workload_class.name,
        before=before,
        after=workload_class_document(workload_class),
        workload_class=workload_class,
        reverts=reverts,
    )
    return PolicyWrite(applied=workload_class, entry=entry)


def workload_class_users(workload_class: WorkloadClass) -> list[str]:
    """What keeps the class from being deleted, in words (shares first, then definitions)."""
    shares = [
        f"the default of share {share}"
        for share in workload_class.default_of_shares.select_related("queue").order_by(
            "queue__name", "name"
        )
    ]
    revisions = workload_class.definition_revisions.select_related("definition").order_by(
        "definition__name", "revision"
    )
    definitions = [f"job definition {revision}" for revision in revisions]
    return shares + definitions


def _delete_proposal(*, workload_class: WorkloadClass, **_) -> Proposal:
    return Proposal(Kind.CLASS_DELETE, {}, {"workload_class": workload_class})


@reviewable(_delete_proposal)
def workload_class_delete(
    *, actor, workload_class: WorkloadClass, reason: str, cause: str = PolicyChange.Cause.EDIT
) -> PolicyWrite:
    """Delete a class nothing uses, recording its last document; a class in use is
    refused, naming what uses it."""
    reason = require_reason(reason)
    workload_class = WorkloadClass.objects.select_for_update().get(pk=workload_class.pk)
    users = workload_class_users(workload_class)
    if users:
        raise PolicyError({NON_FIELD: [_in_use(workload_class, users)]})
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=PolicyChange.Target.WORKLOAD_CLASS,
        object_repr=workload_class.name,
        before=workload_class_document(workload_class),
        after=None,
        workload_class=workload_class,
    )
    try:
        workload_class.delete()
    except ProtectedError:  # a use made since the check, by a concurrent writer
        raise PolicyError(
            {NON_FIELD: [_in_use(workload_class, workload_class_users(workload_class))]}
        ) from None
    entry.refresh_from_db()
    return PolicyWrite(applied=entry, entry=entry)


def _in_use(workload_class: WorkloadClass, users: list[str]) -> str:
    shown = "; ".join(users[:5]) + (f"; and {len(users) - 5} more" if len(users) > 5 else "")
    return (
        f"workload class {workload_class.name} is in use ({shown}): choose another class "
        "there first"
    )


def workload_class_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    """Restore the fields `change` changed of its class, as a new change."""
    if change.before is None:
        raise PolicyError(
            {NON_FIELD: ["a class's creation is undone by deleting the class, not reverted"]}
        )
    if change.workload_class is None:
        raise PolicyError({NON_FIELD: ["the workload class of this change no longer exists"]})
    current = workload_class_document(change.workload_class)
    restored = {**current, **{key: old for key, old, _new in diff}}
    return workload_class_save(
        actor=actor,
        data=restored,
        reason=reason,
        workload_class=change.workload_class,
        **as_revert_of(change),
    )


def _save_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    return workload_class_save(
        data=proposal.payload["data"],
        workload_class=proposal.workload_class,
        expected_version=proposal.base_version,
        **common,
    )


def _delete_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    if proposal.workload_class is None:
        raise InvalidInput({NON_FIELD: ["this workload class no longer exists"]})
    written = workload_class_delete(workload_class=proposal.workload_class, **common)
    proposal.workload_class = None  # deleted with the class's row (SET_NULL)
    return written


register_proposal_kind(
    Kind.CLASS_CREATE, target=Target.WORKLOAD_CLASS, apply=_save_apply, revert=workload_class_revert
)
register_proposal_kind(
    Kind.CLASS_UPDATE, target=Target.WORKLOAD_CLASS, apply=_save_apply, revert=workload_class_revert
)
register_proposal_kind(
    Kind.CLASS_DELETE,
    target=Target.WORKLOAD_CLASS,
    apply=_delete_apply,
    revert=workload_class_revert,
)
