"""API throttles: per user, reads and writes counted apart; per address when anonymous.

The rates are read from REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] on every request
(DRF's own classes read them once, at import), so a changed setting applies at once;
a rate of None turns that throttle off. The counters live in the default cache
(Redis in production, shared by every web process). DRF answers 429 with Retry-After.
"""

from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class _LiveRates:
    def __init__(self):
        pass  # the scope, hence the rate, is only known per request

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def _prepare(self, scope: str) -> None:
        self.scope = scope
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)


class UserReadWriteThrottle(_LiveRates, UserRateThrottle):
    """Signed-in users: `read` for GET, HEAD and OPTIONS, `write` for the rest."""

    def allow_request(self, request, view):
        if not request.user or not request.user.is_authenticated:
            return True
        self._prepare("read" if request.method in SAFE_METHODS else "write")
        return super().allow_request(request, view)


class AnonymousThrottle(_LiveRates, AnonRateThrottle):
    def allow_request(self, request, view):
        if request.user and request.user.is_authenticated:
            return True
        self._prepare("anon")
        return super().allow_request(request, view)
