"""Round trips: export, import into an empty database, export again: the same file."""

import pytest

from fleet.models import JobQueue, QuotaShare, Team
from governance.models import PolicyChange
from governance.policy_code import IMPORT_FORMATS, policy_export, policy_file_read
from governance.policy_code.plan import policy_apply, policy_plan
from tests.governance.policy_code.conftest import build_queue, empty_database

pytestmark = pytest.mark.django_db


def reimport(admin, content: str, format: str) -> None:
    policy = policy_file_read(raw=content.encode(), source=f"policy.{format}", format=format)
    policy_apply(reason="test", actor=admin, policy=policy)


@pytest.mark.parametrize("format", IMPORT_FORMATS)
def test_a_queue_survives_export_and_import_into_an_empty_database(admin, varied_queue, format):
    first = policy_export(format=format, queue=varied_queue).content
    empty_database()
    assert not JobQueue.objects.exists() and not Team.objects.exists()
    reimport(admin, first, format)
    queue = JobQueue.objects.get(name="research fleet")
    assert policy_export(format=format, queue=queue).content == first
    assert queue.shares.count() == 6
    assert set(PolicyChange.objects.values_list("cause", flat=True)) == {"import"}


@pytest.mark.parametrize("format", ["kueue", "native"])
def test_every_queue_survives_the_round_trip_together(admin, varied_queue, format):
    build_queue(
        admin,
        "inference",
        {"ml.g5.xlarge": 2},
        shares=[("serving", "serving", "RESERVE", None, False, "ENABLED", {"ml.g5.xlarge": 2})],
    )
    first = policy_export(format=format).content
    empty_database()
    reimport(admin, first, format)
    assert JobQueue.objects.count() == 2
    assert policy_export(format=format).content == first


def test_the_native_round_trip_keeps_everything_it_documents(admin, varied_queue):
    first = policy_export(format="native", queue=varied_queue).content
    empty_database()
    reimport(admin, first, "native")
    queue = JobQueue.objects.get(name="research fleet")
    assert (queue.description, queue.default_preemption_retries, queue.runnable_time_limit) == (
        "Shared by research teams.",
        3,
        3600,
    )
    assert Team.objects.get(name="vision").description == "Vision research"
    assert [share.name for share in queue.shares.order_by("position")][:2] == ["vision/a", "nlp"]
    spare = queue.shares.get(name="spare")
    assert (spare.strategy, spare.state, spare.in_share_preemption) == ("LEND", "DISABLED", True)


def test_an_exported_file_applied_again_changes_nothing(admin, varied_queue):
    for format in IMPORT_FORMATS:
        content = policy_export(format=format, queue=varied_queue).content
        policy = policy_file_read(raw=content, source="same", format=format)
        plan = policy_plan(policy=policy)
        assert plan.changes == [], format
        before = PolicyChange.objects.count()
        policy_apply(reason="test", actor=admin, policy=policy)
        assert PolicyChange.objects.count() == before
    assert QuotaShare.objects.filter(queue=varied_queue).count() == 6
