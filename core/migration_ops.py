"""Migration operations of our own.

AddIndexConcurrently: an index on a large table (tests/core/test_migrations_policy.py
says which) is built with CREATE INDEX CONCURRENTLY on PostgreSQL, which lets writes
go on while it builds; a plain CREATE INDEX holds a SHARE lock on the table the whole
time, and every insert and update of it waits (a running job's heartbeat included).
It cannot run in a transaction, so the migration holding it says `atomic = False`,
and holds nothing else that needs one. Django's own operation refuses any other
database; this one builds a plain index there (SQLite: the demo and the tests), where
no other writer waits on it. The migration state is AddIndex's, so swapping one for the
other changes nothing `makemigrations` sees.
"""

from __future__ import annotations

from django.contrib.postgres import operations as postgres
from django.db.migrations import AddIndex


class AddIndexConcurrently(postgres.AddIndexConcurrently):
    def describe(self):
        return f"Create index {self.index.name} of {self.model_name} (concurrently on PostgreSQL)"

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)
