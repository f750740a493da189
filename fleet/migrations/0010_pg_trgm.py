from django.db import migrations

from core.migration_ops import TrigramExtension


class Migration(migrations.Migration):
    # pg_trgm, for the job name search's trigram index (0011). A trusted extension since
    # PostgreSQL 13: the database's owner may create it. Nothing elsewhere (SQLite),
    # forward or back.
    dependencies = [
        ("fleet", "0009_jobqueue_slurm_nodes"),
    ]

    operations = [
        TrigramExtension(),
    ]
