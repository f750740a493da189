"""The scheduler's relations point at the fleet's models, and the moved models leave
the scheduler's state (state only: the tables now belong to fleet).
"""

import django.db.models.deletion
from django.db import migrations, models

from fleet.migration_state import ModelStateOnly


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0001_models_from_governance_and_scheduler"),
        ("governance", "0010_fleet_models_referenced"),
        ("scheduler", "0006_job_share_newest"),
    ]

    operations = [
        ModelStateOnly(
            state_operations=[
                migrations.RemoveField(
                    model_name="jobevent",
                    name="by",
                ),
                migrations.AlterField(
                    model_name="jobdecision",
                    name="job",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="decision",
                        to="fleet.job",
                    ),
                ),
                migrations.AlterField(
                    model_name="jobdecision",
                    name="new_job",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="fleet.job",
                    ),
                ),
                migrations.RemoveField(
                    model_name="jobevent",
                    name="job",
                ),
                migrations.RemoveField(
                    model_name="jobdefinition",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="jobdefinition",
                    name="queues",
                ),
                migrations.RemoveField(
                    model_name="jobdefinition",
                    name="retired_by",
                ),
                migrations.RemoveField(
                    model_name="jobdefinitionrevision",
                    name="definition",
                ),
                migrations.RemoveField(
                    model_name="jobdefinitionrevision",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="jobdefinitionrevision",
                    name="instance_type",
                ),
                migrations.RemoveField(
                    model_name="jobevent",
                    name="actor",
                ),
                migrations.AlterField(
                    model_name="queuepassstate",
                    name="queue",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="fleet.jobqueue",
                    ),
                ),
                migrations.DeleteModel(
                    name="Job",
                ),
                migrations.DeleteModel(
                    name="JobDefinition",
                ),
                migrations.DeleteModel(
                    name="JobDefinitionRevision",
                ),
                migrations.DeleteModel(
                    name="JobEvent",
                ),
            ],
        ),
    ]
