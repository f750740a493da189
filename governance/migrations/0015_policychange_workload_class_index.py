from django.db import migrations, models

from core.migration_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    # The policy history is a large table: its indexes are built concurrently on
    # PostgreSQL (core.migration_ops), which no transaction may hold.
    atomic = False

    dependencies = [("governance", "0014_workload_class_policy")]

    operations = [
        AddIndexConcurrently(
            model_name="policychange",
            index=models.Index(
                fields=["workload_class", "-created_at"], name="policychange_class_idx"
            ),
        ),
    ]
