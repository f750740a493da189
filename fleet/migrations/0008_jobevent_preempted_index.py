from django.db import migrations, models

from core.migration_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    # scheduler_jobevent is a large table: the index is built concurrently on PostgreSQL
    # (core.migration_ops), which no transaction may hold.
    atomic = False

    dependencies = [
        ("fleet", "0007_slurm_binding"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="jobevent",
            index=models.Index(
                condition=models.Q(("type", "PREEMPTED")),
                fields=["job", "by", "cause"],
                name="jobevent_preempted_idx",
            ),
        ),
    ]
