"""An instance type's price per hour is policy: it decides what the dashboard charges each
team. Setting or clearing it is a policy write like a share's: a reason, a PolicyChange
with the price before and after, a proposal under POLICY_CHANGES_NEED_REVIEW (the
`reviewable` decorator of governance.policy.reviewable), and a revert.

A price is per instance (not per GPU) and per hour, in settings.COST_CURRENCY. Empty
means no price: the type has no cost anywhere (never a cost of 0); a price of 0 is
refused, so that "free" and "not priced" cannot be mistaken for each other.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.conf import settings

from core.errors import NON_FIELD, InvalidInput
from fleet.models import InstanceType
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

Kind = PolicyProposal.Kind
FIELD = "price_per_hour"
PLACES = Decimal("0.0001")
# The column's range (12 digits, 4 after the point).
MAXIMUM = Decimal("99999999.9999")


def price_parse(value) -> Decimal | None:
    """The price `value` says (a number or its text; None or "" for no price), or a
    PolicyError naming the field."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise PolicyError({FIELD: ["expected a number, or empty for no price"]})
    try:
        price = Decimal(str(value).strip())
    except InvalidOperation:
        raise PolicyError({FIELD: ["expected a number, or empty for no price"]}) from None
    if not price.is_finite():
        raise PolicyError({FIELD: ["expected a number, or empty for no price"]})
    if price <= 0:
        raise PolicyError(
            {FIELD: ["must be more than 0; leave it empty when the type has no price"]}
        )
    if price > MAXIMUM:
        raise PolicyError({FIELD: [f"at most {MAXIMUM}"]})
    if price != price.quantize(PLACES):
        raise PolicyError({FIELD: ["at most 4 digits after the decimal point"]})
    return price.quantize(PLACES)


def price_text(price) -> str:
    """A stored price as the history and the pages show it: 2.2 -> "2.2000"."""
    return str(Decimal(price).quantize(PLACES))


def price_short(price) -> str:
    """A stored price for people: cents always, more digits only when it has them
    (2.2 -> "2.20", 1.408 -> "1.408")."""
    text = price_text(price)
    whole, _, places = text.partition(".")
    return f"{whole}.{places.rstrip('0').ljust(2, '0')}"


def price_document(instance_type: InstanceType) -> dict:
    """The price as the history records it (text, so the diff shows it as set)."""
    price = instance_type.price_per_hour
    return {
        "instance_type": instance_type.name,
        FIELD: None if price is None else price_text(price),
        "currency": settings.COST_CURRENCY,
    }


def _price_proposal(*, instance_type: InstanceType, price, **_) -> Proposal:
    return Proposal(
        Kind.PRICE,
        {"instance_type_id": instance_type.pk, FIELD: None if price is None else str(price)},
    )


@reviewable(_price_proposal)
def instance_type_price_set(
    *,
    actor,
    instance_type: InstanceType,
    price,
    reason: str,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Set (or, with None or "", clear) the price per instance-hour of `instance_type`."""
    reason = require_reason(reason)
    price = price_parse(price)
    instance_type = InstanceType.objects.select_for_update().get(pk=instance_type.pk)
    before = price_document(instance_type)
    instance_type.price_per_hour = price
    after = price_document(instance_type)
    if after == before:
        return PolicyWrite(applied=instance_type, entry=None)
    instance_type.save(update_fields=[FIELD])
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=PolicyChange.Target.PRICE,
        object_repr=f"{instance_type.name} price per hour",
        before=before,
        after=after,
        reverts=reverts,
    )
    return PolicyWrite(applied=instance_type, entry=entry)


def instance_type_price_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    """Restore the price `change` replaced, as a new change."""
    name = (change.before or change.after or {}).get("instance_type")
    instance_type = InstanceType.objects.filter(name=name).first()
    if instance_type is None or change.before is None:
        raise PolicyError({NON_FIELD: ["the instance type of this change no longer exists"]})
    return instance_type_price_set(
        actor=actor,
        instance_type=instance_type,
        price=change.before[FIELD],
        reason=reason,
        **as_revert_of(change),
    )


def _price_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    payload = proposal.payload
    instance_type = InstanceType.objects.filter(pk=payload["instance_type_id"]).first()
    if instance_type is None:
        raise InvalidInput({NON_FIELD: ["this instance type no longer exists"]})
    return instance_type_price_set(instance_type=instance_type, price=payload[FIELD], **common)


register_proposal_kind(
    Kind.PRICE,
    target=PolicyChange.Target.PRICE,
    apply=_price_apply,
    revert=instance_type_price_revert,
)
