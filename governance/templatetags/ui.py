"""Template tags and filters of the one visual language (`{% load ui %}`).

Numbers follow pages.md: instances as integers, GPU-hours with one decimal,
durations as `2 h 05 m`, percentages without false precision (core.formatting),
times in the active time zone with UTC on hover. A missing value is shown as an em dash.
"""

from __future__ import annotations

import datetime as dt
import itertools

from django import template
from django.utils import timezone
from django.utils.dateformat import format as format_date
from django.utils.html import format_html
from django.utils.text import slugify

from core import rules
from core.formatting import MISSING, duration, gpu_hours, is_missing, percent, relative
from governance import glossary

register = template.Library()

# Each rendered term gets its own tooltip id, so a page may show a term twice.
_term_ids = itertools.count(1)


# The number formats are plain functions (core.formatting), shared with code that
# formats outside templates; here they become the filters `duration`, `gpu_hours`, `percent`.
register.filter("duration", duration)
register.filter("relative", relative)
register.filter("gpu_hours", gpu_hours)
register.filter("percent", percent)


@register.inclusion_tag("components/term.html")
def term(name: str, label: str = ""):
    """A glossary term with its explanation as an accessible tooltip.

    `{% term share.strategy %}` or `{% term "borrow limit" label="Borrow limit" %}`.
    An unknown term raises KeyError, so a typo fails the page's tests.
    """
    canonical = glossary.canonical(name)
    if canonical is None:
        raise KeyError(f"{name!r} is not in the glossary (governance/glossary.py)")
    return {
        "label": label or canonical,
        "explanation": glossary.GLOSSARY[canonical],
        "tip_id": f"term-{slugify(canonical)}-{next(_term_ids)}",
    }


# State -> colour class. Job and exception-request states share one vocabulary of
# colours: running within limit is blue, borrowed is amber, stopped by the system is
# red, an active exception is purple, finished is green, everything waiting is grey.
STATE_CLASSES = {
    "RUNNING": "within",
    "BORROWED": "borrowed",
    "RUNNING_BORROWED": "borrowed",
    "PREEMPTED": "failed",
    # Preempted and given notice: it still holds its capacity until it stops.
    "STOPPING": "failed",
    "FAILED": "failed",
    "ACTIVE": "exception",
    "SUCCEEDED": "done",
    "FINISHED": "done",
    "COMPLETED": "done",
    "APPROVED": "done",
    "DENIED": "stopped",
    "REVOKED": "stopped",
    "CANCELLED": "stopped",
    "TERMINATED": "stopped",
    "CLOSED": "stopped",
}


def state_class(state, *, borrowed: bool = False) -> str:
    key = str(getattr(state, "value", state) or "").upper()
    if key == "RUNNING" and borrowed:
        return "borrowed"
    return STATE_CLASSES.get(key, "neutral")


@register.simple_tag
def state_chip(state, label: str = "", borrowed: bool = False):
    """A state as a coloured chip: `{% state_chip job.state job.get_state_display %}`.

    Accepts a plain string or a TextChoices member; `borrowed=True` turns a running
    chip amber with "(borrowed)" in its text, so colour is never the only signal.
    """
    if is_missing(state):
        return MISSING
    text = label or getattr(state, "label", "") or str(state).replace("_", " ").capitalize()
    css = state_class(state, borrowed=borrowed)
    if borrowed and css == "borrowed" and "borrow" not in text.lower():
        text = f"{text} (borrowed)"
    return format_html('<span class="chip chip--{}">{}</span>', css, text)


@register.simple_tag
def localtime_tag(value):
    """`<time>` with the ISO UTC instant, shown in the active time zone, UTC on hover.

    app.js later re-renders the text in the browser's own time zone; the server-side
    text is what prints, and what a browser without JavaScript shows.
    """
    if is_missing(value):
        return MISSING
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    utc = value.astimezone(dt.UTC)
    local = timezone.localtime(value)
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>',
        utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
        utc.strftime("%Y-%m-%d %H:%M"),
        format_date(local, "j M Y, H:i T"),
    )


@register.simple_tag(takes_context=True)
def allowed(context, action: str, obj=None) -> bool:
    """The rules table's answer for the signed-in user, for links and buttons:
    `{% allowed "policy.edit" as can_edit %}`, `{% allowed "job.manage" job as can_manage %}`."""
    user = context.get("user") or getattr(context.get("request"), "user", None)
    return user is not None and rules.allowed(user, action, obj)
