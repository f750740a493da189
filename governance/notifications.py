"""Email about exception requests, through Django's email backend.

Mails go out after the transaction that caused them commits, so a rolled-back
decision never sends one. Owners hear of submissions; the requester hears of the
decision, of activation problems and of the end (expiry or revocation).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse

logger = logging.getLogger(__name__)


def _link(request) -> str:
    base = getattr(settings, "SITE_URL", "").rstrip("/")
    return f"{base}{reverse('exception-detail', args=[request.pk])}"


def _summary(request) -> str:
    if request.kind == request.Kind.TEMPORARY_CAPACITY:
        what = f"{request.extra_instances} more {request.instance_type} for share {request.share}"
    else:
        names = ", ".join(job.name for job in request.jobs.all())
        what = f"{request.get_kind_display().lower()} for {names}"
    return (
        f"Team: {request.team}\n"
        f"Request: {what}\n"
        f"Urgency: {request.urgency}\n"
        f"Window: {request.window_start:%Y-%m-%d %H:%M} to {request.window_end:%Y-%m-%d %H:%M} "
        f"UTC\n"
        f"Justification: {request.justification}\n"
    )


def _send(*, subject: str, body: str, recipients: list[str]) -> None:
    recipients = sorted({address for address in recipients if address})
    if not recipients:
        return

    def deliver():
        try:
            send_mail(subject, body, None, recipients)
        except Exception:  # a mail server outage must not undo a decision
            logger.exception("could not send %r to %s", subject, recipients)

    transaction.on_commit(deliver)


def notify_submitted(*, request, owners) -> None:
    _send(
        subject=f"Exception request #{request.pk} awaits your decision",
        body=(
            f"{request.requested_by.get_full_name() or request.requested_by} asks for an "
            f"exception.\n\n{_summary(request)}\nDecide it here: {_link(request)}\n"
        ),
        recipients=[owner.email for owner in owners],
    )


def notify_decided(*, request) -> None:
    verdict = "approved" if request.state != request.State.DENIED else "denied"
    note = (
        f"\nNote from {request.decided_by}: {request.decision_note}\n"
        if request.decision_note
        else ""
    )
    _send(
        subject=f"Exception request #{request.pk} was {verdict}",
        body=(
            f"Your exception request was {verdict}.\n{note}\n{_summary(request)}\n"
            f"{_link(request)}\n"
        ),
        recipients=[request.requested_by.email],
    )


def notify_ended(*, request, how: str, note: str = "") -> None:
    """`how` is "expired" or "revoked"."""
    extra = f"\n{note}\n" if note else ""
    _send(
        subject=f"Exception #{request.pk} {how}",
        body=(
            f"Your exception {how}; the policy is back to what it was without it.{extra}\n"
            f"{_summary(request)}\n{_link(request)}\n"
        ),
        recipients=[request.requested_by.email],
    )


def notify_apply_failed(*, request, problem: str) -> None:
    _send(
        subject=f"Exception #{request.pk} could not take effect",
        body=(
            f"Your approved exception could not take effect: {problem}\n"
            f"It will be tried again until its window ends.\n\n{_summary(request)}\n"
            f"{_link(request)}\n"
        ),
        recipients=[request.requested_by.email],
    )
