from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0008_jobevent_preempted_index"),
    ]

    operations = [
        # Nullable, no default: an ALTER TABLE ADD COLUMN on both databases, no rebuild.
        migrations.AddField(
            model_name="jobqueue",
            name="slurm_nodes",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
