import pytest
from django.contrib.auth.models import User

from demo.organisation import demo_password, seed_demo
from fleet.models import Job, JobQueue, QuotaShare, Team
from governance.models import ExceptionRequest, KnowledgeArticle, PolicyChange, PolicyProposal

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
