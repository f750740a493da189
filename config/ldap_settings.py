"""django-auth-ldap's settings from the LDAP_* environment (config/settings.py calls
ldap_settings only when LDAP_SERVER_URI is set, so python-ldap is imported only then).
No Django models here: it runs while the settings load. It sits with the settings, not
with the directory feature that uses them (governance.directory), so the settings import
no app."""

from __future__ import annotations

GROUP_TYPES = {
    "nested_group_of_names": "NestedGroupOfNamesType",
    "group_of_names": "GroupOfNamesType",
    "nested_group_of_unique_names": "NestedGroupOfUniqueNamesType",
    "nested_active_directory": "NestedActiveDirectoryGroupType",
    "posix": "PosixGroupType",
}
REQUIRE_CERT = {
    "demand": "OPT_X_TLS_DEMAND",
    "allow": "OPT_X_TLS_ALLOW",
    "never": "OPT_X_TLS_NEVER",
}


def ldap_settings(
    *,
    server_uri: str,
    bind_dn: str,
    bind_password: str,
    user_search_base: str,
    user_filter: str = "(uid=%(user)s)",
    group_search_base: str,
    group_filter: str = "(objectClass=groupOfNames)",
    group_type: str = "nested_group_of_names",
    start_tls: bool = False,
    ca_cert_file: str = "",
    require_cert: str = "demand",
    timeout: float = 5,
) -> dict:
    """The AUTH_LDAP_* settings: bind as `bind_dn` to search `user_filter` under
    `user_search_base`, bind as the user, read their groups (nested ones included with a
    nested `group_type`) under `group_search_base`. TLS: ldaps:// in the URI, or
    `start_tls`; `ca_cert_file` names the CA bundle the server's certificate is checked
    against (`require_cert`)."""
    import ldap
    from django_auth_ldap import config

    missing = [
        name
        for name, value in (
            ("LDAP_USER_SEARCH_BASE", user_search_base),
            ("LDAP_GROUP_SEARCH_BASE", group_search_base),
        )
        if not value
    ]
    if missing:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"LDAP_SERVER_URI is set but {', '.join(missing)} is not")
    options = {
        ldap.OPT_REFERRALS: 0,
        ldap.OPT_NETWORK_TIMEOUT: timeout,
        ldap.OPT_TIMEOUT: timeout,
        ldap.OPT_X_TLS_REQUIRE_CERT: getattr(ldap, REQUIRE_CERT[require_cert]),
    }
    if ca_cert_file:
        options[ldap.OPT_X_TLS_CACERTFILE] = ca_cert_file
    # Applies the TLS options above to the connection (python-ldap needs it last).
    options[ldap.OPT_X_TLS_NEWCTX] = 0
    return {
        "AUTH_LDAP_SERVER_URI": server_uri,
        "AUTH_LDAP_BIND_DN": bind_dn,
        "AUTH_LDAP_BIND_PASSWORD": bind_password,
        "AUTH_LDAP_START_TLS": start_tls,
        "AUTH_LDAP_CONNECTION_OPTIONS": options,
        "AUTH_LDAP_USER_SEARCH": config.LDAPSearch(
            user_search_base, ldap.SCOPE_SUBTREE, user_filter
        ),
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_GROUP_SEARCH": config.LDAPSearch(
            group_search_base, ldap.SCOPE_SUBTREE, group_filter
        ),
        "AUTH_LDAP_GROUP_TYPE": getattr(config, GROUP_TYPES[group_type])(name_attr="cn"),
        # Groups are read afresh at every login and sync: a change in the directory
        # applies at the next one, never after a cache's lifetime.
        "AUTH_LDAP_CACHE_TIMEOUT": 0,
        # The directory's groups become roles and teams through the admins' mapping
        # (governance.directory), never Django groups of their own or permissions.
        "AUTH_LDAP_MIRROR_GROUPS": False,
        "AUTH_LDAP_FIND_GROUP_PERMS": False,
    }
