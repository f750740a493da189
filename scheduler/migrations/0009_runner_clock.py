"""Runners: one row per incarnation, their clock offset, and their liveness lock."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0008_runner_problems")]

    operations = [
        migrations.AlterModelOptions(name="runner", options={"ordering": ["name", "pid"]}),
        migrations.AlterField(
            model_name="runner", name="name", field=models.CharField(max_length=200)
        ),
        migrations.AddField(
            model_name="runner",
            name="clock_offset_seconds",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="runner",
            name="liveness_locked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="runner",
            name="liveness_free_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name="runner",
            constraint=models.UniqueConstraint(
                fields=("name", "pid"), name="runner_incarnation_unique"
            ),
        ),
    ]
