"""What-if reviews feed the policy-stability signals."""

import datetime as dt

import pytest

from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.reads import dashboard_rollups
from governance.models import WhatIfComparison, WhatIfReview

pytestmark = pytest.mark.django_db


def test_reviews_are_counted_by_action_in_their_month(admin, aws_queue):
    comparison = WhatIfComparison.objects.create(
        queue=aws_queue, author=admin, title="wider borrowing", current_policy={}, draft_policy={}
    )
    at = dt.datetime(2026, 3, 10, 12, tzinfo=dt.UTC)
    for action in ("PROPOSED", "REJECTED", "PROPOSED", "APPROVED", "APPLIED"):
        review = WhatIfReview.objects.create(comparison=comparison, action=action, actor=admin)
        WhatIfReview.objects.filter(pk=review.pk).update(created_at=at)
    WhatIfReview.objects.create(comparison=comparison, action="PROPOSED", actor=admin)  # now

    rollups_refresh(month=dt.date(2026, 3, 1))
    march = dashboard_rollups(month=dt.date(2026, 3, 1), queue_id=aws_queue.pk)["current"]

    assert march["policy_reviews"] == {"proposed": 2, "approved": 1, "sent_back": 1, "applied": 1}
