"""The fleet's models, moved from the governance and scheduler apps without moving data:
the state takes them over, the tables keep their names (db_table) and rows. The
governance and scheduler migrations that follow drop them from those apps' state.

It depends on nothing above the fleet: where governance's and the scheduler's migrations
created the tables (up to governance 0009 and scheduler 0006) it changes no table; on a
new database, where it runs first, it creates them (fleet.migration_state.AdoptTables).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from fleet.migration_state import AdoptTables


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        AdoptTables(
            state_operations=[
                migrations.CreateModel(
                    name="JobQueue",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100, unique=True)),
                        ("description", models.TextField(blank=True)),
                        (
                            "default_preemption_retries",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Applied to jobs without their own retry bound; empty = unbounded.",
                                null=True,
                            ),
                        ),
                        (
                            "runnable_time_limit",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Seconds a misconfigured job may stay RUNNABLE before it fails; empty = never.",
                                null=True,
                            ),
                        ),
                        (
                            "executor",
                            models.CharField(
                                choices=[
                                    ("simulated", "Simulated (accelerated clock)"),
                                    ("process", "Process (real subprocess)"),
                                ],
                                default="simulated",
                                max_length=16,
                            ),
                        ),
                        ("version", models.PositiveIntegerField(default=1)),
                    ],
                    options={
                        "db_table": "governance_jobqueue",
                        "ordering": ["name"],
                    },
                ),
                migrations.CreateModel(
                    name="InstanceType",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "name",
                            models.CharField(
                                help_text="e.g. ml.g5.xlarge", max_length=64, unique=True
                            ),
                        ),
                        ("gpu_count", models.PositiveSmallIntegerField(default=1)),
                        ("gpu_model", models.CharField(blank=True, max_length=64)),
                    ],
                    options={
                        "db_table": "governance_instancetype",
                        "ordering": ["name"],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("gpu_count__gte", 1)),
                                name="instancetype_gpus_ge_1",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="JobDefinition",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=128, unique=True)),
                        ("description", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField()),
                        ("retired_at", models.DateTimeField(blank=True, null=True)),
                        ("retire_reason", models.TextField(blank=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "retired_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "queues",
                            models.ManyToManyField(
                                help_text="The queues whose jobs may run this definition.",
                                related_name="job_definitions",
                                to="fleet.jobqueue",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "scheduler_jobdefinition",
                        "ordering": ["name"],
                    },
                ),
                migrations.CreateModel(
                    name="JobDefinitionRevision",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("revision", models.PositiveIntegerField()),
                        ("queue_names", models.JSONField(blank=True, default=list)),
                        ("command", models.JSONField(default=list)),
                        ("parameters", models.JSONField(blank=True, default=list)),
                        ("environment", models.JSONField(blank=True, default=dict)),
                        ("instances", models.PositiveIntegerField(default=1)),
                        ("expected_duration", models.PositiveIntegerField(blank=True, null=True)),
                        ("checkpoint_interval", models.PositiveIntegerField(blank=True, null=True)),
                        ("restart_overhead", models.PositiveIntegerField(default=0)),
                        ("stop_grace_seconds", models.PositiveIntegerField(default=10)),
                        (
                            "wall_clock_limit",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="Seconds a run may last; empty = no limit.",
                                null=True,
                            ),
                        ),
                        (
                            "max_address_space_mb",
                            models.PositiveIntegerField(blank=True, null=True),
                        ),
                        ("max_cpu_seconds", models.PositiveIntegerField(blank=True, null=True)),
                        ("reason", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField()),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "definition",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="revisions",
                                to="fleet.jobdefinition",
                            ),
                        ),
                        (
                            "instance_type",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="fleet.instancetype",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "scheduler_jobdefinitionrevision",
                        "ordering": ["definition", "-revision"],
                    },
                ),
                migrations.CreateModel(
                    name="Job",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=200)),
                        ("priority", models.PositiveIntegerField(default=0)),
                        ("instances", models.PositiveIntegerField(default=1)),
                        (
                            "expected_duration",
                            models.PositiveIntegerField(
                                help_text="Compute seconds when never interrupted."
                            ),
                        ),
                        ("checkpoint_interval", models.PositiveIntegerField(blank=True, null=True)),
                        ("restart_overhead", models.PositiveIntegerField(default=0)),
                        ("preemption_retries", models.PositiveIntegerField(blank=True, null=True)),
                        ("protected_until", models.DateTimeField(blank=True, null=True)),
                        (
                            "parameters",
                            models.JSONField(
                                blank=True,
                                default=dict,
                                help_text="The submitter's validated parameter values.",
                            ),
                        ),
                        ("argv", models.JSONField(blank=True, default=list)),
                        ("client_token", models.CharField(blank=True, max_length=64)),
                        ("request_fingerprint", models.CharField(blank=True, max_length=64)),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("RUNNABLE", "Runnable"),
                                    ("RUNNING", "Running"),
                                    ("SUCCEEDED", "Succeeded"),
                                    ("FAILED", "Failed"),
                                ],
                                db_index=True,
                                default="RUNNABLE",
                                max_length=10,
                            ),
                        ),
                        ("reason", models.CharField(blank=True, max_length=64)),
                        ("submitted_at", models.DateTimeField(db_index=True)),
                        ("runnable_since", models.DateTimeField(blank=True, null=True)),
                        ("misconfigured_since", models.DateTimeField(blank=True, null=True)),
                        ("first_started_at", models.DateTimeField(blank=True, null=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("start_seq", models.BigIntegerField(default=0)),
                        ("borrowed", models.BooleanField(default=False)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("attempt", models.PositiveIntegerField(default=0)),
                        ("run_overhead", models.PositiveIntegerField(default=0)),
                        ("heartbeat_at", models.DateTimeField(blank=True, null=True)),
                        ("worker", models.CharField(blank=True, max_length=200)),
                        ("lease_token", models.CharField(blank=True, max_length=64)),
                        ("lease_expires_at", models.DateTimeField(blank=True, null=True)),
                        ("exit_code", models.IntegerField(blank=True, null=True)),
                        (
                            "progress",
                            models.PositiveIntegerField(
                                default=0, help_text="Compute seconds done."
                            ),
                        ),
                        ("checkpointed", models.PositiveIntegerField(default=0)),
                        ("preemptions", models.PositiveIntegerField(default=0)),
                        ("requeues", models.PositiveIntegerField(default=0)),
                        ("lost_work", models.PositiveIntegerField(default=0)),
                        ("restart_overhead_spent", models.PositiveIntegerField(default=0)),
                        ("waiting_time", models.PositiveIntegerField(default=0)),
                        ("ran_borrowed", models.BooleanField(default=False)),
                        (
                            "instance_type",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="fleet.instancetype",
                            ),
                        ),
                        (
                            "resubmitted_from",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="resubmissions",
                                to="fleet.job",
                            ),
                        ),
                        (
                            "submitted_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "definition_revision",
                            models.ForeignKey(
                                blank=True,
                                help_text="The registered definition (and revision) the job runs.",
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="jobs",
                                to="fleet.jobdefinitionrevision",
                            ),
                        ),
                        (
                            "queue",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="jobs",
                                to="fleet.jobqueue",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "scheduler_job",
                        "ordering": ["-submitted_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="JobEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("at", models.DateTimeField(db_index=True)),
                        (
                            "type",
                            models.CharField(
                                choices=[
                                    ("SUBMITTED", "Submitted"),
                                    ("STARTED", "Started"),
                                    ("PREEMPTED", "Preempted"),
                                    ("SUCCEEDED", "Succeeded"),
                                    ("FAILED", "Failed"),
                                    ("PRIORITY_CHANGED", "Priority changed"),
                                    ("REQUEUED", "Requeued"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("cause", models.CharField(blank=True, max_length=32)),
                        ("borrowed", models.BooleanField(default=False)),
                        ("attempt", models.PositiveIntegerField(default=0)),
                        ("detail", models.JSONField(blank=True, default=dict)),
                        (
                            "actor",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="fleet.job",
                            ),
                        ),
                        (
                            "job",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="events",
                                to="fleet.job",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "scheduler_jobevent",
                        "ordering": ["at", "id"],
                    },
                ),
                migrations.CreateModel(
                    name="QueueCapacity",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("instances", models.PositiveIntegerField()),
                        (
                            "instance_type",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="fleet.instancetype",
                            ),
                        ),
                        (
                            "queue",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="capacities",
                                to="fleet.jobqueue",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "governance_queuecapacity",
                        "ordering": ["instance_type__name"],
                    },
                ),
                migrations.CreateModel(
                    name="QuotaShare",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        (
                            "strategy",
                            models.CharField(
                                choices=[
                                    ("RESERVE", "RESERVE"),
                                    ("LEND", "LEND"),
                                    ("LEND_AND_BORROW", "LEND_AND_BORROW"),
                                ],
                                default="LEND",
                                max_length=16,
                            ),
                        ),
                        (
                            "borrow_limit",
                            models.IntegerField(
                                blank=True,
                                help_text="Percent of the share's own limit it may borrow on top; -1 = unlimited. Only with LEND_AND_BORROW.",
                                null=True,
                            ),
                        ),
                        ("in_share_preemption", models.BooleanField(default=False)),
                        (
                            "state",
                            models.CharField(
                                choices=[("ENABLED", "Enabled"), ("DISABLED", "Disabled")],
                                default="ENABLED",
                                max_length=8,
                            ),
                        ),
                        (
                            "priority_ceiling",
                            models.PositiveIntegerField(
                                default=100,
                                help_text="The highest job priority a team lead may give without an active priority-raise exception or an urgency that names the team (0–9999).",
                            ),
                        ),
                        ("position", models.PositiveIntegerField(default=0)),
                        ("version", models.PositiveIntegerField(default=1)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "queue",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="shares",
                                to="fleet.jobqueue",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "governance_quotashare",
                        "ordering": ["queue_id", "position", "id"],
                    },
                ),
                migrations.AddField(
                    model_name="job",
                    name="share",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="jobs",
                        to="fleet.quotashare",
                    ),
                ),
                migrations.CreateModel(
                    name="CapacityLimit",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("max_instances", models.PositiveIntegerField()),
                        (
                            "instance_type",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="fleet.instancetype",
                            ),
                        ),
                        (
                            "share",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="limits",
                                to="fleet.quotashare",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "governance_capacitylimit",
                        "ordering": ["instance_type__name"],
                    },
                ),
                migrations.CreateModel(
                    name="Team",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100, unique=True)),
                        ("description", models.TextField(blank=True)),
                        (
                            "leads",
                            models.ManyToManyField(
                                blank=True, related_name="led_teams", to=settings.AUTH_USER_MODEL
                            ),
                        ),
                        (
                            "members",
                            models.ManyToManyField(
                                blank=True, related_name="teams", to=settings.AUTH_USER_MODEL
                            ),
                        ),
                    ],
                    options={
                        "db_table": "governance_team",
                        "ordering": ["name"],
                    },
                ),
                migrations.AddField(
                    model_name="quotashare",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="shares",
                        to="fleet.team",
                    ),
                ),
                migrations.CreateModel(
                    name="UrgencyDefinition",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100, unique=True)),
                        (
                            "meaning",
                            models.TextField(help_text="What this urgency means, in plain words."),
                        ),
                        (
                            "examples",
                            models.TextField(blank=True, help_text="Situations that qualify."),
                        ),
                        (
                            "priority",
                            models.PositiveIntegerField(
                                help_text="The job priority it grants (0–9999)."
                            ),
                        ),
                        (
                            "max_window_hours",
                            models.PositiveIntegerField(
                                help_text="The longest exception window it allows, in hours."
                            ),
                        ),
                        (
                            "allowed_kinds",
                            models.JSONField(
                                blank=True,
                                default=list,
                                help_text="Exception kinds it may be used for.",
                            ),
                        ),
                        ("version", models.PositiveIntegerField(default=1)),
                        (
                            "invokers",
                            models.ManyToManyField(
                                blank=True,
                                help_text="Teams that may invoke it; none selected = every team.",
                                related_name="urgencies",
                                to="fleet.team",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "governance_urgencydefinition",
                        "ordering": ["-priority", "name"],
                    },
                ),
                migrations.AddField(
                    model_name="job",
                    name="urgency",
                    field=models.ForeignKey(
                        blank=True,
                        help_text="The urgency definition that granted the job's priority, if any.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="jobs",
                        to="fleet.urgencydefinition",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="jobdefinitionrevision",
                    constraint=models.UniqueConstraint(
                        fields=("definition", "revision"), name="jobdefrevision_unique_revision"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="jobdefinitionrevision",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("revision__gte", 1)),
                        name="jobdefrevision_revision_ge_1",
                    ),
                ),
                migrations.AddIndex(
                    model_name="jobevent",
                    index=models.Index(fields=["job", "at"], name="jobevent_job_at_idx"),
                ),
                migrations.AddConstraint(
                    model_name="queuecapacity",
                    constraint=models.UniqueConstraint(
                        fields=("queue", "instance_type"), name="queuecapacity_unique"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="queuecapacity",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("instances__gte", 1)), name="queuecapacity_ge_1"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="capacitylimit",
                    constraint=models.UniqueConstraint(
                        fields=("share", "instance_type"), name="capacitylimit_unique"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="capacitylimit",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("max_instances__gte", 1)), name="capacitylimit_ge_1"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="quotashare",
                    constraint=models.UniqueConstraint(
                        fields=("queue", "name"), name="quotashare_unique_name"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="quotashare",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("priority_ceiling__lte", 9999)),
                        name="quotashare_priority_ceiling_le_9999",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="quotashare",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("strategy", "LEND_AND_BORROW"), ("borrow_limit__gte", -1)),
                            models.Q(
                                models.Q(("strategy", "LEND_AND_BORROW"), _negated=True),
                                ("borrow_limit__isnull", True),
                            ),
                            _connector="OR",
                        ),
                        name="quotashare_borrow_limit_only_lend_and_borrow",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="urgencydefinition",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("priority__lte", 9999)), name="urgency_priority_le_9999"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="urgencydefinition",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("max_window_hours__gte", 1)), name="urgency_window_ge_1"
                    ),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(
                        fields=["queue", "state"], name="scheduler_j_queue_i_eded2c_idx"
                    ),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(fields=["share", "state"], name="job_share_state_idx"),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(
                        fields=["share", "-submitted_at", "-id"], name="job_share_newest_idx"
                    ),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(
                        condition=models.Q(
                            ("misconfigured_since__isnull", True), ("state", "RUNNABLE")
                        ),
                        fields=["queue", "share", "-priority", "submitted_at", "id"],
                        name="job_dispatch_order_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(
                        condition=models.Q(
                            ("state", "RUNNABLE"),
                            models.Q(
                                (
                                    "reason__in",
                                    [
                                        "BLOCKED_BEHIND_HEAD",
                                        "SERVICE_ENVIRONMENT_MAX_RESOURCE",
                                        "QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
                                        "BORROWABLE_CAPACITY_EXCEEDED",
                                    ],
                                ),
                                _negated=True,
                            ),
                        ),
                        fields=["queue"],
                        name="job_pass_attention_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(
                        condition=models.Q(
                            ("misconfigured_since__isnull", False), ("state", "RUNNABLE")
                        ),
                        fields=["queue", "misconfigured_since"],
                        name="job_misconfigured_idx",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("instances__gte", 1)), name="job_instances_ge_1"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("priority__lte", 9999)), name="job_priority_le_9999"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("expected_duration__gte", 1)),
                        name="job_expected_duration_ge_1",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("state", "RUNNING"), _negated=True),
                            ("started_at__isnull", False),
                            _connector="OR",
                        ),
                        name="job_running_has_started_at",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("client_token", ""), _negated=True),
                        fields=("submitted_by", "client_token"),
                        name="job_unique_client_token_per_submitter",
                    ),
                ),
            ],
        ),
    ]
