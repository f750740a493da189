"""The directory mapping (which directory group gives which role or team membership)
and the accounts that sign in through the directory."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from core.permissions import ROLE_LABELS, ROLES
from fleet.models import JobQueue, Team


class GroupMapping(models.Model):
    """A directory group gives its members one role, membership of one team (as a member
    or a lead), or the exception-owner scope of one queue (they decide its requests; the
    role exception_owners is a mapping of its own). A group may have several mappings;
    nested groups count (a member of a group inside `group` is a member of `group`)."""

    class Kind(models.TextChoices):
        ROLE = "role", "Role"
        TEAM_MEMBER = "team_member", "Team member"
        TEAM_LEAD = "team_lead", "Team lead"
        EXCEPTION_OWNER = "exception_owner", "Exception owner of a queue"

    group = models.CharField(
        max_length=255,
        help_text="The directory group: its name (LDAP: the group's cn) or its full DN.",
    )
    kind = models.CharField(max_length=16, choices=Kind)
    role = models.CharField(
        max_length=32, blank=True, choices=[(role, ROLE_LABELS[role]) for role in ROLES]
    )
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="directory_mappings"
    )
    queue = models.ForeignKey(
        JobQueue,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="directory_mappings",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["group", "kind", "role", "team__name"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(kind="role") & ~Q(role="") & Q(team__isnull=True) & Q(queue__isnull=True)
                )
                | (
                    Q(kind__in=["team_member", "team_lead"])
                    & Q(role="")
                    & Q(team__isnull=False)
                    & Q(queue__isnull=True)
                )
                | (
                    Q(kind="exception_owner")
                    & Q(role="")
                    & Q(team__isnull=True)
                    & Q(queue__isnull=False)
                ),
                name="groupmapping_role_or_team",
            ),
            models.UniqueConstraint(
                Lower("group"), "kind", "role", "team", "queue", name="groupmapping_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.group} → {self.gives}"

    @property
    def gives(self) -> str:
        if self.kind == self.Kind.ROLE:
            return f"role {self.role}"
        if self.kind == self.Kind.EXCEPTION_OWNER:
            return f"exception owner of queue {self.queue.name}"
        return f"{'lead' if self.kind == self.Kind.TEAM_LEAD else 'member'} of {self.team.name}"


class DirectoryAccount(models.Model):
    """A user who signed in through the directory: their roles and mapped teams follow
    it (at each login and each periodic sync)."""

    class Source(models.TextChoices):
        LDAP = "ldap", "LDAP"
        OIDC = "oidc", "OpenID Connect"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="directory_account"
    )
    source = models.CharField(max_length=8, choices=Source)
    # The groups the directory listed at the last check, as it named them.
    groups = models.JSONField(default=list, blank=True)
    listed = models.BooleanField(
        default=True, help_text="False once the directory no longer lists the user."
    )
    checked_at = models.DateTimeField(null=True, blank=True)
    # OpenID Connect: who the provider says this is. (issuer, subject) is the provider's
    # stable identity (the `sub` claim): the user is found by it before the username claim.
    issuer = models.CharField(max_length=255, blank=True)
    subject = models.CharField(max_length=255, blank=True)
    # The provider's refresh token from the last login, encrypted with a key derived from
    # SECRET_KEY (governance.directory.secrets); server-side only, never shown. The
    # periodic check uses it (the refresh-token grant) to ask whether the provider still
    # lists the user. Empty when the provider issued none.
    refresh_token = models.TextField(blank=True, editable=False)

    class Meta:
        ordering = ["user__username"]
        constraints = [
            models.UniqueConstraint(
                "issuer",
                "subject",
                condition=~Q(subject=""),
                name="directoryaccount_issuer_subject_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.get_source_display()})"
