"""Articles: who may write and change them, their history, decision records, the seed,
and the pages and API."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from core.errors import Refused
from demo.knowledge import seed_knowledge
from governance.glossary import GLOSSARY
from governance.knowledge.services import ArticleData, article_create, article_update
from governance.models import KnowledgeArticle
from governance.policy.services import VersionConflict

pytestmark = pytest.mark.django_db


def login(user, api=False):
    client = APIClient() if api else Client()
    client.force_login(user)
    return client


@pytest.fixture
def article(exception_owner):
    return article_create(
        actor=exception_owner,
        data=ArticleData(title="Reclaim notes", body="Reclaim **fast**.", tags=["Reclaim", "x y"]),
    )


def test_owner_editors_and_admins_may_change_an_article(article, exception_owner, team_lead, admin):
    with pytest.raises(Refused):
        article_update(
            actor=team_lead,
            article=article,
            data=ArticleData(title="t", body="b"),
            expected_version=1,
        )
    article.editors.add(team_lead)
    updated = article_update(
        actor=team_lead,
        article=article,
        data=ArticleData(title="Reclaim notes", body="Reclaim slower.", editors=[team_lead]),
        expected_version=1,
        reason="clarified",
    )
    assert updated.version == 2
    assert [(r.version, r.reason) for r in updated.revisions.all()] == [
        (2, "clarified"),
        (1, "Created"),
    ]
    with pytest.raises(VersionConflict):
        article_update(
            actor=admin, article=article, data=ArticleData(title="t", body="b"), expected_version=1
        )


def test_leadership_reads_but_does_not_write(leadership):
    with pytest.raises(Refused):
        article_create(actor=leadership, data=ArticleData(title="t", body="b"))
    assert login(leadership).get("/knowledge/new/").status_code == 403
    assert login(leadership).get("/knowledge/").status_code == 200


def test_tags_are_slugs(article):
    assert sorted(t.name for t in article.tags.all()) == ["reclaim", "x-y"]


def test_the_article_page_shows_owner_who_may_change_links_and_history(article, leadership):
    html = login(leadership).get(f"/knowledge/{article.slug}/").content.decode()
    assert "<strong>fast</strong>" in html
    assert "owner-user (owner), platform admins" in html
    assert "Version 1" in html
    assert "Edit</a>" not in html


def test_the_editor_page_saves_a_new_version(article, exception_owner):
    client = login(exception_owner)
    assert client.get(f"/knowledge/{article.slug}/edit/").status_code == 200
    response = client.post(
        f"/knowledge/{article.slug}/edit/",
        {"title": "Reclaim notes", "kind": "RECLAIM", "body": "New body", "tags": "reclaim",
         "version": "1", "reason": "rewrite"},
    )  # fmt: skip
    assert response.status_code == 302
    article.refresh_from_db()
    assert (article.version, article.body, article.kind) == (2, "New body", "RECLAIM")


def test_the_editor_names_the_missing_field(exception_owner):
    response = login(exception_owner).post(
        "/knowledge/new/", {"title": "", "kind": "REFERENCE", "body": "x"}
    )
    assert response.status_code == 400
    assert "title" in response.context["form"].errors


def test_a_decided_request_adds_a_decision_record(db, aws_queue, team_lead, exception_owner):
    from datetime import timedelta

    from django.utils import timezone

    from fleet.models import InstanceType
    from governance.exceptions.services import (
        RequestData,
        exception_request_create,
        exception_request_deny,
    )
    from governance.models import ExceptionOwner
    from tests.factories import UrgencyDefinitionFactory

    qs1 = aws_queue.shares.get(name="qs1")
    qs1.team.leads.add(team_lead)
    ExceptionOwner.objects.create(user=exception_owner, queue=aws_queue)
    urgency = UrgencyDefinitionFactory(name="Launch")
    now = timezone.now()
    request = exception_request_create(
        actor=team_lead,
        data=RequestData(
            kind="TEMPORARY_CAPACITY",
            team=qs1.team,
            urgency=urgency,
            justification="Launch <script>alert(1)</script>",
            window_start=now + timedelta(hours=1),
            window_end=now + timedelta(hours=2),
            share=qs1,
            instance_type=InstanceType.objects.get(),
            extra_instances=1,
        ),
        submit=True,
    )
    exception_request_deny(actor=exception_owner, request=request, note="Not now")
    record = KnowledgeArticle.objects.get(exception_requests=request)
    assert record.slug == f"exception-{request.pk}-decision"
    assert record.kind == KnowledgeArticle.Kind.EXCEPTION
    assert (
        record.title
        == f"Decision on exception #{request.pk}: temporary capacity for team-qs1 (denied)"
    )
    assert sorted(t.name for t in record.tags.all()) == ["decision", "denied", "exception"]
    assert list(record.shares.all()) == [qs1] and list(record.urgencies.all()) == [urgency]
    assert "Not now" in record.body_text and "<script" not in record.body_html
    assert record.owner == exception_owner


def test_seed_knowledge_publishes_the_glossary_and_a_dozen_articles(admin, aws_queue):
    articles = seed_knowledge(actor=admin)
    assert len(articles) == 13
    assert "workload-classes-philly" in {a.slug for a in articles}
    glossary = KnowledgeArticle.objects.get(slug="glossary")
    for term, explanation in GLOSSARY.items():
        assert term in glossary.body_text and explanation in glossary.body_text
    qs3 = aws_queue.shares.get(name="qs3")
    assert "interruption-contract-qs3" in {a.slug for a in qs3.articles.all()}
    assert seed_knowledge(actor=admin) == articles  # idempotent
    assert KnowledgeArticle.objects.count() == 13


def test_the_search_page_ranks_and_highlights(admin, aws_queue, leadership):
    seed_knowledge(actor=admin)
    response = login(leadership).get("/knowledge/", {"q": "reclaim"})
    hits = response.context["hits"]
    assert hits[0].article.slug == "reclaim-policy"
    assert "<mark>" in response.content.decode()
    fragment = login(leadership).get(
        "/knowledge/", {"q": "reclaim", "tag": "interruption-contract"}, HTTP_HX_REQUEST="true"
    )
    assert "<html" not in fragment.content.decode()
    assert {h.article.kind for h in fragment.context["hits"]} == {"INTERRUPTION"}


def test_the_api_searches_and_writes(admin, aws_queue, exception_owner, leadership):
    seed_knowledge(actor=admin)
    results = login(leadership, api=True).get("/api/v1/knowledge/articles/", {"q": "reclaim"})
    data = results.json()
    assert data["results"][0]["article"]["slug"] == "reclaim-policy"
    assert "<mark>" in data["results"][0]["snippet"]

    owner = login(exception_owner, api=True)
    created = owner.post(
        "/api/v1/knowledge/articles/",
        {"title": "API article", "body": "<script>x</script>Hello", "tags": ["api"]},
        format="json",
    )
    assert created.status_code == 201
    body = created.json()
    assert "<script" not in body["body_html"] and body["tags"] == ["api"]
    pk = body["id"]
    changed = owner.patch(
        f"/api/v1/knowledge/articles/{pk}/", {"body": "Changed", "version": 1}, format="json"
    )
    assert changed.json()["version"] == 2
    conflict = owner.patch(
        f"/api/v1/knowledge/articles/{pk}/", {"body": "Again", "version": 1}, format="json"
    )
    assert conflict.status_code == 409
    denied = login(leadership, api=True).patch(
        f"/api/v1/knowledge/articles/{pk}/", {"body": "x", "version": 2}, format="json"
    )
    assert denied.status_code == 403
    assert denied.json()["detail"].startswith("only the article's owner")
    assert (
        login(leadership, api=True)
        .post("/api/v1/knowledge/articles/", {"title": "t", "body": "b"}, format="json")
        .status_code
        == 403
    )
    assert owner.delete(f"/api/v1/knowledge/articles/{pk}/").status_code == 204
