"""The version of the signals that computed a rollup moves from inside `data` to a column
of its own, so stale months are found by a query and not by reading every row's JSON."""

from django.db import migrations, models

from fleet.migration_state import BeforeTheMove


def version_from_data(apps, schema_editor):
    MonthlyRollup = apps.get_model("governance", "MonthlyRollup")
    rows = []
    for row in MonthlyRollup.objects.only("pk", "data").iterator(chunk_size=500):
        data = row.data if isinstance(row.data, dict) else {}
        # Rows of the first version carried no version at all.
        row.version = data.pop("version", 1)
        row.data = data
        rows.append(row)
        if len(rows) == 500:
            MonthlyRollup.objects.bulk_update(rows, ["version", "data"])
            rows = []
    MonthlyRollup.objects.bulk_update(rows, ["version", "data"])


def version_into_data(apps, schema_editor):
    MonthlyRollup = apps.get_model("governance", "MonthlyRollup")
    rows = []
    for row in MonthlyRollup.objects.only("pk", "data", "version").iterator(chunk_size=500):
        row.data = {**(row.data or {}), "version": row.version}
        rows.append(row)
    MonthlyRollup.objects.bulk_update(rows, ["data"], batch_size=500)


class Migration(BeforeTheMove):
    dependencies = [
        ("governance", "0008_exception_withdrawn"),
    ]

    operations = [
        migrations.AddField(
            model_name="monthlyrollup",
            name="version",
            field=models.PositiveSmallIntegerField(
                default=0,
                help_text="The version of the signals that computed `data`; 0: unknown (stale).",
            ),
        ),
        migrations.RunPython(version_from_data, version_into_data),
    ]
