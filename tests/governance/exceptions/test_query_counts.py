"""List pages and list endpoints cost the same number of queries for 2 or 12 requests."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


def count(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


@pytest.mark.parametrize(
    "url",
    [
        "/exceptions/",
        "/exceptions/decisions/",
        "/api/v1/exception-requests/",
        "/knowledge/",
        "/api/v1/knowledge/articles/",
        "/api/v1/knowledge/articles/?q=launch",
    ],
)
def test_list_queries_do_not_grow_with_rows(scene, client_as, admin, url):
    from demo.knowledge import seed_knowledge

    def add(n):
        for _ in range(n):
            scene.file(scene.jobs(jobs=[scene.running, scene.waiting]))
            scene.file()

    user = scene.owner if "decisions" in url else admin
    client = client_as(user)
    seed_knowledge(actor=admin)
    add(1)
    few = count(client, url)
    add(5)
    assert count(client, url) == few


def test_the_exception_list_page_query_budget(
    scene, client_as, admin, django_assert_max_num_queries
):
    for _ in range(6):
        scene.file()
    client = client_as(scene.owner)
    # session, user, roles, count, rows, jobs prefetch, nav (roles cached) + badge count
    with django_assert_max_num_queries(10):
        client.get("/exceptions/")
