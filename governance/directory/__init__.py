"""Roles and teams from the organisation's directory (single sign-on).

An admin maps directory groups (LDAP groups, nested ones included; later OIDC claims) to
the product's roles and to team membership (member or lead) on the directory page
(`/directory/`, models.GroupMapping). At each login through the directory, and every
DIRECTORY_SYNC_MINUTES for everyone who signed in that way (tasks.py), services.
directory_sync makes the user's roles and the mapped teams' memberships follow their
groups, each change a policy write recorded in the history (cause "directory": which
user, which groups, what changed). A user the directory no longer lists loses their
roles, their teams and their API tokens. ldap.py is the LDAP backend that calls it;
config/ldap_settings.py turns the LDAP_* environment into django-auth-ldap's settings.
"""
