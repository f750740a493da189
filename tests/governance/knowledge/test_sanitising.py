"""Markdown is rendered and sanitised: no script, handler or javascript: URL gets through."""

import pytest

from governance.knowledge.services import ArticleData, article_create, render_markdown

ATTACKS = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    '<a href="javascript:alert(1)">click</a>',
    "[click](javascript:alert(1))",
    '<svg onload="alert(1)"><circle /></svg>',
    '<iframe src="https://evil.example"></iframe>',
    '<p style="background:url(javascript:alert(1))" onclick="x()">hi</p>',
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_no_script_gets_through(attack):
    html, text = render_markdown(f"Before\n\n{attack}\n\nAfter")
    lowered = html.lower()
    for needle in (
        "<script",
        "onerror",
        "onload",
        "onclick",
        "javascript:",
        "<iframe",
        "<svg",
        "style=",
    ):
        assert needle not in lowered
    assert "Before" in html and "After" in html
    assert "alert(1)" not in text


def test_markdown_is_rendered():
    html, text = render_markdown(
        "# Title\n\nSome **bold** and a [link](https://example.com).\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |"
    )
    assert "<h2>Title</h2>" in html  # the page's h1 is the article title
    assert "<strong>bold</strong>" in html
    assert '<a href="https://example.com" rel="noopener noreferrer">link</a>' in html
    assert "<table>" in html
    # A heading stays apart from the text after it (search snippets and previews).
    assert text == "Title — Some bold and a link . a b 1 2"


@pytest.mark.django_db
def test_a_saved_article_keeps_only_the_sanitised_html(admin, client_as):
    article = article_create(
        actor=admin,
        data=ArticleData(
            title="Evil", body='Hi <script>alert("x")</script><img src=x onerror=alert(1)>'
        ),
    )
    assert "<script" not in article.body_html and "onerror" not in article.body_html
    page = client_as(admin).get(f"/knowledge/{article.slug}/").content.decode()
    assert "<script>alert" not in page and "onerror=alert" not in page


@pytest.fixture
def client_as():
    from django.test import Client

    def make(user):
        client = Client()
        client.force_login(user)
        return client

    return make
