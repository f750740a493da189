"""What-if comparisons carry interruption contracts to replay under (issue 24: compare
contracts, lost GPU-hours against lender wait and time to reclaim)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    # Was governance 0016 (never released): renumbered after 0012-0015 were folded.
    replaces = [("governance", "0016_reclaim_evidence")]

    dependencies = [("governance", "0013_policychange_indexes")]

    operations = [
        migrations.AddField(
            model_name="whatifcomparison",
            name="contracts",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
