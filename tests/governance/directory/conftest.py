"""The LDAP directory fixtures (tests/directory_server.py) and the OpenID Connect
provider's (oidc_provider.py)."""

from tests.directory_server import directory, ldap_login, ldap_server  # noqa: F401
from tests.governance.directory.oidc_provider import (  # noqa: F401
    oidc_login,
    oidc_provider,
    oidc_provider_without_refresh,
)
