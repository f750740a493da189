"""Indexes of the policy history by team, by user and by workload class (governance
0012), one migration for what were governance 0013 and 0015 (never released)."""

from django.db import migrations, models

from core.migration_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    # The policy history is a large table: its indexes are built concurrently on
    # PostgreSQL (core.migration_ops), which no transaction may hold.
    atomic = False

    replaces = [
        ("governance", "0013_policychange_membership_indexes"),
        ("governance", "0015_policychange_workload_class_index"),
    ]

    dependencies = [("governance", "0012_membership_and_class_policy")]

    operations = [
        AddIndexConcurrently(
            model_name="policychange",
            index=models.Index(fields=["team", "-created_at"], name="policychange_team_idx"),
        ),
        AddIndexConcurrently(
            model_name="policychange",
            index=models.Index(fields=["subject", "-created_at"], name="policychange_subject_idx"),
        ),
        AddIndexConcurrently(
            model_name="policychange",
            index=models.Index(
                fields=["workload_class", "-created_at"], name="policychange_class_idx"
            ),
        ),
    ]
