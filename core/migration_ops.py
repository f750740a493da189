"""Migration operations of our own.

AlterModelInOneStep: several of Django's own AddField, AlterField, AddConstraint and
RemoveConstraint operations on one model, applied as one. A fresh `migrate` spends its
time in the migration state, not in the database: each operation re-renders its model
and every model related to it (scheduler_job's relations reach most of the project,
some 35 ms an operation), and on SQLite each NOT NULL column and each constraint
rebuilds the table. Here the state re-renders once, and SQLite rebuilds the table at
most once (the columns are added with their defaults, which rewrites nothing, then the
table is made again as the final state defines it: no default kept, its constraints and
references; with only nullable columns to add, Django's own ALTER TABLE ADD COLUMN).
PostgreSQL runs the operations themselves, in order. The end state and schema are those
of the operations run one by one (tests/core/test_migration_ops.py).

AddIndexConcurrently: an index on a large table (tests/core/test_migrations_policy.py
says which) is built with CREATE INDEX CONCURRENTLY on PostgreSQL, which lets writes
go on while it builds; a plain CREATE INDEX holds a SHARE lock on the table the whole
time, and every insert and update of it waits (a running job's heartbeat included).
It cannot run in a transaction, so the migration holding it says `atomic = False`,
and holds nothing else that needs one. Django's own operation refuses any other
database; this one builds a plain index there (SQLite: the demo and the tests), where
no other writer waits on it. The migration state is AddIndex's, so swapping one for the
other changes nothing `makemigrations` sees.

TrigramExtension: Django's own creates pg_trgm on PostgreSQL and does nothing elsewhere,
but its reverse asks `pg_extension` on any database, so migrating back past it on SQLite
failed (the README's default `make test`: tests/fleet/test_models_moved.py). This one
drops the extension on PostgreSQL only; its state is Django's (none).
"""

from __future__ import annotations

from django.contrib.postgres import operations as postgres
from django.db.migrations import AddConstraint, AddField, AddIndex, AlterField, RemoveConstraint
from django.db.migrations.operations.base import Operation
from django.db.migrations.utils import field_is_referenced


class AlterModelInOneStep(Operation):
    FOLDABLE = (AddField, AlterField, AddConstraint, RemoveConstraint)

    def __init__(self, model_name, operations):
        for operation in operations:
            if not isinstance(operation, self.FOLDABLE) or operation.model_name != model_name:
                raise ValueError(
                    f"AlterModelInOneStep({model_name!r}) folds AddField, AlterField, "
                    f"AddConstraint and RemoveConstraint of {model_name}: not "
                    f"{operation.describe()}"
                )
            if isinstance(operation, AddField | AlterField) and not operation.preserve_default:
                raise ValueError(
                    f"AlterModelInOneStep({model_name!r}): {operation.describe()} has a "
                    "one-off default (preserve_default=False): give it its own operation"
                )
        fields = [op.name for op in operations if isinstance(op, AddField | AlterField)]
        if len(fields) != len(set(fields)):
            raise ValueError(
                f"AlterModelInOneStep({model_name!r}) adds or alters each field once: "
                f"{', '.join(sorted(name for name in set(fields) if fields.count(name) > 1))}"
            )
        self.model_name = model_name
        self.operations = operations

    @property
    def model_name_lower(self):
        return self.model_name.lower()

    def deconstruct(self):
        return (
            self.__class__.__qualname__,
            [],
            {"model_name": self.model_name, "operations": self.operations},
        )

    def describe(self):
        return f"Alter {self.model_name} in one step: " + "; ".join(
            operation.describe() for operation in self.operations
        )

    def state_forwards(self, app_label, state):
        # Each operation would re-render the models (only when they are rendered: a
        # state's `apps`); put them aside meanwhile, then re-render once.
        rendered = state.__dict__.pop("apps", None)
        try:
            for operation in self.operations:
                operation.state_forwards(app_label, state)
        finally:
            if rendered is not None:
                state.apps = rendered
        # As Django's own operations do: relations (and fields that relations point
        # at) re-render every model they reach, other changes the model's neighbours.
        key = (app_label, self.model_name_lower)
        delay = not any(
            isinstance(operation, AddField | AlterField)
            and (
                operation.field.is_relation
                or field_is_referenced(state, key, (operation.name, operation.field))
            )
            for operation in self.operations
        )
        state.reload_model(*key, delay=delay)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "sqlite":
            for operation in self.operations:
                operation.database_forwards(app_label, schema_editor, from_state, to_state)
            return
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        self._refuse_column_changes(app_label, schema_editor, from_state, to_state)
        if not self._rebuilds_on_sqlite(schema_editor):
            # Columns ALTER TABLE ADD COLUMN adds as they stay: Django's own operations,
            # which keep the columns in place (a rebuild would move a foreign key to
            # the table itself last).
            for operation in self.operations:
                operation.database_forwards(app_label, schema_editor, from_state, to_state)
            return
        table = schema_editor.quote_name(model._meta.db_table)
        for operation in self.operations:
            if isinstance(operation, AddField):
                field = model._meta.get_field(operation.name)
                definition, params = schema_editor.column_sql(model, field, include_default=True)
                schema_editor.execute(
                    f"ALTER TABLE {table} ADD COLUMN "
                    f"{schema_editor.quote_name(field.column)} {definition}",
                    params,
                )
        schema_editor._remake_table(model)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "sqlite":
            for operation in reversed(self.operations):
                operation.database_backwards(app_label, schema_editor, from_state, to_state)
            return
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            self._refuse_column_changes(app_label, schema_editor, to_state, from_state)
            # The earlier model's columns are all in the table: made again without the
            # added ones, with the earlier constraints. (Django's own operations would
            # each rebuild it from the later model, and a foreign key's rebuild expects
            # the others' columns still there.)
            schema_editor._remake_table(model)

    def _rebuilds_on_sqlite(self, schema_editor) -> bool:
        """Whether SQLite would rebuild the table for one of the operations: a
        constraint, or a column ALTER TABLE ADD COLUMN cannot add as it stays (NOT NULL,
        a default, unique)."""
        return any(
            isinstance(operation, AddConstraint | RemoveConstraint)
            or (
                isinstance(operation, AddField)
                and not (
                    operation.field.null
                    and not operation.field.unique
                    and not operation.field.primary_key
                    and not operation.field.has_db_default()
                    and schema_editor.effective_default(operation.field) is None
                )
            )
            for operation in self.operations
        )

    def _refuse_column_changes(self, app_label, schema_editor, before, after):
        """SQLite rebuilds a table to alter a column, from a model without the columns
        added beside it, and the rebuild here copies columns as they are: an AlterField
        that changes one (type, NULL, name) needs an operation of its own."""
        old = before.apps.get_model(app_label, self.model_name)
        new = after.apps.get_model(app_label, self.model_name)
        for operation in self.operations:
            if isinstance(operation, AlterField) and schema_editor._field_should_be_altered(
                old._meta.get_field(operation.name), new._meta.get_field(operation.name)
            ):
                raise NotImplementedError(
                    f"AlterModelInOneStep({self.model_name!r}): {operation.describe()} "
                    "changes its column: give it its own operation"
                )


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


class TrigramExtension(postgres.TrigramExtension):
    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
