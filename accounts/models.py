"""API tokens that expire and can be revoked.

Only a SHA-256 digest of a token is stored: a copy of the database (a backup, a
support dump) holds no usable credential. Tokens are long random strings, so a fast
hash is enough; the first characters are kept in clear so a user can tell tokens apart.
"""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone


class ApiToken(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        EXPIRED = "expired", "Expired"
        REVOKED = "revoked", "Revoked"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What the token is for.")
    prefix = models.CharField(max_length=8, help_text="The token's first characters.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Kept to the minute by accounts.tokens.token_used.
    last_used_at = models.DateTimeField(
        null=True, blank=True, help_text="When it last authenticated a request, to the minute."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("created_at")), name="api_token_expires_after_issue"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def state(self, now=None) -> str:
        if self.revoked_at is not None:
            return self.State.REVOKED
        if self.expires_at <= (now or timezone.now()):
            return self.State.EXPIRED
        return self.State.ACTIVE


class Profile(models.Model):
    """What a user chose for themselves: the time zone their pages read and show times in.

    An empty time zone means "not chosen yet": pages then use the browser's zone (app.js
    reports it in a cookie and stores it here on the first visit)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile"
    )
    time_zone = models.CharField(
        max_length=64,
        blank=True,
        help_text="An IANA time zone name (Europe/Paris); empty until chosen or detected.",
    )

    def __str__(self) -> str:
        return f"{self.user} ({self.time_zone or 'time zone not set'})"
