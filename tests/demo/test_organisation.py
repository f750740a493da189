from decimal import Decimal

import pytest
from django.contrib.auth.models import User

from demo.organisation import demo_password, seed_demo
from fleet.models import InstanceType, Job, JobQueue, QuotaShare, Team
from governance.models import ExceptionRequest, KnowledgeArticle, PolicyChange, PolicyProposal
from governance.policy.prices import instance_type_price_set

pytestmark = pytest.mark.django_db


def counts():
    return (
        JobQueue.objects.count(),
        QuotaShare.objects.count(),
        Team.objects.count(),
        PolicyChange.objects.count(),
        Job.objects.count(),
        KnowledgeArticle.objects.count(),
        ExceptionRequest.objects.count(),
    )


def test_seed_demo_is_idempotent_and_builds_the_demo_organisation():
    seed_demo()
    first = counts()
    seed_demo()
    assert counts() == first

    aws = JobQueue.objects.get(name="aws-sample")
    assert [(s.name, s.strategy, s.borrow_limit) for s in aws.shares.all()] == [
        ("qs1", "LEND_AND_BORROW", 200),
        ("qs2", "LEND", None),
        ("qs3", "RESERVE", None),
    ]
    philly = JobQueue.objects.get(name="philly")
    # 11 sized virtual clusters plus one share folding the four tiny ones.
    assert philly.shares.count() == 12
    # Sized to the bundled trace's demand: 30 % of each VC's nodes (8 GPUs each).
    assert philly.shares.get(name="vc-6214e9").limits.get().max_instances == int(64 * 8 * 0.3)
    assert philly.capacities.get().instances == sum(
        lim.max_instances for s in philly.shares.all() for lim in s.limits.all()
    )
    assert all(lim.max_instances > 0 for s in philly.shares.all() for lim in s.limits.all())
    for username in ("admin", "lead", "owner", "leader"):
        assert User.objects.get(username=username).check_password(demo_password())
    assert PolicyChange.objects.filter(cause="import", queue=aws).exists()
    assert KnowledgeArticle.objects.count() >= 12
    assert ExceptionRequest.objects.filter(state="SUBMITTED").exists()
    # Prices through the price service, as recorded imports.
    assert {t.name: t.price_per_hour for t in InstanceType.objects.all()} == {
        "philly.gpu": Decimal("2.2"),
        "ml.g5.xlarge": Decimal("1.408"),
    }
    priced = PolicyChange.objects.filter(target=PolicyChange.Target.PRICE)
    assert priced.count() == 2
    assert all(c.cause == "import" and c.reason.startswith("demo seed") for c in priced)


def test_seeding_again_keeps_a_price_an_admin_set():
    users = seed_demo()
    g5 = InstanceType.objects.get(name="ml.g5.xlarge")
    instance_type_price_set(
        actor=users["admin"], instance_type=g5, price="1.2", reason="our discount"
    )
    seed_demo()
    g5.refresh_from_db()
    assert g5.price_per_hour == Decimal("1.2")
    assert PolicyChange.objects.filter(target=PolicyChange.Target.PRICE).count() == 3


def test_seed_demo_applies_at_once_when_policy_changes_need_review(settings):
    # `manage.py seed_demo` with POLICY_CHANGES_NEED_REVIEW=1: the seed is loaded data,
    # not an admin's edit, so nothing of it waits for review. The process demo's queue
    # was once an edit: it became a proposal, and its shares were then created against
    # that proposal as if it were the queue.
    settings.POLICY_CHANGES_NEED_REVIEW = True
    seed_demo()

    assert not PolicyProposal.objects.exists()
    lab = JobQueue.objects.get(name="training-lab")
    assert sorted(lab.shares.values_list("name", flat=True)) == ["lab-borrower", "lab-owner"]
    assert set(PolicyChange.objects.filter(queue=lab).values_list("cause", flat=True)) == {"import"}
    assert JobQueue.objects.get(name="aws-sample").shares.count() == 3
