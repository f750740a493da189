"""Interruption contracts (issue 24): a job's contract and its STOPPING state, the
definitions' network switch, workload classes.

One migration for what were fleet 0004 to 0007 (never released), each model's changes
in one step (core.migration_ops.AlterModelInOneStep): on SQLite scheduler_job was
rebuilt for each NOT NULL column and constraint, and each operation re-rendered the
migration state, which made a fresh `migrate` (the demo's first start) 1 s slower.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from core.migration_ops import AlterModelInOneStep


class Migration(migrations.Migration):
    replaces = [
        ("fleet", "0004_job_contract"),
        ("fleet", "0005_jobdefinition_network"),
        ("fleet", "0006_workload_classes"),
        ("fleet", "0007_job_stopping"),
    ]

    dependencies = [
        ("fleet", "0003_borrow_limit_constraint_from_the_strategy_table"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkloadClass",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100, unique=True)),
                ("description", models.TextField(blank=True)),
                (
                    "min_runtime_reclaim",
                    models.PositiveIntegerField(
                        default=0,
                        help_text="Seconds from the start of each run during which a job is not a victim of reclaim (0 = none).",
                    ),
                ),
                (
                    "min_runtime_preempt",
                    models.PositiveIntegerField(
                        default=0,
                        help_text="Seconds from the start of each run during which a job is not a victim of in-share preemption (0 = none).",
                    ),
                ),
                (
                    "grace",
                    models.PositiveIntegerField(
                        default=0,
                        help_text="Seconds of notice a victim gets before its capacity is taken (0 = it stops at once).",
                    ),
                ),
                (
                    "checkpoint_on_notice",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Seconds a job needs after notice to save a checkpoint and exit; empty = it does not checkpoint on notice. Needs a grace: with grace 0 no notice is given.",
                        null=True,
                    ),
                ),
                ("version", models.PositiveIntegerField(default=1)),
            ],
            options={
                "ordering": ["name"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            ("min_runtime_reclaim__gte", 0), ("min_runtime_preempt__gte", 0)
                        ),
                        name="workloadclass_min_runtimes_ge_0",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("grace__gte", 0)), name="workloadclass_grace_ge_0"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("checkpoint_on_notice__isnull", True),
                            models.Q(("checkpoint_on_notice__gte", 1), ("grace__gte", 1)),
                            _connector="OR",
                        ),
                        name="workloadclass_checkpoint_on_notice_ge_1_with_grace",
                    ),
                ],
            },
        ),
        AlterModelInOneStep(
            model_name="job",
            operations=[
                migrations.AddField(
                    model_name="job",
                    name="checkpoint_on_notice",
                    field=models.PositiveIntegerField(blank=True, null=True),
                ),
                migrations.AddField(
                    model_name="job",
                    name="grace",
                    field=models.PositiveIntegerField(default=0),
                ),
                migrations.AddField(
                    model_name="job",
                    name="min_runtime_preempt",
                    field=models.PositiveIntegerField(default=0),
                ),
                migrations.AddField(
                    model_name="job",
                    name="min_runtime_reclaim",
                    field=models.PositiveIntegerField(default=0),
                ),
                migrations.AddField(
                    model_name="job",
                    name="notice_time",
                    field=models.PositiveIntegerField(default=0),
                ),
                migrations.AddField(
                    model_name="job",
                    name="protected_blocks",
                    field=models.PositiveIntegerField(default=0),
                ),
                migrations.AddField(
                    model_name="job",
                    name="workload_class",
                    field=models.CharField(blank=True, max_length=100),
                ),
                migrations.RemoveConstraint(
                    model_name="job",
                    name="job_running_has_started_at",
                ),
                migrations.AddField(
                    model_name="job",
                    name="fails_at_stop",
                    field=models.BooleanField(default=False),
                ),
                migrations.AddField(
                    model_name="job",
                    name="grace_until",
                    field=models.DateTimeField(blank=True, null=True),
                ),
                migrations.AddField(
                    model_name="job",
                    name="held_instances",
                    field=models.PositiveIntegerField(default=0),
                ),
                migrations.AddField(
                    model_name="job",
                    name="notice_at",
                    field=models.DateTimeField(blank=True, null=True),
                ),
                migrations.AddField(
                    model_name="job",
                    name="notice_for",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="fleet.job",
                        db_index=False,
                    ),
                ),
                migrations.AddField(
                    model_name="job",
                    name="reclaim_wait_since",
                    field=models.DateTimeField(blank=True, null=True),
                ),
                migrations.AddField(
                    model_name="job",
                    name="saves_on_notice",
                    field=models.BooleanField(default=False),
                ),
                migrations.AddField(
                    model_name="job",
                    name="stop_at",
                    field=models.DateTimeField(blank=True, null=True),
                ),
                migrations.AddField(
                    model_name="job",
                    name="stop_cause",
                    field=models.CharField(blank=True, max_length=32),
                ),
                migrations.AddField(
                    model_name="job",
                    name="terminate_at_stop",
                    field=models.BooleanField(default=False),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="state",
                    field=models.CharField(
                        choices=[
                            ("RUNNABLE", "Runnable"),
                            ("RUNNING", "Running"),
                            ("STOPPING", "Stopping"),
                            ("SUCCEEDED", "Succeeded"),
                            ("FAILED", "Failed"),
                        ],
                        db_index=True,
                        default="RUNNABLE",
                        max_length=10,
                    ),
                ),
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("state__in", ["RUNNING", "STOPPING"]), _negated=True),
                            ("started_at__isnull", False),
                            _connector="OR",
                        ),
                        name="job_running_has_started_at",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("state", "STOPPING"), _negated=True),
                            ("stop_at__isnull", False),
                            _connector="OR",
                        ),
                        name="job_stopping_has_stop_at",
                    ),
                ),
            ],
        ),
        migrations.AlterField(
            model_name="jobevent",
            name="type",
            field=models.CharField(
                choices=[
                    ("SUBMITTED", "Submitted"),
                    ("STARTED", "Started"),
                    ("PREEMPTED", "Preempted"),
                    ("SUCCEEDED", "Succeeded"),
                    ("FAILED", "Failed"),
                    ("PRIORITY_CHANGED", "Priority changed"),
                    ("REQUEUED", "Requeued"),
                    ("STOPPED", "Stopped"),
                ],
                max_length=16,
            ),
        ),
        AlterModelInOneStep(
            model_name="jobdefinitionrevision",
            operations=[
                migrations.AddField(
                    model_name="jobdefinitionrevision",
                    name="network",
                    field=models.BooleanField(default=False),
                ),
                migrations.AddField(
                    model_name="jobdefinitionrevision",
                    name="workload_class",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="definition_revisions",
                        to="fleet.workloadclass",
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="quotashare",
            name="default_workload_class",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="default_of_shares",
                to="fleet.workloadclass",
            ),
        ),
    ]
