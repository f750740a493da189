from django.db import migrations

import core.search
from core.migration_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    # scheduler_job is a large table: the index is built concurrently on PostgreSQL
    # (core.migration_ops), which no transaction may hold.
    atomic = False

    dependencies = [
        ("fleet", "0010_pg_trgm"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=core.search.UpperTrigramIndex(field="name", name="job_name_search_idx"),
        ),
        # The planner's statistics of UPPER(name) come with the next ANALYZE only; until
        # then it guesses how many jobs a word matches, and a common word's search reads
        # the index where a scan in date order would stop at the first page.
        migrations.RunSQL("ANALYZE scheduler_job", reverse_sql=migrations.RunSQL.noop),
    ]
