"""Local passwords as break-glass (settings.LOCAL_PASSWORD_LOGIN, BREAK_GLASS_USERS).

With LOCAL_PASSWORD_LOGIN on (the default) this is Django's ModelBackend. Off, a local
password signs in only the admins named in BREAK_GLASS_USERS: everyone else signs in
through the directory. A refused local login is a failed login like a wrong password
(django-axes counts it), so the lockout applies to it too.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.backends import ModelBackend

from core.permissions import is_admin


def password_login_allowed(username: str | None, user=None) -> bool:
    """Whether `username` (the user found, when given) may sign in with a local password."""
    if settings.LOCAL_PASSWORD_LOGIN:
        return True
    if not username or username not in settings.BREAK_GLASS_USERS:
        return False
    return user is None or is_admin(user)


class LocalPasswordBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if not password_login_allowed(username):
            return None
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and not password_login_allowed(username, user):
            return None
        return user
