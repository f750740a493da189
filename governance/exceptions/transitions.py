"""An exception request's steps: which states each allows, and the one place a request
changes state (`claim`), with the event that records it.

States: DRAFT -> SUBMITTED -> APPROVED | DENIED; SUBMITTED -> DRAFT when the requester
withdraws it before it is decided (to edit it or let it be); APPROVED -> ACTIVE at the
window's start -> EXPIRED at its end; APPROVED or ACTIVE -> REVOKED by an owner or an admin.
Every transition is one conditional UPDATE (`... WHERE state IN (from)`), so when two
callers race (a task run twice, two owners clicking), exactly one moves the request
and the other is refused or does nothing.
"""

from __future__ import annotations

from core.errors import WrongState
from governance.models import ExceptionEvent, ExceptionRequest

State = ExceptionRequest.State


class TransitionRefused(WrongState):
    """The request is not in a state that allows this step."""


# Which steps each state allows, and how to say so when it does not.
STEPS = {
    "submit": ((State.DRAFT,), State.SUBMITTED),
    "withdraw": ((State.SUBMITTED,), State.DRAFT),  # the requester, until it is decided
    "approve": ((State.SUBMITTED,), State.APPROVED),
    "deny": ((State.SUBMITTED,), State.DENIED),
    "activate": ((State.APPROVED,), State.ACTIVE),
    "expire": ((State.ACTIVE,), State.EXPIRED),
    "lapse": ((State.APPROVED,), State.EXPIRED),  # approved, but the window passed unused
    "revoke": ((State.APPROVED, State.ACTIVE), State.REVOKED),
}


def step_refusal(step: str, state: str) -> str:
    """Why `step` is refused to a request in `state`, naming the states that allow it."""
    allowed, _ = STEPS[step]
    current = State(state).label.lower()
    needed = " or ".join(State(s).label.lower() for s in allowed)
    return f"this request is {current}, so it cannot be {_past(step)}; only a {needed} request can"


def _past(step: str) -> str:
    return {
        "submit": "submitted",
        "withdraw": "withdrawn",
        "approve": "approved",
        "deny": "denied",
        "revoke": "revoked",
    }.get(step, f"{step}d")


def claim(request: ExceptionRequest, step: str, **fields) -> bool:
    """Move `request` by `step` if it is still in a state that allows it; True if this
    call did it. The one place a request changes state."""
    allowed, target = STEPS[step]
    moved = ExceptionRequest.objects.filter(pk=request.pk, state__in=allowed).update(
        state=target, **fields
    )
    if moved:
        request.state = target
        for name, value in fields.items():
            setattr(request, name, value)
    return bool(moved)


def record_event(request, type_, *, at, actor=None, note: str = "") -> ExceptionEvent:
    return ExceptionEvent.objects.create(request=request, type=type_, at=at, actor=actor, note=note)


def state_now(request: ExceptionRequest) -> str:
    return ExceptionRequest.objects.values_list("state", flat=True).get(pk=request.pk)
