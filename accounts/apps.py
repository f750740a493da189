from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts: API tokens and login lockouts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib.auth.signals import user_logged_in

        from accounts.timezones import remember_on_login

        user_logged_in.connect(remember_on_login, dispatch_uid="accounts.time_zone")
        from accounts.directory import (
            end_sessions_of_unlisted,
            revoke_tokens_of_idle,
            revoke_tokens_of_unlisted,
        )
        from core.signals import directory_tokens_expired, directory_user_unlisted

        directory_user_unlisted.connect(revoke_tokens_of_unlisted, dispatch_uid="accounts.unlisted")
        directory_user_unlisted.connect(
            end_sessions_of_unlisted, dispatch_uid="accounts.unlisted_sessions"
        )
        directory_tokens_expired.connect(revoke_tokens_of_idle, dispatch_uid="accounts.idle")
        self._forget_identities_on_change()

    @staticmethod
    def _forget_identities_on_change() -> None:
        """Every change to who a user is or may do makes cached API identities stale."""
        from django.apps import apps
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.db.models.signals import m2m_changed, post_delete, post_save

        from accounts.identity import forget_everyone
        from accounts.models import ApiToken

        user_model = get_user_model()
        team = apps.get_model("fleet", "Team")
        for model in (user_model, Group, team, ApiToken):
            for signal in (post_save, post_delete):
                signal.connect(forget_everyone, sender=model, dispatch_uid=f"identity.{model}")
        for through in (user_model.groups.through, team.members.through, team.leads.through):
            m2m_changed.connect(forget_everyone, sender=through, dispatch_uid=f"identity.{through}")
