"""The top bar's navigation, by role (pages.md, "Navigation by role").

Each entry names the action of core.rules that opens its page, so the bar and
the page ask the same table. An entry is shown only when its URL name resolves, so a
page that has not landed yet, or was removed, never becomes a link to a 404; and only
when the table allows its action, so no link answers 403.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse
from django.utils.functional import SimpleLazyObject
from django.utils.module_loading import import_string

from core import permissions, rules


@dataclass(frozen=True)
class NavEntry:
    label: str
    url_name: str
    action: str  # the core.rules action that opens the page
    # Dotted path to `f(*, user) -> int` giving the badge count. Imported and called
    # only when the entry is shown, so no count query runs for a page that is absent.
    badge: str = ""


NAV: tuple[NavEntry, ...] = (
    NavEntry("Queues", "queue-list", "policy.view"),
    NavEntry("Policies", "policy-list", "policy.edit"),
    NavEntry("History", "history", "history.view"),
    NavEntry("Exceptions", "exception-list", "exception.list"),
    NavEntry(
        "Decisions",
        "decision-queue",
        "exception.decision_queue",
        badge="governance.exceptions.selectors.decision_queue_count",
    ),
    NavEntry("Knowledge", "knowledge-search", "knowledge.view"),
    NavEntry("Jobs", "job-list", "job.view"),
    NavEntry("Dashboard", "dashboard", "dashboard.view"),
    NavEntry("What-if", "whatif-list", "whatif.use"),
)


@dataclass(frozen=True)
class NavItem:
    label: str
    url: str
    current: bool = False
    badge: int | None = None


def nav_items_for(user, path: str = "") -> list[NavItem]:
    """The entries of NAV this user may open, in table order, the one holding `path`
    marked current (the longest matching URL prefix wins)."""
    if not user.is_authenticated:
        return []
    shown: list[tuple[NavEntry, str]] = []
    for entry in NAV:
        if not rules.allowed(user, entry.action):
            continue
        try:
            url = reverse(entry.url_name)
        except NoReverseMatch:
            continue
        shown.append((entry, url))
    matches = [url for _, url in shown if path == url or (url != "/" and path.startswith(url))]
    current = max(matches, key=len, default=None)
    return [
        NavItem(
            label=entry.label,
            url=url,
            current=url == current,
            badge=import_string(entry.badge)(user=user) if entry.badge else None,
        )
        for entry, url in shown
    ]


def navigation(request):
    """`nav_items` and `user_role_label`, computed only if a template reads them, so
    htmx fragments (which do not extend base.html) pay no query for the top bar."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav_items": [], "user_role_label": ""}
    return {
        "nav_items": SimpleLazyObject(lambda: nav_items_for(user, request.path)),
        "user_role_label": SimpleLazyObject(lambda: permissions.role_label(user)),
    }
