"""Full-text search of knowledge articles: a GIN expression index on PostgreSQL, an
FTS5 table kept in step by triggers on SQLite (see governance.knowledge.search)."""

from django.db import migrations

from fleet.migration_state import BeforeTheMove
from governance.knowledge.search import create_search_structures, drop_search_structures


class Migration(BeforeTheMove):
    dependencies = [
        ("governance", "0003_exceptions_and_knowledge"),
    ]

    operations = [
        migrations.RunPython(create_search_structures, drop_search_structures, elidable=False),
    ]
