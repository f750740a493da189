"""The rest of the moved models leave governance's state (state only: the tables now
belong to fleet, fleet/migrations/0001).
"""

from django.db import migrations

from fleet.migration_state import ModelStateOnly


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0010_fleet_models_referenced"),
        ("scheduler", "0007_fleet_models_moved"),
    ]

    operations = [
        ModelStateOnly(
            state_operations=[
                migrations.DeleteModel(
                    name="InstanceType",
                ),
                migrations.DeleteModel(
                    name="QueueCapacity",
                ),
                migrations.DeleteModel(
                    name="JobQueue",
                ),
                migrations.DeleteModel(
                    name="QuotaShare",
                ),
                migrations.DeleteModel(
                    name="Team",
                ),
                migrations.DeleteModel(
                    name="UrgencyDefinition",
                ),
            ],
        ),
    ]
