"""The LDAP login (django-auth-ldap, configured by config/settings.py from LDAP_*).

DirectoryLDAPBackend is django-auth-ldap's backend, plus: after the directory accepted
the user's password, their groups (names and DNs, nested groups included) go through
directory_sync, so the session starts with the roles and teams the directory gives.
django-axes is the first backend, so a locked-out username and address are refused
before the directory is asked, and a wrong directory password counts as a failure.

A refused login of someone the directory no longer lists is the check that takes their
roles, teams and tokens away (_forget_if_unlisted).

ldap_check asks the directory about one user without their password (bound as
LDAP_BIND_DN): their groups, or None when it no longer lists them; an unreachable
directory raises DirectoryUnavailable, so a sync never takes roles away because the
server was down.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django_auth_ldap.backend import LDAPBackend, ldap_error

from governance.directory.models import DirectoryAccount
from governance.directory.services import directory_sync

log = logging.getLogger(__name__)


class DirectoryUnavailable(Exception):
    """The directory did not answer (or refused the product's own bind)."""


def _groups_of(ldap_user) -> list[str]:
    return sorted(set(ldap_user.group_names) | set(ldap_user.group_dns))


class DirectoryLDAPBackend(LDAPBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if (username or "").strip() in settings.BREAK_GLASS_USERS:
            # A break-glass admin is local only: the directory neither signs them in nor
            # manages their roles (it may be what is broken).
            return None
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and username:
            _forget_if_unlisted(username.strip())
        return user

    def get_or_build_user(self, username, ldap_user):
        user, built = super().get_or_build_user(username, ldap_user)
        if (
            not built
            and user.has_usable_password()
            and not DirectoryAccount.objects.filter(user=user).exists()
        ):
            # A local account is never taken over by a directory entry of the same name:
            # to move it to the directory, clear its password (set_unusable_password).
            log.warning("directory login of %s refused: a local account has that name", username)
            raise ldap_user.AuthenticationFailed(f"{username} is a local account")
        return user, built

    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is not None:
            directory_sync(
                user=user,
                groups=_groups_of(ldap_user),
                source=DirectoryAccount.Source.LDAP,
                trigger="login",
            )
        return user


def ldap_check(username: str) -> list[str] | None:
    """The user's directory groups now, or None when the directory no longer lists them.
    Raises DirectoryUnavailable when the directory cannot be asked."""
    errors: list[Exception] = []

    def keep(sender, context, user, request=None, exception=None, **_):
        errors.append(exception)

    ldap_error.connect(keep, dispatch_uid=f"directory.check.{id(errors)}")
    try:
        backend = DirectoryLDAPBackend()
        user = backend.populate_user(username)
        groups = _groups_of(user.ldap_user) if user is not None else None
    except Exception as error:
        import ldap

        if isinstance(error, ldap.LDAPError):
            raise DirectoryUnavailable(str(error)) from error
        raise
    finally:
        ldap_error.disconnect(dispatch_uid=f"directory.check.{id(errors)}")
    if errors:
        raise DirectoryUnavailable(str(errors[0]))
    return groups


def _forget_if_unlisted(username: str) -> None:
    """A refused login of someone who signed in through the directory before: when the
    directory no longer lists them (asked again, bound as the product), this login is
    the check that takes their roles, teams and tokens away. A wrong password of a
    listed user, or a directory that does not answer, changes nothing."""
    account = (
        DirectoryAccount.objects.filter(
            user__username=username, source=DirectoryAccount.Source.LDAP, listed=True
        )
        .select_related("user")
        .first()
    )
    if account is None:
        return
    try:
        groups = ldap_check(username)
    except DirectoryUnavailable as error:
        log.warning("could not ask the directory about %s: %s", username, error)
        return
    if groups is None:
        directory_sync(
            user=account.user, groups=None, source=DirectoryAccount.Source.LDAP, trigger="login"
        )
