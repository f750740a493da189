"""django-csp's middleware, with the policy of an ordinary response built once.

django-csp builds the Content-Security-Policy header again for every response, from
the settings, even when nothing of it can differ: no nonce was used, and the view
changed nothing with csp's decorators. That cost about 4% of a short API read. Such a
response here gets the policy built once (and again after the setting changes, as in
tests); any other (a page whose template used the nonce, a decorated view, report-only
or excluded prefixes configured, a debug error page) goes through django-csp itself.
"""

from __future__ import annotations

import functools

from csp import middleware
from csp.constants import HEADER
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

# What csp's decorators set on a response to change or drop its policy.
_OVERRIDES = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_exempt",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
    "_csp_exempt_ro",
)


@functools.cache
def _policy() -> str:
    return build_policy()


@receiver(setting_changed)
def _forget_policy(*, setting, **kwargs):
    if setting.startswith("CONTENT_SECURITY_POLICY") or setting == "DEBUG":
        _policy.cache_clear()


class CSPMiddleware(middleware.CSPMiddleware):
    def process_response(self, request, response):
        if not self._plain(request, response):
            return super().process_response(request, response)
        policy = _policy()
        if policy:
            response[HEADER] = policy
        # As django-csp does: the nonce cannot be asked for once the header is written.
        request.csp_nonce = middleware.CheckableLazyObject(self._csp_nonce_post_response)
        return response

    @staticmethod
    def _plain(request, response) -> bool:
        configured = getattr(settings, "CONTENT_SECURITY_POLICY", None) or {}
        return (
            getattr(request, "_csp_nonce", None) is None
            and HEADER not in response
            and not any(hasattr(response, name) for name in _OVERRIDES)
            and not getattr(settings, "CONTENT_SECURITY_POLICY_REPORT_ONLY", None)
            and not configured.get("EXCLUDE_URL_PREFIXES")
            and not settings.DEBUG
        )
