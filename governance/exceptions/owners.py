"""Exception owners: who decides the requests of a queue or a share (admins appoint
them). An appointment is a role change, recorded in the policy history
(governance.policy.membership.role_changes_by)."""

from __future__ import annotations

from django.db import transaction

from core import rules
from core.errors import NON_FIELD, InvalidInput
from fleet.models import JobQueue, QuotaShare
from governance.models import ExceptionOwner


@transaction.atomic
def exception_owner_add(
    *, actor, user, queue: JobQueue | None = None, share: QuotaShare | None = None
) -> ExceptionOwner:
    """Make `user` an exception owner of `queue` or of `share` (admins only)."""
    rules.require(actor, "exception_owner.manage")
    if (queue is None) == (share is None):
        raise InvalidInput({NON_FIELD: ["choose either a queue or a share"]})
    from django.contrib.auth.models import Group

    from core.permissions import EXCEPTION_OWNERS
    from governance.policy.membership import role_changes_by

    scope = f"queue {queue.name}" if queue is not None else f"share {share.name}"
    with role_changes_by(actor=actor, reason=f"appointed exception owner of {scope}"):
        owner, _ = ExceptionOwner.objects.get_or_create(user=user, queue=queue, share=share)
        user.groups.add(Group.objects.get_or_create(name=EXCEPTION_OWNERS)[0])
    return owner


def exception_owner_validate(
    *, user, queue: JobQueue | None = None, share: QuotaShare | None = None
) -> dict:
    """Every problem with appointing `user` to `queue` or `share`, keyed by field name."""
    from core.permissions import EXCEPTION_OWNERS, has_role

    errors: dict[str, list[str]] = {}
    if user is None:
        errors["user"] = ["choose the person to appoint"]
    elif not has_role(user, EXCEPTION_OWNERS):
        name = user.get_full_name() or user.get_username()
        errors["user"] = [
            f"{name} is not in the exception owners group; add them to the group "
            "(exception_owners) first, then appoint them"
        ]
    if queue is None and share is None:
        errors["queue"] = ["choose the queue or the share this owner decides for"]
    elif queue is not None and share is not None:
        errors["share"] = ["choose a queue or a share, not both: clear one of them"]
    elif (
        "user" not in errors
        and ExceptionOwner.objects.filter(user=user, queue=queue, share=share).exists()
    ):
        scope = f"queue {queue.name}" if queue is not None else f"share {share.name}"
        errors["user"] = [f"{user.get_username()} already decides for {scope}"]
    return errors


@transaction.atomic
def exception_owner_remove(*, actor, owner: ExceptionOwner) -> None:
    """Take `owner`'s scope away (admins only). Their group membership stays."""
    rules.require(actor, "exception_owner.manage")
    from governance.policy.membership import role_changes_by

    scope = owner.queue or owner.share
    with role_changes_by(actor=actor, reason=f"removed from deciding for {scope}"):
        ExceptionOwner.objects.filter(pk=owner.pk).delete()
