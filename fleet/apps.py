from django.apps import AppConfig


class FleetConfig(AppConfig):
    """The shared data every app reads: teams, instance types, queues and capacity, shares
    and their limits, urgency definitions, job definitions, jobs and job events."""

    name = "fleet"
    verbose_name = "Fleet"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from fleet import teams

        teams.register()
