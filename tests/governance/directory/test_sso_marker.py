"""The sso marker holds each test to the server its fixtures start (tests/conftest.py):
an OIDC test never skips because slapd is missing, nor an LDAP test because the OIDC
provider is."""

from __future__ import annotations

import importlib

conftest = importlib.import_module("tests.conftest")


def test_each_sso_test_waits_only_for_its_own_server(monkeypatch):
    monkeypatch.setattr(conftest, "_LDAP_MISSING", "slapd is not installed")
    monkeypatch.setattr(conftest, "_OIDC_MISSING", "")
    assert conftest.sso_missing(["client", "oidc_login", "oidc_provider"]) == ""
    assert conftest.sso_missing(["ldap_login", "directory"]) == "slapd is not installed"
    assert conftest.sso_missing(["jwks_endpoint", "settings"]) == ""  # neither server

    monkeypatch.setattr(conftest, "_LDAP_MISSING", "")
    monkeypatch.setattr(conftest, "_OIDC_MISSING", "oidc-provider-mock is not installed")
    assert conftest.sso_missing(["ldap_login"]) == ""
    assert conftest.sso_missing(["oidc_provider_without_refresh"]) == (
        "oidc-provider-mock is not installed"
    )
    both = conftest.sso_missing(["ldap_login", "oidc_login"])
    assert both == "oidc-provider-mock is not installed"
