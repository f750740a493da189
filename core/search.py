"""What a substring search of a large table needs to stay fast on PostgreSQL.

`UpperTrigramIndex`: Django's `icontains` compares `UPPER(column) LIKE UPPER('%word%')`
on PostgreSQL, which no B-tree serves; a GIN index of `UPPER(column)` with pg_trgm's
`gin_trgm_ops` does (for words of three characters or more; shorter ones scan). Elsewhere
(SQLite: the demo and the tests) it is a plain index of `UPPER(column)`, so the model
state and every table rebuild stay valid there. Build it on a large table with
core.migration_ops.AddIndexConcurrently, after the pg_trgm extension
(django.contrib.postgres.operations.TrigramExtension).

`ContainsWord`: `column` contains `word`, case-insensitively, as `icontains` compares
it (so the trigram index serves it), with one difference on PostgreSQL: the pattern is
written into the statement as a literal (quoted by psycopg), not bound as a parameter.
The product prepares statements run often (config/settings.py), and PostgreSQL soon plans
a prepared statement once for any pattern: it guessed a few hundred matches for every
word and walked the jobs newest first to find a page of them, reading all 76k when a
word matches three (100 ms against 1). A literal gets its own plan, from the index's
statistics, and a statement of its own that is not prepared.
"""

from __future__ import annotations

from django.db import models
from django.db.backends.ddl_references import Statement, Table
from django.db.models import BooleanField, F, Func
from django.db.models.functions import Upper


class UpperTrigramIndex(models.Index):
    def __init__(self, *, field: str, name: str):
        self.field = field
        super().__init__(Upper(field), name=name)

    def deconstruct(self):
        return "core.search.UpperTrigramIndex", (), {"field": self.field, "name": self.name}

    def create_sql(self, model, schema_editor, using="", **kwargs):
        if schema_editor.connection.vendor != "postgresql":
            return super().create_sql(model, schema_editor, using=using, **kwargs)
        # Written out: Django renders an operator class in an index expression only
        # with django.contrib.postgres installed, which the product does not need.
        quote = schema_editor.quote_name
        return Statement(
            "CREATE INDEX %(concurrently)s%(name)s ON %(table)s USING gin "
            "(UPPER(%(column)s) gin_trgm_ops)",
            concurrently="CONCURRENTLY " if kwargs.get("concurrently") else "",
            name=quote(self.name),
            table=Table(model._meta.db_table, quote),
            column=quote(model._meta.get_field(self.field).column),
        )


class ContainsWord(Func):
    """`column` contains `word` (any case), as a condition for filter() or Q()."""

    conditional = True
    output_field = BooleanField()

    def __init__(self, column: str, word: str):
        super().__init__(F(column))
        self.word = word

    def _pattern(self, connection) -> str:
        return f"%{connection.ops.prep_for_like_query(self.word)}%"

    def as_sql(self, compiler, connection, **extra_context):
        (column,) = self.get_source_expressions()
        column_sql, params = compiler.compile(column)
        return (
            f"UPPER({column_sql}) LIKE UPPER(%s) ESCAPE '\\'",
            (*params, self._pattern(connection)),
        )

    def as_postgresql(self, compiler, connection, **extra_context):
        from psycopg import sql

        (column,) = self.get_source_expressions()
        column_sql, params = compiler.compile(column)
        pattern = sql.Literal(self._pattern(connection)).as_string(connection.connection)
        # The same expression as the index's (UpperTrigramIndex), LIKE's escape "\\";
        # "%" doubled, as the statement is formatted with its parameters.
        return f"UPPER({column_sql}::text) LIKE UPPER({pattern.replace('%', '%%')})", params
