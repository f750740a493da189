"""Search: ranked results, highlighted snippets, filters; the same on PostgreSQL (GIN,
websearch) and SQLite (FTS5). Run the suite with DATABASE_URL=postgres://... for both."""

import pytest
from django.db import connection

from governance.knowledge import selectors as knowledge
from governance.knowledge.search import fts5_query
from governance.knowledge.services import ArticleData, article_create, article_update

pytestmark = pytest.mark.django_db


@pytest.fixture
def articles(admin, aws_queue):
    qs1 = aws_queue.shares.get(name="qs1")
    qs2 = aws_queue.shares.get(name="qs2")

    def make(title, body, tags=(), shares=()):
        return article_create(
            actor=admin, data=ArticleData(title=title, body=body, tags=tags, shares=shares)
        )

    return {
        "reclaim": make(
            "Reclaim policy",
            "Borrowed instances are reclaimed when the lender submits work. Reclaim picks "
            "the lowest priority first.",
            tags=["reclaim"],
            shares=[qs1, qs2],
        ),
        "contract": make(
            "Interruption contract for qs1",
            "Jobs on borrowed capacity may be preempted; a reclaim costs one checkpoint.",
            tags=["interruption-contract"],
            shares=[qs1],
        ),
        "urgency": make(
            "Urgency policy",
            "Pick the urgency that fits: a production incident, a conference deadline.",
            tags=["urgency"],
        ),
        "qs1": qs1,
        "qs2": qs2,
    }


@pytest.fixture
def search(leadership):
    """Search as leadership (who reads every article but the decision records of
    requests they may not see)."""

    def run(**kwargs):
        return knowledge.article_search(user=leadership, **kwargs)

    return run


def titles(hits):
    return [hit.article.title for hit in hits]


def test_results_are_ranked_title_matches_first(articles, search):
    hits = search(query="reclaim")
    assert titles(hits) == ["Reclaim policy", "Interruption contract for qs1"]
    assert hits[0].rank > hits[1].rank > 0


def test_snippets_highlight_the_matched_words_and_escape_the_rest(articles, admin, search):
    article_create(
        actor=admin,
        data=ArticleData(title="Markup", body="Use `<b>` tags & checkpoint often, really often."),
    )
    hit = search(query="checkpoint")
    snippet = {h.article.title: str(h.snippet) for h in hit}["Markup"]
    assert "<mark>checkpoint</mark>" in snippet
    # Text that looks like markup is escaped (SQLite) or dropped (PostgreSQL's
    # ts_headline parses it as a tag); it never becomes markup.
    assert "&amp;" in snippet
    assert "<b>" not in snippet


def test_stemming_matches_word_forms(articles, search):
    assert "Reclaim policy" in titles(search(query="reclaiming"))
    assert titles(search(query="preempt")) == ["Interruption contract for qs1"]


def test_websearch_syntax_phrases_or_and_exclusion(articles, search):
    assert titles(search(query='"conference deadline"')) == ["Urgency policy"]
    assert titles(search(query='"deadline conference"')) == []
    assert set(titles(search(query="incident or checkpoint"))) == {
        "Urgency policy",
        "Interruption contract for qs1",
    }
    assert titles(search(query="reclaim -checkpoint")) == ["Reclaim policy"]
    assert titles(search(query="-reclaim")) == ["Urgency policy"]


def test_filters_by_tag_and_linked_share(articles, search):
    assert titles(search(query="reclaim", tag="interruption-contract")) == [
        "Interruption contract for qs1"
    ]
    assert titles(search(query="reclaim", share_id=articles["qs2"].pk)) == ["Reclaim policy"]
    assert set(titles(search(share_id=articles["qs1"].pk))) == {
        "Reclaim policy",
        "Interruption contract for qs1",
    }
    assert titles(search(query="reclaim", tag="urgency")) == []


def test_hostile_queries_are_just_words(articles, search):
    for query in ["title:reclaim", "reclaim*", "NEAR(a b)", '"', "'; DROP TABLE x; --", "^reclaim"]:
        search(query=query)  # no error
    # Every word is quoted: no FTS5 column filter, prefix or operator is taken from input.
    assert fts5_query('title:reclaim OR "x') == '("title reclaim" OR "x")'
    assert fts5_query("a -b c") == '("a" AND "c") NOT "b"'
    assert fts5_query("-b") is None  # exclusions alone: every article without the word


def test_edits_are_searchable_at_once(articles, admin, search):
    article = articles["urgency"]
    article_update(
        actor=admin,
        article=article,
        data=ArticleData(title="Urgency policy", body="Now about quarantine."),
        expected_version=article.version,
    )
    assert titles(search(query="quarantine")) == ["Urgency policy"]
    assert titles(search(query="conference")) == []
    article.delete()
    assert titles(search(query="quarantine")) == []


def test_articles_for_share(articles, leadership):
    found = knowledge.articles_for_share(user=leadership, share=articles["qs1"])
    assert [a.title for a in found] == [
        "Interruption contract for qs1",
        "Reclaim policy",
    ]


def test_the_result_kind_is_the_same_on_both_databases(articles, search):
    hit = search(query="reclaim")[0]
    assert isinstance(hit.rank, float)
    assert hit.snippet.__html__()  # SafeString with <mark>
    assert hit.article.tags.all()[0].name == "reclaim"


@pytest.mark.postgres
def test_postgres_uses_a_gin_index_and_websearch():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'knowledge_article_search_gin'"
        )
        (definition,) = cursor.fetchone()
    assert "USING gin" in definition and "to_tsvector" in definition


def test_sqlite_uses_an_fts5_table():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = 'governance_article_fts'")
        (definition,) = cursor.fetchone()
    assert "fts5" in definition.lower()
