"""What-if comparisons keep the mapping of their workload's teams to shares (issue 26
point 1): shown and editable before the run, replacing the hand-out in rotation."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0015_whatif_class_contracts"),
    ]

    operations = [
        migrations.AddField(
            model_name="whatifcomparison",
            name="share_mapping",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
