"""Every list endpoint costs a fixed number of queries, however many rows it returns.

Each request pays 3 for the session, the user and the user's roles, plus the rows and
one per prefetched relation; a COUNT only when the first page is full (a shorter first
page is the whole list).
"""

import pytest

from fleet.models import WorkloadClass
from fleet.selectors import share_document
from governance.policy.services import share_data_from_document, share_update
from tests.factories import (
    CapacityLimitFactory,
    InstanceTypeFactory,
    QueueCapacityFactory,
    QuotaShareFactory,
    TeamFactory,
    UrgencyDefinitionFactory,
    UserFactory,
    aws_sample_queue,
)

PER_REQUEST = 3  # session, user, roles


@pytest.fixture
def many(admin):
    for n in range(4):
        queue = aws_sample_queue(f"queue-{n}")
        other = InstanceTypeFactory(name=f"ml.type-{n}")
        QueueCapacityFactory(queue=queue, instance_type=other)
        share = QuotaShareFactory(queue=queue, name="extra")
        CapacityLimitFactory(share=share, instance_type=other)
        team = TeamFactory(name=f"team-{n}")
        team.members.add(*(UserFactory() for _ in range(3)))
        team.leads.add(UserFactory())
        UrgencyDefinitionFactory(name=f"urgency-{n}").invokers.add(team)
        WorkloadClass.objects.create(name=f"class-{n}", grace=60 * n)
        for share in queue.shares.all():
            doc = share_document(share)
            doc["in_share_preemption"] = not doc["in_share_preemption"]
            share_update(
                actor=admin,
                share=share,
                data=share_data_from_document(doc),
                reason="flip",
                expected_version=share.version,
            )


@pytest.mark.parametrize(
    ("url", "queries", "rows"),
    [
        ("/api/v1/queues/", 1 + 1, 4),  # capacities with their types
        ("/api/v1/shares/", 1 + 1, 16),  # limits with their types
        ("/api/v1/teams/", 1 + 2, 11),  # members, leads
        ("/api/v1/instance-types/", 1, 5),
        ("/api/v1/urgency-definitions/", 1 + 1, 4),  # invokers
        ("/api/v1/workload-classes/", 1, 4),
        # Actors and subjects joined; 16 share edits and the admin fixture's role grant.
        ("/api/v1/policy-changes/", 1, 17),
    ],
)
def test_list_queries_are_constant(admin_api, many, django_assert_num_queries, url, queries, rows):
    with django_assert_num_queries(PER_REQUEST + queries):
        response = admin_api.get(url)
    assert response.status_code == 200
    assert response.json()["count"] == rows


@pytest.mark.parametrize(
    ("existing", "page", "count", "queries", "shown"),
    [
        (0, 1, 0, 1, 0),
        (49, 1, 49, 1, 49),  # a short first page is the whole list: no COUNT
        (50, 1, 50, 2, 50),  # a full one may not be: COUNT
        (51, 1, 51, 2, 50),
        (51, 2, 51, 2, 1),
    ],
)
def test_pages_count_only_when_they_must(
    admin_api, django_assert_num_queries, existing, page, count, queries, shown
):
    for n in range(existing):
        InstanceTypeFactory(name=f"ml.type-{n:03}")
    with django_assert_num_queries(PER_REQUEST + queries):
        response = admin_api.get(f"/api/v1/instance-types/?page={page}")
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], len(body["results"])) == (count, shown)
    assert (body["next"] is not None) == (page * 50 < count)
    assert (body["previous"] is not None) == (page > 1)
