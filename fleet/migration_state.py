"""The operations the migrations that moved the fleet's models use (fleet/migrations/0001,
governance/migrations/0010-0011, scheduler/migrations/0007), and how the fleet's first
migration takes the tables (AdoptTables) without depending on the apps above the fleet.

They change only Django's record of the models (the tables stay as they are). Django
re-renders a model and all that relate to it after each change of a relation, and these
migrations change dozens of relations of the most related models: on a new database
that alone took seconds of every `migrate`. This operation drops the rendered models
before its changes, so they are rendered once, when next needed, instead of once per
change. What the changes are, and the database (untouched), are exactly those of
SeparateDatabaseAndState.

The fleet's migrations depend on nothing above the fleet (tests/fleet/
test_migration_graph.py), so on a new database they run before governance's and the
scheduler's: AdoptTables creates the tables there, and the older migrations of those
apps (BeforeTheMove) then leave the moved models' tables alone.
"""

from contextlib import contextmanager

from django.db import migrations
from django.db.migrations.operations.models import ModelOperation
from django.db.migrations.recorder import MigrationRecorder


class ModelStateOnly(migrations.SeparateDatabaseAndState):
    def __init__(self, state_operations):
        super().__init__(database_operations=[], state_operations=state_operations)

    def deconstruct(self):
        return self.__class__.__qualname__, [], {"state_operations": self.state_operations}

    def state_forwards(self, app_label, state):
        # ProjectState.apps is a cached property: without it, each change below only
        # edits the model states, and the next reader renders them all once.
        state.__dict__.pop("apps", None)
        super().state_forwards(app_label, state)


# The move, by the app whose migrations created the tables: its last migration before the
# move, and the models (lower-case names) the fleet took over.
MOVED_FROM = {
    "governance": (
        "0009_monthlyrollup_version",
        {
            "team",
            "instancetype",
            "jobqueue",
            "queuecapacity",
            "quotashare",
            "capacitylimit",
            "urgencydefinition",
        },
    ),
    "scheduler": (
        "0006_job_share_newest",
        {"job", "jobevent", "jobdefinition", "jobdefinitionrevision"},
    ),
}
THE_MOVE = ("fleet", "0001_models_from_governance_and_scheduler")


class MoveRefused(RuntimeError):
    """A database the move cannot take: its tables are halfway through the history of
    the app that created them."""


class AdoptTables(ModelStateOnly):
    """The fleet's first migration: it takes the moved models into the fleet's state, and
    their tables from whoever has them. The fleet's migrations depend on nothing above the
    fleet, so on a new database they run first: the tables are not there, and it creates
    them as they were at the move (the governance and scheduler migrations from before the
    move then change only their state: BeforeTheMove). On a database whose governance and
    scheduler migrations created them, it changes no table; it refuses one whose tables
    are there but not yet as they were at the move (migrate governance to 0009 and
    scheduler to 0006 first). Undone, it drops the tables only where no migration of the
    app they came from is applied (a new database, migrated back to nothing)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        applied = MigrationRecorder(schema_editor.connection).applied_migrations()
        tables = set(schema_editor.connection.introspection.table_names())
        absent, unfinished = [], []
        for origin, (last, names) in MOVED_FROM.items():
            models = [to_state.apps.get_model(app_label, name) for name in sorted(names)]
            present = [model for model in models if model._meta.db_table in tables]
            if not present:
                absent += models
            elif len(present) < len(models) or (origin, last) not in applied:
                unfinished.append(f"manage.py migrate {origin} {last}")
        if unfinished:
            raise MoveRefused(
                "the tables the fleet takes over are not yet as they were at the move: run "
                f"{' and '.join(unfinished)} first"
            )
        for model in absent:
            schema_editor.create_model(model)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        applied = MigrationRecorder(schema_editor.connection).applied_migrations()
        for origin, (_, names) in MOVED_FROM.items():
            if any(app == origin for app, _ in applied):
                continue
            for name in sorted(names):
                schema_editor.delete_model(from_state.apps.get_model(app_label, name))


def _model_of(operation) -> str | None:
    if hasattr(operation, "model_name"):
        return operation.model_name.lower()
    if isinstance(operation, ModelOperation):
        return operation.name_lower
    return None


class BeforeTheMove(migrations.Migration):
    """A governance or scheduler migration from before the move. Its operations on the
    moved models change their tables only while the tables are its app's: once the fleet's
    first migration is applied (on a new database it runs first and creates the tables as
    they were at the move: AdoptTables), they change only the state."""

    def apply(self, project_state, schema_editor, collect_sql=False):
        with self._tables_of_the_fleet_kept(schema_editor.connection, collect_sql):
            return super().apply(project_state, schema_editor, collect_sql)

    def unapply(self, project_state, schema_editor, collect_sql=False):
        with self._tables_of_the_fleet_kept(schema_editor.connection, collect_sql):
            return super().unapply(project_state, schema_editor, collect_sql)

    @contextmanager
    def _tables_of_the_fleet_kept(self, connection, collect_sql: bool):
        operations = self.operations
        # `sqlmigrate` (collect_sql) prints the migration as written: what it does where
        # the tables are its app's.
        if not collect_sql and THE_MOVE in MigrationRecorder(connection).applied_migrations():
            moved = MOVED_FROM[self.app_label][1]
            self.operations = [
                migrations.SeparateDatabaseAndState(state_operations=[operation])
                if _model_of(operation) in moved
                else operation
                for operation in operations
            ]
        try:
            yield
        finally:
            self.operations = operations
