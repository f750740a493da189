"""The one full-text search backend of the knowledge base, chosen by the database.

- PostgreSQL: `to_tsvector('english', ...)` of the title (weight A) and the plain-text
  body (weight B), indexed by a GIN expression index (migration 0004), queried with
  `websearch_to_tsquery`, ranked by `ts_rank`, quoted by `ts_headline`.
- SQLite: an external-content FTS5 table (`governance_article_fts`, porter stemming)
  kept in step by triggers (migration 0004), queried with the same web-search syntax
  translated to FTS5, ranked by `bm25` with the title weighted like PostgreSQL's A,
  quoted by `snippet`.

Both return `Match(article_id, rank, snippet)` with the best match first and
`snippet` plain text in which the matched words sit between MARK_START and
MARK_END; governance.knowledge.selectors escapes it and turns those into <mark>.
The query syntax is the same on both: words (all must match), "quoted phrases",
`or` between alternatives, and `-word` to exclude.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.postgres.search import (
    SearchHeadline,
    SearchQuery,
    SearchRank,
    SearchVector,
)
from django.db import connection

# Private-use characters: they never occur in articles, so they cannot be forged.
MARK_START = "\ue000"
MARK_END = "\ue001"
CONFIG = "english"
FTS_TABLE = "governance_article_fts"
GIN_INDEX = "knowledge_article_search_gin"
SNIPPET_WORDS = 24
# bm25 weights of the FTS5 columns (title, body_text): a title match counts like
# PostgreSQL's weight A against B.
TITLE_WEIGHT = 2.5


@dataclass(frozen=True)
class Match:
    article_id: int
    rank: float
    snippet: str


def search_vector() -> SearchVector:
    """The indexed expression; the GIN index and the query must spell it identically."""
    return SearchVector("title", weight="A", config=CONFIG) + SearchVector(
        "body_text", weight="B", config=CONFIG
    )


def matches(text: str, *, article_ids: Iterable[int] | None = None) -> list[Match]:
    """Articles matching `text` (web-search syntax), best first; ties by id."""
    if connection.vendor == "postgresql":
        return _postgres(text, article_ids)
    return _sqlite(text, article_ids)


def _postgres(text: str, article_ids) -> list[Match]:
    from governance.models import KnowledgeArticle

    query = SearchQuery(text, search_type="websearch", config=CONFIG)
    rows = (
        KnowledgeArticle.objects.annotate(search=search_vector())
        .filter(search=query)
        .annotate(
            rank=SearchRank(search_vector(), query),
            snippet=SearchHeadline(
                "body_text",
                query,
                config=CONFIG,
                start_sel=MARK_START,
                stop_sel=MARK_END,
                max_words=SNIPPET_WORDS,
                min_words=SNIPPET_WORDS // 2,
                highlight_all=False,
            ),
        )
        .order_by("-rank", "id")
        .values_list("id", "rank", "snippet")
    )
    if article_ids is not None:
        rows = rows.filter(id__in=list(article_ids))
    return [Match(pk, float(rank), snippet) for pk, rank, snippet in rows]


# Web-search syntax -> FTS5. Every word becomes a quoted string, so no FTS5 operator or
# column filter can be injected; the structure mirrors websearch_to_tsquery.
_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORD = re.compile(r"\w+", re.UNICODE)


def _parse(text: str) -> tuple[list[str], list[str]]:
    """(required FTS5 terms, one per AND-ed group, excluded terms) of a web-search query."""
    groups: list[list[str]] = [[]]  # OR-groups of required terms (AND between groups)
    excluded: list[str] = []
    pending_or = False
    for match in _TOKEN.finditer(text or ""):
        negate, phrase, bare = match.group(1), match.group(2), match.group(3)
        if bare is not None and bare.lower() == "or":
            pending_or = bool(groups[-1])
            continue
        if bare is not None and bare.startswith("-"):
            negate, bare = "-", bare[1:]
        words = _WORD.findall(phrase if phrase is not None else bare)
        if not words:
            continue
        term = '"' + " ".join(words) + '"'
        if negate:
            excluded.append(term)
            pending_or = False
        elif pending_or:
            groups[-1].append(term)
            pending_or = False
        else:
            if groups[-1]:
                groups.append([])
            groups[-1].append(term)
    required = [
        group[0] if len(group) == 1 else "(" + " OR ".join(group) + ")" for group in groups if group
    ]
    return required, excluded


def fts5_query(text: str) -> str | None:
    """The FTS5 MATCH expression for `text`; None when it has no required term."""
    required, excluded = _parse(text)
    if not required:
        return None
    expression = " AND ".join(required)
    for term in excluded:
        expression = f"({expression}) NOT {term}"
    return expression


def _sqlite(text: str, article_ids) -> list[Match]:
    ids = None if article_ids is None else list(article_ids)
    if ids is not None and not ids:
        return []
    expression = fts5_query(text)
    if expression is None:
        return _sqlite_excluding(text, ids)
    sql = (
        f"SELECT rowid, bm25({FTS_TABLE}, %s, 1.0) AS score, "
        f"snippet({FTS_TABLE}, 1, %s, %s, '…', %s) "
        f"FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s"
    )
    params: list = [TITLE_WEIGHT, MARK_START, MARK_END, SNIPPET_WORDS, expression]
    if ids is not None:
        sql += f" AND rowid IN ({', '.join(['%s'] * len(ids))})"
        params += ids
    sql += " ORDER BY score, rowid"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # bm25 is lower-is-better and negative; report higher-is-better like ts_rank.
    return [Match(int(rowid), -float(score), snippet or "") for rowid, score, snippet in rows]


def _sqlite_excluding(text: str, ids: list[int] | None) -> list[Match]:
    """`-word` alone: like websearch_to_tsquery, every article without the word."""
    _, excluded = _parse(text)
    if not excluded:
        return []
    sql = (
        f"SELECT rowid, body_text FROM {FTS_TABLE} WHERE rowid NOT IN "
        f"(SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s)"
    )
    params: list = [" OR ".join(excluded)]
    if ids is not None:
        sql += f" AND rowid IN ({', '.join(['%s'] * len(ids))})"
        params += ids
    sql += " ORDER BY rowid"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        Match(int(rowid), 0.0, " ".join((body or "").split()[:SNIPPET_WORDS]))
        for rowid, body in rows
    ]


# Migration 0004 calls these: each database gets its own structure, nothing else.

_SQLITE_CREATE = [
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(
        title, body_text,
        content='governance_knowledgearticle', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    )""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_ai AFTER INSERT ON governance_knowledgearticle
    BEGIN
        INSERT INTO {FTS_TABLE}(rowid, title, body_text)
        VALUES (new.id, new.title, new.body_text);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_ad AFTER DELETE ON governance_knowledgearticle
    BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, title, body_text)
        VALUES ('delete', old.id, old.title, old.body_text);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_au AFTER UPDATE ON governance_knowledgearticle
    BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, title, body_text)
        VALUES ('delete', old.id, old.title, old.body_text);
        INSERT INTO {FTS_TABLE}(rowid, title, body_text)
        VALUES (new.id, new.title, new.body_text);
    END""",
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')",
]
_SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_ai",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_ad",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_au",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
]


def _gin_index():
    from django.contrib.postgres.indexes import GinIndex

    return GinIndex(search_vector(), name=GIN_INDEX)


def create_search_structures(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for statement in _SQLITE_CREATE:
            schema_editor.execute(statement)
    elif vendor == "postgresql":
        model = apps.get_model("governance", "KnowledgeArticle")
        schema_editor.add_index(model, _gin_index())


def drop_search_structures(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for statement in _SQLITE_DROP:
            schema_editor.execute(statement)
    elif vendor == "postgresql":
        model = apps.get_model("governance", "KnowledgeArticle")
        schema_editor.remove_index(model, _gin_index())
