"""Each user's time zone: the zone every page reads date-time inputs in and shows times in.

The zone is the user's profile choice; until they choose one it is the browser's
(app.js sends it in the `browser_tz` cookie and stores it on the first visit), and
without either it is settings.TIME_ZONE. `TimezoneMiddleware` activates it per request,
so Django's forms read a typed "09:00" in that zone and templates show times in it.
"""

from __future__ import annotations

import functools
import zoneinfo
from urllib.parse import unquote

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

BROWSER_COOKIE = "browser_tz"
SESSION_KEY = "time_zone"


@functools.cache
def zone_names() -> tuple[str, ...]:
    """Every IANA zone name this system knows, sorted (the profile page's choices)."""
    return tuple(sorted(zoneinfo.available_timezones()))


@functools.cache
def _zone_set() -> frozenset[str]:
    return frozenset(zone_names())


def zone_or_none(name: str | None) -> zoneinfo.ZoneInfo | None:
    if not name or len(name) > 64 or name not in _zone_set():
        return None
    return zoneinfo.ZoneInfo(name)


def time_zone_validate(name: str) -> None:
    if zone_or_none(name) is None:
        raise ValidationError(
            {"time_zone": [f"'{name[:64]}' is not a time zone name, such as Europe/Paris"]}
        )


def time_zone_of(user) -> str:
    """The zone `user` chose or had detected; "" if none yet."""
    from accounts.models import Profile

    profile = Profile.objects.filter(user=user).only("time_zone").first()
    return profile.time_zone if profile else ""


def time_zone_set(*, user, name: str, only_if_unset: bool = False) -> bool:
    """Store `name` as `user`'s time zone; True if stored. `only_if_unset` (the browser's
    detection) leaves a zone the user chose alone."""
    from accounts.models import Profile

    time_zone_validate(name)
    with transaction.atomic():
        profile, _ = Profile.objects.select_for_update().get_or_create(user=user)
        if only_if_unset and profile.time_zone:
            return False
        profile.time_zone = name
        profile.save(update_fields=["time_zone"])
    return True


def remember_on_login(sender, request, user, **kwargs):
    """user_logged_in: keep the user's stored zone in their session, so a page costs no
    query for it (the profile page and the browser's detection update it)."""
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = time_zone_of(user)


def request_time_zone(request) -> tuple[str, bool]:
    """(zone name, whether the user has one stored) for this request."""
    user = getattr(request, "user", None)
    stored = ""
    if user is not None and user.is_authenticated and hasattr(request, "session"):
        stored = request.session.get(SESSION_KEY, "")
    if zone_or_none(stored):
        return stored, True
    browser = unquote(request.COOKIES.get(BROWSER_COOKIE, ""))
    if zone_or_none(browser):
        return browser, False
    return settings.TIME_ZONE, False


class TimezoneMiddleware:
    """Activates the request's time zone (after AuthenticationMiddleware)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        name, stored = request_time_zone(request)
        request.time_zone = name
        request.time_zone_stored = stored
        timezone.activate(zoneinfo.ZoneInfo(name))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
