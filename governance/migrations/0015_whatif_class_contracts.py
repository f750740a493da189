"""What-if comparisons take interruption contracts per workload class too (issue 24
point 4), and keep the class of each replayed job to apply them to."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0014_reclaim_evidence"),
    ]

    operations = [
        migrations.AddField(
            model_name="whatifcomparison",
            name="class_contracts",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="whatifcomparison",
            name="workload_classes",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
