"""config.csp: an ordinary response gets the policy built once, exactly django-csp's;
a nonce, csp's decorators and a changed setting still work as django-csp's own."""

import pytest
from csp.constants import HEADER
from csp.exceptions import CSPNonceError
from csp.utils import build_policy
from django.http import HttpResponse
from django.test import RequestFactory

from config.csp import CSPMiddleware


def respond(prepare=None, *, use_nonce=False):
    middleware = CSPMiddleware(lambda request: HttpResponse())
    request = RequestFactory().get("/")
    middleware.process_request(request)
    nonce = str(request.csp_nonce) if use_nonce else None
    response = HttpResponse()
    if prepare:
        prepare(response)
    return request, middleware.process_response(request, response), nonce


def test_an_ordinary_response_gets_django_csps_policy():
    request, response, _ = respond()
    assert response[HEADER] == build_policy()
    assert "script-src 'self'" in response[HEADER] and "nonce" not in response[HEADER]
    with pytest.raises(CSPNonceError):
        str(request.csp_nonce)  # too late, as with django-csp


def test_a_used_nonce_is_in_the_policy():
    _, response, nonce = respond(use_nonce=True)
    assert f"'nonce-{nonce}'" in response[HEADER]
    assert response[HEADER] == build_policy(nonce=nonce)


def test_decorated_responses_keep_their_changes():
    def update(response):
        response._csp_update = {"img-src": ["https://images.example"]}

    assert "https://images.example" in respond(update)[1][HEADER]

    def exempt(response):
        response._csp_exempt = True

    assert HEADER not in respond(exempt)[1]


def test_a_changed_setting_changes_the_policy(settings):
    respond()
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    assert respond()[1][HEADER] == "default-src 'none'"
