"""The LDAP directory fixtures (tests/directory_server.py)."""

from tests.directory_server import directory, ldap_login, ldap_server  # noqa: F401
