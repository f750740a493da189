from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts: API tokens and login lockouts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib.auth.signals import user_logged_in

        from accounts.timezones import remember_on_login

        user_logged_in.connect(remember_on_login, dispatch_uid="accounts.time_zone")
