"""The top bar's navigation, by role (pages.md, "Navigation by role").

One table says which page each role may open. An entry is shown only when its URL
name resolves, so a page that has not landed yet, or was removed, never becomes a
link to a 404; and only when the user passes its check, so no link answers 403.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse
from django.utils.functional import SimpleLazyObject
from django.utils.module_loading import import_string

from governance import permissions
from governance.permissions import ADMINS, EXCEPTION_OWNERS, LEADERSHIP, TEAM_LEADS


def _roles(*roles: str) -> Callable[..., bool]:
    def check(user) -> bool:
        return permissions.has_role(user, *roles)

    return check


@dataclass(frozen=True)
class NavEntry:
    label: str
    url_name: str
    visible: Callable[..., bool]
    # Dotted path to `f(*, user) -> int` giving the badge count. Imported and called
    # only when the entry is shown, so no count query runs for a page that is absent.
    badge: str = ""


NAV: tuple[NavEntry, ...] = (
    NavEntry("Queues", "queue-list", permissions.can_view_policies),
    NavEntry("Policies", "policy-list", permissions.can_edit_policies),
    NavEntry("History", "history", permissions.can_view_history),
    NavEntry("Exceptions", "exception-list", _roles(ADMINS, TEAM_LEADS, EXCEPTION_OWNERS)),
    NavEntry(
        "Decisions",
        "decision-queue",
        _roles(EXCEPTION_OWNERS),
        badge="governance.selectors.exceptions.decision_queue_count",
    ),
    NavEntry("Knowledge", "knowledge-search", lambda user: user.is_authenticated),
    NavEntry("Jobs", "job-list", _roles(ADMINS, TEAM_LEADS)),
    NavEntry("Dashboard", "dashboard", _roles(ADMINS, LEADERSHIP)),
    NavEntry("What-if", "whatif-list", permissions.can_edit_policies),
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
        if not entry.visible(user):
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
