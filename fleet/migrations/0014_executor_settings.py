"""An executor's settings move from its own columns into validated JSON on the queue and
the instance type (`executor_settings`, keyed by executor name, checked by the
executor's binding schema), so an executor needs no column of its own; what an executor
last saw of a queue's capacity keeps its data under a name of no executor
(`capacity_seen`). Reversible: the values go back to the columns."""

from django.db import migrations, models

# The one executor that had columns, and its keys in the settings.
EXECUTOR = "slurm"
QUEUE_COLUMNS = {"slurm_conf": "conf", "slurm_partition": "partition", "slurm_account": "account"}
TYPE_COLUMNS = {"slurm_resources": "resources"}


def _forward(model, columns):
    for row in model.objects.all():
        values = {key: getattr(row, column) for column, key in columns.items()}
        if any(values.values()):
            row.executor_settings = {**(row.executor_settings or {}), EXECUTOR: values}
            row.save(update_fields=["executor_settings"])


def _backward(model, columns, empty):
    for row in model.objects.all():
        values = (row.executor_settings or {}).get(EXECUTOR) or {}
        for column, key in columns.items():
            setattr(row, column, values.get(key, empty[column]))
        row.save(update_fields=list(columns))


def settings_from_columns(apps, schema_editor):
    _forward(apps.get_model("fleet", "JobQueue"), QUEUE_COLUMNS)
    _forward(apps.get_model("fleet", "InstanceType"), TYPE_COLUMNS)


def columns_from_settings(apps, schema_editor):
    _backward(apps.get_model("fleet", "JobQueue"), QUEUE_COLUMNS, dict.fromkeys(QUEUE_COLUMNS, ""))
    _backward(apps.get_model("fleet", "InstanceType"), TYPE_COLUMNS, {"slurm_resources": []})


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0013_bounded_text"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobqueue",
            name="executor_settings",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="instancetype",
            name="executor_settings",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(settings_from_columns, columns_from_settings),
        migrations.RemoveField(model_name="jobqueue", name="slurm_conf"),
        migrations.RemoveField(model_name="jobqueue", name="slurm_partition"),
        migrations.RemoveField(model_name="jobqueue", name="slurm_account"),
        migrations.RemoveField(model_name="instancetype", name="slurm_resources"),
        migrations.RenameField(
            model_name="jobqueue", old_name="slurm_nodes", new_name="capacity_seen"
        ),
    ]
