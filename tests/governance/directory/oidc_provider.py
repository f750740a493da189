"""The OpenID Connect provider the sso tests sign in with: oidc-provider-mock (a real
authorization server: discovery, authorize, token, userinfo, JWKS, end_session) run as
its own process on a free loopback port for the test session (fixture oidc_provider),
and the product configured for it as config/settings.py does from OIDC_* (oidc_login).
When it cannot start the tests are skipped with the reason (failed with
REQUIRE_SERVICES=1)."""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES", "") in {"1", "true", "yes"}
CLIENT_ID = "gpuq-tests"
CLIENT_SECRET = "gpuq-tests-secret"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _unavailable(why: str):
    if REQUIRE_SERVICES:
        pytest.fail(f"REQUIRE_SERVICES=1 but the OIDC provider {why}", pytrace=False)
    pytest.skip(f"needs sso: the OIDC provider (oidc-provider-mock) {why}")


@dataclass
class Provider:
    issuer: str

    def person(self, sub: str, **claims) -> None:
        """Create or change the provider's user `sub` (its claims: username, groups...)."""
        answer = requests.put(f"{self.issuer}/users/{sub}", json=claims, timeout=10)
        answer.raise_for_status()

    def revoke(self, sub: str) -> None:
        """Revoke every token of `sub` at the provider (as an admin removing or disabling
        the user does): its refresh tokens are refused from now on (invalid_grant)."""
        answer = requests.post(f"{self.issuer}/users/{sub}/revoke-tokens", timeout=10)
        answer.raise_for_status()

    def is_provider(self, url: str) -> bool:
        return url.startswith(self.issuer + "/")


def _run_provider(tmp_path_factory, *options: str):
    """oidc-provider-mock as a process on a free loopback port, until the generator ends."""
    port = _free_port()
    log = tmp_path_factory.mktemp("oidc") / "provider.log"
    try:
        import oidc_provider_mock  # noqa: F401
    except ImportError:
        _unavailable("is not installed (pip install -e '.[test]')")
    with open(log, "w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "oidc_provider_mock",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *options,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    issuer = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if requests.get(f"{issuer}/.well-known/openid-configuration", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                _unavailable(f"did not start on port {port}: {log.read_text()[-500:]}")
            time.sleep(0.1)
        yield Provider(issuer=issuer)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory):
    """The provider as a deployment's: it issues a refresh token at each login."""
    yield from _run_provider(tmp_path_factory)


@pytest.fixture(scope="session")
def oidc_provider_without_refresh(tmp_path_factory):
    """A provider that issues no refresh token (its --no-refresh-token)."""
    yield from _run_provider(tmp_path_factory, "--no-refresh-token")


@pytest.fixture
def oidc_login(settings, oidc_provider):
    """The product configured for OIDC login against `oidc_provider` (discovery)."""
    yield from configure_for(settings, oidc_provider)


def configure_for(settings, provider: Provider):
    """The product's OIDC settings for `provider`, as config/settings.py makes them."""
    from config.oidc_settings import oidc_settings
    from governance.directory import oidc

    oidc_provider = provider
    for name, value in oidc_settings(
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        issuer=oidc_provider.issuer,
        provider_name="Example SSO",
    ).items():
        setattr(settings, name, value)
    csp = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)
    csp["DIRECTIVES"]["form-action"] += settings.OIDC_FORM_ACTION_ORIGINS
    settings.CONTENT_SECURITY_POLICY = csp
    backends = list(settings.AUTHENTICATION_BACKENDS)
    backends.insert(0, "governance.directory.oidc.DirectoryOIDCBackend")
    settings.AUTHENTICATION_BACKENDS = backends
    oidc.forget_discovery()
    yield oidc_provider
    oidc.forget_discovery()


def query_of(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


def follow(client, provider: Provider, url: str, *, sub: str | None = None, limit: int = 10):
    """Follow redirects from `url` across the product (Django's test client) and the
    provider (HTTP); at the provider's authorize page, choose `sub` as its form does.
    Returns the last response and the URLs visited."""
    visited = []
    http = requests.Session()
    for _ in range(limit):
        visited.append(url)
        if provider.is_provider(url):
            path = urlsplit(url).path
            if path.endswith("/oauth2/authorize") and sub is not None:
                response = http.post(url, data={"sub": sub}, allow_redirects=False, timeout=10)
            elif path.endswith("/oauth2/end_session"):
                form = query_of(url)
                response = http.post(
                    f"{provider.issuer}/oauth2/end_session/confirm",
                    data={"redirect_uri": form.get("post_logout_redirect_uri", "")},
                    allow_redirects=False,
                    timeout=10,
                )
            else:
                response = http.get(url, allow_redirects=False, timeout=10)
            status, location = response.status_code, response.headers.get("Location")
        else:
            parts = urlsplit(url)
            response = client.get(parts.path, query_of(url))
            status, location = response.status_code, response.headers.get("Location")
        if status not in (301, 302, 303, 307) or not location:
            return response, visited
        if location.startswith("/"):
            base = provider.issuer if provider.is_provider(url) else "http://testserver"
            location = base + location
        url = location
    raise AssertionError(f"more than {limit} redirects: {visited}")
