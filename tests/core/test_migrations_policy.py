"""No migration builds a plain index on a large table (issue 23, point 5).

A plain CREATE INDEX holds a SHARE lock on its table while it builds: on scheduler_job
every insert and update waits, running jobs' heartbeats included (18 s of a 30 s lock
stopped every running process job). An index on a large table is built with
core.migration_ops.AddIndexConcurrently (CREATE INDEX CONCURRENTLY on PostgreSQL) in a
migration with `atomic = False`. Declare indexes in the model's Meta.indexes, never
with `db_index=True`, `unique=True` or a ForeignKey's implicit index (give it
`db_index=False` and an index in Meta.indexes): those AddField/AlterField operations
build the index inside the migration's transaction, and nothing can make them
concurrent.

The test walks every migration in order, keeping Django's migration state, and judges
each operation by the table it changes. A table created in the same migration is empty,
so its indexes are fine. The migrations listed in ALREADY_APPLIED ran on deployed
databases before the rule; they are what they are.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.postgres.operations import AddIndexConcurrently as PostgresConcurrently
from django.db import migrations, models
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState

from core.migration_ops import AddIndexConcurrently, AlterModelInOneStep

# Tables that grow with the fleet's work: a row per job, per job event, per decision,
# per policy change, per month and scope.
LARGE_TABLES = {
    "scheduler_job",
    "scheduler_jobevent",
    "scheduler_jobdecision",
    "governance_policychange",
    "governance_monthlyrollup",
}

# (app, migration): why it may keep its plain index. Each ran on every deployed database
# before the rule; a new database runs it on empty tables. What it builds cannot be made
# concurrent in place without changing the migration state (a ForeignKey's own index, a
# unique constraint), or shares a transaction with the columns it adds.
ALREADY_APPLIED = {
    ("scheduler", "0002_live_scheduler"): (
        "foreign-key indexes of the columns it adds to scheduler_job and scheduler_jobevent, and "
        "two indexes next to them"
    ),
    ("scheduler", "0003_job_definitions_leases_runners"): (
        "Job.definition_revision's foreign-key index; the client token's unique constraint"
    ),
    ("governance", "0003_exceptions_and_knowledge"): (
        "PolicyChange.exception_request's foreign-key index"
    ),
}


_PLAIN_CREATE_INDEX = re.compile(r"\bcreate\s+(unique\s+)?index\b(?!\s+concurrently)", re.I)


def _table(state: ProjectState, app_label: str, model_name: str) -> str:
    model = state.models[app_label, model_name.lower()]
    return model.options.get("db_table") or f"{app_label}_{model_name.lower()}"


def _builds_index(field) -> bool:
    return bool(field.db_index or field.unique) and not field.primary_key


def _plain_index(operation, app_label: str, state: ProjectState) -> str | None:
    """What plain index `operation` builds (a short description), or None."""
    if isinstance(operation, PostgresConcurrently):
        return None
    if isinstance(operation, migrations.AddIndex):
        return f"AddIndex {operation.index.name}"
    if isinstance(operation, migrations.AddField) and _builds_index(operation.field):
        return f"AddField {operation.name} (db_index, unique or a ForeignKey's index)"
    if isinstance(operation, migrations.AlterField) and _builds_index(operation.field):
        before = state.models[app_label, operation.model_name_lower].fields[operation.name]
        if not _builds_index(before):
            return f"AlterField {operation.name} (adds db_index or unique)"
    if isinstance(operation, migrations.AddConstraint) and isinstance(
        operation.constraint, models.UniqueConstraint
    ):
        return f"AddConstraint {operation.constraint.name} (a unique index)"
    return None


def _model_name(operation) -> str | None:
    return getattr(operation, "model_name", None)


def _database_operations(operation):
    """The operations that touch the database (a SeparateDatabaseAndState's own, those
    an AlterModelInOneStep folds)."""
    if isinstance(operation, migrations.SeparateDatabaseAndState):
        for inner in operation.database_operations:
            yield from _database_operations(inner)
    elif isinstance(operation, AlterModelInOneStep):
        for inner in operation.operations:
            yield from _database_operations(inner)
    else:
        yield operation


def migration_problems(loader: MigrationLoader) -> list[str]:
    plan = []
    for leaf in sorted(loader.graph.leaf_nodes()):
        plan.extend(node for node in loader.graph.forwards_plan(leaf) if node not in plan)
    state = ProjectState(real_apps=loader.unmigrated_apps)
    problems = []
    for node in plan:
        migration = loader.graph.nodes[node]
        app_label, name = node
        created_here: set[str] = set()
        for operation in migration.operations:
            for db_operation in _database_operations(operation):
                if isinstance(db_operation, migrations.CreateModel):
                    options = db_operation.options
                    created_here.add(
                        options.get("db_table") or f"{app_label}_{db_operation.name_lower}"
                    )
                    continue
                if isinstance(db_operation, PostgresConcurrently) and migration.atomic:
                    problems.append(
                        f"{app_label}.{name}: {db_operation.describe()} needs atomic = False"
                    )
                if isinstance(db_operation, migrations.RunSQL):
                    sql = " ".join(map(str, _flatten(db_operation.sql)))
                    if _PLAIN_CREATE_INDEX.search(sql) and node not in ALREADY_APPLIED:
                        problems.append(
                            f"{app_label}.{name}: RunSQL with a plain CREATE INDEX: "
                            "write CREATE INDEX CONCURRENTLY (atomic = False)"
                        )
                    continue
                model_name = _model_name(db_operation)
                if model_name is None or (app_label, model_name.lower()) not in state.models:
                    continue
                table = _table(state, app_label, model_name)
                if table not in LARGE_TABLES or table in created_here:
                    continue
                plain = _plain_index(db_operation, app_label, state)
                if plain and node not in ALREADY_APPLIED:
                    problems.append(
                        f"{app_label}.{name}: {plain} on the large table {table}: use "
                        "core.migration_ops.AddIndexConcurrently in a migration with "
                        "atomic = False (an index in Meta.indexes, not db_index/unique)"
                    )
            operation.state_forwards(app_label, state)
    return problems


def _flatten(sql):
    if isinstance(sql, list | tuple):
        for part in sql:
            yield from _flatten(part[0] if isinstance(part, list | tuple) else part)
    else:
        yield sql


@pytest.fixture(scope="module")
def loader():
    return MigrationLoader(None, ignore_no_migrations=True)


def test_no_migration_builds_a_plain_index_on_a_large_table(loader):
    assert migration_problems(loader) == []


def test_the_exemptions_name_migrations_that_exist(loader):
    assert set(ALREADY_APPLIED) <= set(loader.graph.nodes)


def test_the_large_tables_are_tables_of_the_models():
    from django.apps import apps

    tables = {model._meta.db_table for model in apps.get_models()}
    assert tables >= LARGE_TABLES


def _with_migration(loader, app_label, name, operations, *, atomic=True):
    """The loader with one more migration of `app_label` after its last."""
    leaf = max(node for node in loader.graph.leaf_nodes() if node[0] == app_label)
    attributes = {"dependencies": [leaf], "operations": operations, "atomic": atomic}
    migration = type("Migration", (migrations.Migration,), attributes)(name, app_label)
    loader.graph.add_node((app_label, name), migration)
    loader.graph.add_dependency(migration, (app_label, name), leaf)
    return loader


PLAIN_INDEXES = [
    (
        migrations.AddIndex(
            model_name="job", index=models.Index(fields=["name"], name="job_name_idx")
        ),
        "fleet.0099_new: AddIndex job_name_idx on the large table scheduler_job",
    ),
    (
        migrations.AddField(
            model_name="jobevent",
            name="note",
            field=models.CharField(max_length=20, default="", db_index=True),
        ),
        "fleet.0099_new: AddField note (db_index, unique or a ForeignKey's index) on the "
        "large table scheduler_jobevent",
    ),
    (
        migrations.AlterField(
            model_name="job", name="name", field=models.CharField(max_length=200, unique=True)
        ),
        "fleet.0099_new: AlterField name (adds db_index or unique) on the large table "
        "scheduler_job",
    ),
    (
        migrations.AddConstraint(
            model_name="job",
            constraint=models.UniqueConstraint(fields=["name"], name="job_name_unique"),
        ),
        "fleet.0099_new: AddConstraint job_name_unique (a unique index) on the large "
        "table scheduler_job",
    ),
]
PLAIN_INDEX_IDS = ["AddIndex", "AddField db_index", "AlterField unique", "UniqueConstraint"]


@pytest.mark.parametrize(("operation", "found"), PLAIN_INDEXES, ids=PLAIN_INDEX_IDS)
def test_a_new_plain_index_on_a_large_table_is_named_with_its_migration(operation, found):
    loader = _with_migration(MigrationLoader(None), "fleet", "0099_new", [operation])
    problems = [p for p in migration_problems(loader) if p.startswith("fleet.0099_new")]
    assert len(problems) == 1 and problems[0].startswith(found), problems


@pytest.mark.parametrize(("operation", "found"), PLAIN_INDEXES[1:], ids=PLAIN_INDEX_IDS[1:])
def test_a_plain_index_folded_in_one_step_is_named_too(operation, found):
    folded = AlterModelInOneStep(model_name=operation.model_name, operations=[operation])
    loader = _with_migration(MigrationLoader(None), "fleet", "0099_new", [folded])
    problems = [p for p in migration_problems(loader) if p.startswith("fleet.0099_new")]
    assert len(problems) == 1 and problems[0].startswith(found), problems


def test_a_concurrent_index_passes_in_a_non_atomic_migration_only():
    index = models.Index(fields=["name"], name="job_name_idx")

    def problems(atomic):
        operation = AddIndexConcurrently(model_name="job", index=index)
        loader = _with_migration(
            MigrationLoader(None), "fleet", "0099_new", [operation], atomic=atomic
        )
        return migration_problems(loader)

    assert problems(False) == []
    assert problems(True) == [
        "fleet.0099_new: "
        + AddIndexConcurrently(model_name="job", index=index).describe()
        + " needs atomic = False"
    ]


def test_a_plain_index_on_a_small_table_passes():
    small = migrations.AddIndex(
        model_name="runner", index=models.Index(fields=["host"], name="runner_host_idx")
    )
    assert (
        migration_problems(
            _with_migration(MigrationLoader(None), "scheduler", "0099_small", [small])
        )
        == []
    )


@pytest.mark.django_db(transaction=True)  # sqlmigrate, like migrate, outside a transaction
def test_the_converted_index_is_built_concurrently_on_postgresql_and_plainly_elsewhere():
    import io

    from django.core.management import call_command
    from django.db import connection

    out = io.StringIO()
    call_command("sqlmigrate", "scheduler", "0006_job_share_newest", stdout=out)
    sql = out.getvalue()
    if connection.vendor == "postgresql":
        assert 'CREATE INDEX CONCURRENTLY "job_share_newest_idx"' in sql
    else:
        assert 'CREATE INDEX "job_share_newest_idx"' in sql
    assert "BEGIN" not in sql  # the migration is not atomic
