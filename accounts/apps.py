from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts: API tokens and login lockouts"
    default_auto_field = "django.db.models.BigAutoField"
