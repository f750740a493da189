"""A queue's executor is one of the registry's (scheduler.executors), read at run time:
a new executor needs no migration. No SQL: choices live in Python only."""

from django.db import migrations, models

import fleet.executors


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0001_models_from_governance_and_scheduler"),
    ]

    operations = [
        migrations.AlterField(
            model_name="jobqueue",
            name="executor",
            field=models.CharField(
                choices=fleet.executors.executor_choices, default="simulated", max_length=16
            ),
        ),
    ]
