"""Team membership and workload classes are policy (issue 24): the policy history and
proposals name the team, the user or the class they change, and an exception decision
keeps the decider's membership.

One migration for what were governance 0012 and 0014 (never released), each model's
changes in one step (core.migration_ops.AlterModelInOneStep): each operation re-rendered
the migration state, and governance_policychange's relations reach most of the project.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from core.migration_ops import AlterModelInOneStep


class Migration(migrations.Migration):
    replaces = [
        ("governance", "0012_membership_policy"),
        ("governance", "0014_workload_class_policy"),
    ]

    dependencies = [
        ("fleet", "0004_interruption_contracts"),
        ("governance", "0011_fleet_models_moved"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="exceptionrequest",
            name="decided_membership",
            field=models.JSONField(blank=True, null=True),
        ),
        AlterModelInOneStep(
            model_name="policychange",
            operations=[
                migrations.AddField(
                    model_name="policychange",
                    name="subject",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                        db_index=False,
                    ),
                ),
                migrations.AddField(
                    model_name="policychange",
                    name="team",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="changes",
                        to="fleet.team",
                        db_index=False,
                    ),
                ),
                migrations.AddField(
                    model_name="policychange",
                    name="workload_class",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="changes",
                        to="fleet.workloadclass",
                    ),
                ),
                migrations.AlterField(
                    model_name="policychange",
                    name="cause",
                    field=models.CharField(
                        choices=[
                            ("edit", "Edit"),
                            ("exception", "Exception"),
                            ("revert", "Revert"),
                            ("import", "Import"),
                            ("direct", "Direct change"),
                        ],
                        default="edit",
                        max_length=16,
                    ),
                ),
                migrations.AlterField(
                    model_name="policychange",
                    name="target",
                    field=models.CharField(
                        choices=[
                            ("share", "Quota share"),
                            ("queue", "Queue capacity"),
                            ("urgency", "Urgency definition"),
                            ("team", "Team membership"),
                            ("role", "Role assignment"),
                            ("workload_class", "Workload class"),
                        ],
                        max_length=16,
                    ),
                ),
            ],
        ),
        AlterModelInOneStep(
            model_name="policyproposal",
            operations=[
                migrations.AddField(
                    model_name="policyproposal",
                    name="subject",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AddField(
                    model_name="policyproposal",
                    name="team",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="proposals",
                        to="fleet.team",
                    ),
                ),
                migrations.AddField(
                    model_name="policyproposal",
                    name="workload_class",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="proposals",
                        to="fleet.workloadclass",
                    ),
                ),
                migrations.AlterField(
                    model_name="policyproposal",
                    name="kind",
                    field=models.CharField(
                        choices=[
                            ("share_create", "New share"),
                            ("share_update", "Change of a share"),
                            ("queue_create", "New queue"),
                            ("queue_capacity", "Change of a queue's capacity"),
                            ("urgency_create", "New urgency definition"),
                            ("urgency_update", "Change of an urgency definition"),
                            ("team_create", "New team"),
                            ("team_update", "Change of a team's membership"),
                            ("team_delete", "Deletion of a team"),
                            ("role_assignment", "Change of a user's roles"),
                            ("class_create", "New workload class"),
                            ("class_update", "Change of a workload class"),
                            ("class_delete", "Deletion of a workload class"),
                            ("revert", "Revert of a change"),
                        ],
                        max_length=16,
                    ),
                ),
            ],
        ),
    ]
