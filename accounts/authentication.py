"""`Authorization: Token <key>` with the product's expiring, revocable tokens."""

from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from accounts.tokens import token_for_key, token_used


class ExpiringTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key):
        token = token_for_key(key=key)
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if token.revoked_at is not None:
            raise AuthenticationFailed("Token revoked.")
        if token.expires_at <= timezone.now():
            raise AuthenticationFailed("Token expired: ask for a new one.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        token_used(token=token)
        return (token.user, token)
