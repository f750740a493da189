"""AlterModelInOneStep leaves the schema and the rows Django's own operations leave, run
one by one, on the database the tests run on (SQLite, or PostgreSQL with DATABASE_URL),
and goes back to the schema it started from."""

from __future__ import annotations

import pytest
from django.db import connection, migrations, models
from django.db.migrations.state import ModelState, ProjectState

from core.migration_ops import AlterModelInOneStep

TABLE = "test_fold_gadget"


def initial_state() -> ProjectState:
    state = ProjectState()
    state.add_model(
        ModelState(
            "fleet",
            "Gadget",
            [
                ("id", models.BigAutoField(primary_key=True)),
                ("name", models.CharField(max_length=20)),
                ("size", models.PositiveIntegerField(default=1)),
            ],
            options={
                "db_table": TABLE,
                "constraints": [
                    models.CheckConstraint(condition=models.Q(size__lte=10), name="gadget_size")
                ],
            },
        )
    )
    return state


def operations():
    return [
        migrations.AddField("gadget", "count", models.PositiveIntegerField(default=0)),
        migrations.AddField("gadget", "note", models.CharField(max_length=10, blank=True)),
        migrations.AddField("gadget", "seen_at", models.DateTimeField(null=True, blank=True)),
        migrations.RemoveConstraint("gadget", "gadget_size"),
        migrations.AddField(
            "gadget",
            "parent",
            models.ForeignKey(
                "fleet.gadget", null=True, on_delete=models.SET_NULL, related_name="+"
            ),
        ),
        migrations.AlterField(
            "gadget",
            "name",
            models.CharField(max_length=20, choices=[("a", "A"), ("b", "B")]),
        ),
        migrations.AddConstraint(
            "gadget", models.CheckConstraint(condition=models.Q(size__lte=20), name="gadget_size")
        ),
        migrations.AddConstraint(
            "gadget",
            models.CheckConstraint(condition=models.Q(count__lte=models.F("size")), name="c"),
        ),
    ]


def schema() -> dict:
    with connection.cursor() as cursor:
        columns = [
            (c.name, c.type_code, c.null_ok, c.default)
            for c in connection.introspection.get_table_description(cursor, TABLE)
        ]
        constraints = connection.introspection.get_constraints(cursor, TABLE)
        found = {"columns": columns, "constraints": constraints}
        if connection.vendor == "sqlite":
            cursor.execute("SELECT type, name, sql FROM sqlite_master WHERE tbl_name = %s", [TABLE])
            found["sqlite_master"] = sorted(cursor.fetchall(), key=str)
    return found


def rows():
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {TABLE} ORDER BY id")
        return cursor.fetchall()


def run(operations, state, *, backwards=False):
    """Each operation in turn (forwards), or back from the state they reach."""
    states = [state]
    for operation in operations:
        states.append(states[-1].clone())
        operation.state_forwards("fleet", states[-1])
    with connection.schema_editor() as editor:
        steps = list(zip(operations, states[:-1], states[1:], strict=True))
        for operation, before, after in reversed(steps) if backwards else steps:
            if backwards:
                operation.database_backwards("fleet", editor, after, before)
            else:
                operation.database_forwards("fleet", editor, before, after)
    return states[-1]


@pytest.fixture
def gadgets():
    state = initial_state()
    with connection.schema_editor() as editor:
        editor.create_model(state.apps.get_model("fleet", "Gadget"))
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {TABLE} (name, size) VALUES ('a', 3), ('b', 5)")
    yield state
    with connection.schema_editor() as editor:
        editor.execute(editor.sql_delete_table % {"table": editor.quote_name(TABLE)})


@pytest.mark.django_db(transaction=True)  # schema changes, as migrate makes them
def test_one_step_leaves_the_schema_and_rows_of_the_operations_one_by_one(gadgets):
    started = schema()
    run(operations(), gadgets)
    one_by_one, one_by_one_rows = schema(), rows()
    run(operations(), gadgets, backwards=True)
    assert schema()["columns"] == started["columns"]

    folded = [AlterModelInOneStep("gadget", operations())]
    state = run(folded, gadgets)
    assert schema() == one_by_one
    assert rows() == one_by_one_rows
    assert [row[3:6] for row in rows()] == [(0, "", None), (0, "", None)]  # the defaults
    assert set(state.models["fleet", "gadget"].fields) == {
        "id", "name", "size", "count", "note", "seen_at", "parent"
    }  # fmt: skip

    run(folded, gadgets, backwards=True)
    back = schema()
    assert back["columns"] == started["columns"]
    assert {n: c["check"] for n, c in back["constraints"].items()} == {
        n: c["check"] for n, c in started["constraints"].items()
    }
    assert rows() == [(1, "a", 3), (2, "b", 5)]


def test_it_folds_only_changes_of_one_model_each_field_once():
    with pytest.raises(ValueError, match="not Delete model gadget"):
        AlterModelInOneStep("gadget", [migrations.DeleteModel("gadget")])
    with pytest.raises(ValueError, match="of gadget: not Add field x to other"):
        AlterModelInOneStep("gadget", [migrations.AddField("other", "x", models.TextField())])
    with pytest.raises(ValueError, match="each field once: x"):
        AlterModelInOneStep(
            "gadget",
            [
                migrations.AddField("gadget", "x", models.TextField(default="")),
                migrations.AlterField("gadget", "x", models.TextField(default="y")),
            ],
        )
