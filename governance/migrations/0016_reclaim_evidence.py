"""What-if comparisons carry interruption contracts to replay under (issue 24: compare
contracts, lost GPU-hours against lender wait and time to reclaim)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0015_policychange_workload_class_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="whatifcomparison",
            name="contracts",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
