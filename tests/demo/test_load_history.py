"""`manage.py load_history`: any scenario in the `simulate` format becomes a queue's
history through the demo's loader, so a month can be recomputed from `simulate`'s
output and compared with the signals API."""

from __future__ import annotations

import datetime as dt
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from engine import load_scenario, result_to_json, simulate
from fleet.models import Job, JobQueue, QuotaShare
from governance.dashboards.selectors.reads import rollup_scope
from governance.models import PolicyChange
from tests.governance.dashboards.conftest import scenario_document

START = "2025-03-03T00:00:00Z"
MARCH = dt.date(2025, 3, 1)


def write(tmp_path, document) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(document))
    return str(path)


def load(*args) -> str:
    out = StringIO()
    call_command("load_history", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_a_new_queue_gets_the_scenario_and_its_month_recomputed(tmp_path):
    document = scenario_document("20-lowering-a-limit.json")
    output = load(write(tmp_path, document), "--queue", "replayed", "--start", START)
    assert "into the created queue 'replayed'" in output
    queue = JobQueue.objects.get(name="replayed")
    result = result_to_json(simulate(load_scenario(document)))
    assert Job.objects.filter(queue=queue).count() == len(result["jobs"])
    # Recompute the month from simulate's output: jobs that succeeded, preemptions.
    data, _ = rollup_scope(month=MARCH, scope=f"q{queue.pk}")
    succeeded = [j for j in result["jobs"].values() if j["state"] == "SUCCEEDED"]
    assert data["jobs_finished"] == len(succeeded)
    preemptions = [e for e in result["events"] if e["type"] == "PREEMPTED"]
    assert data["preemptions_total"] == len(preemptions)
    # The scenario's update_share is recorded at its instant, with the limits it set, as
    # an import: replayed history, not an admin's edit, so the month counts no edit.
    assert not PolicyChange.objects.filter(queue=queue, cause=PolicyChange.Cause.EDIT).exists()
    assert data["policy_edits"] == 0
    imports = PolicyChange.objects.filter(queue=queue, cause=PolicyChange.Cause.IMPORT)
    action = next(a for a in document["actions"] if a["type"] == "update_share")
    at = dt.datetime(2025, 3, 3, tzinfo=dt.UTC) + dt.timedelta(seconds=action["at"])
    replayed = imports.get(share__name=action["share"], created_at=at)
    assert replayed.after["capacity_limits"] == action["capacity_limits"]
    # The queue's current policy is the scenario's first: an import change at the end
    # brings the record back to it.
    assert imports.filter(share__name=action["share"], created_at__gt=at).exists()
    share = QuotaShare.objects.get(queue=queue, name=action["share"])
    assert share.created_at == dt.datetime(2025, 3, 3, tzinfo=dt.UTC)
    # So the capacity figures follow the recorded limits, by hand: a's three jobs run
    # within its limit of 3 until 100; then its limit is 1 (two borrowed) until b1
    # reclaims a3 at 200; a1 and a2 (one borrowed) until 1000; a3 alone until 2000;
    # then the current limit of 3 lies idle to the month's end (29 days from 3 March).
    a, _ = rollup_scope(month=MARCH, scope=f"q{queue.pk}/s{share.pk}")
    assert a["instance_hours"]["within_limit"] * 3600 == pytest.approx(300 + 100 + 800 + 1000)
    assert a["instance_hours"]["borrowed"] * 3600 == pytest.approx(200 + 800)
    assert a["instance_hours"]["idle_lendable"] * 3600 == pytest.approx(3 * (696 * 3600 - 2000))


@pytest.mark.django_db
def test_every_month_of_the_span_is_recomputed_up_to_now(tmp_path):
    """A history of one week in March, loaded in June: April and May hold no event of it,
    but its shares exist from March on, so those months have figures too (their idle
    capacity), and no month of the span is left a hole in the trends."""
    from demo.history import history_load
    from engine import load_scenario as scenario_from
    from governance.dashboards.selectors.reads import dashboard_rollups

    now = dt.datetime(2025, 6, 10, 12, tzinfo=dt.UTC)
    summary = history_load(
        scenario=scenario_from(scenario_document("20-lowering-a-limit.json")),
        queue_name="replayed",
        start=dt.datetime(2025, 3, 3, tzinfo=dt.UTC),
        name_prefix="h-",
        now=now,
    )
    months = [dt.date(2025, m, 1) for m in (3, 4, 5, 6)]
    assert summary.months == months
    queue = JobQueue.objects.get(name="replayed")
    for month in months:
        data, _ = rollup_scope(month=month, scope=f"q{queue.pk}")
        assert data is not None, month
    april, _ = rollup_scope(month=dt.date(2025, 4, 1), scope=f"q{queue.pk}")
    # Idle the whole of April: every instance of the queue's limits, 30 days of it.
    limits = sum(
        limit.max_instances for share in queue.shares.all() for limit in share.limits.all()
    )
    assert april["runs"] == 0
    assert april["instance_hours"]["idle_lendable"] + april["instance_hours"][
        "idle_reserved"
    ] == pytest.approx(limits * 30 * 24)
    # The month under way is measured to `now`, and says so.
    june, _ = rollup_scope(month=dt.date(2025, 6, 1), scope=f"q{queue.pk}")
    assert june["coverage"]["partial"] and june["coverage"]["seconds"] == 9.5 * 86400
    trend = dashboard_rollups(month=dt.date(2025, 6, 1), queue_id=queue.pk)["trend"]
    assert [m for m, data in trend if data is not None] == months


@pytest.mark.django_db
def test_loading_into_an_existing_queue_adds_missing_shares(tmp_path):
    document = scenario_document("01-walkthrough-borrow-reclaim-priority.json")
    load(write(tmp_path, document), "--queue", "q", "--start", START)
    extra = {
        **document,
        "name": "more",
        "shares": [*document["shares"], {**document["shares"][1], "name": "qs4"}],
        "jobs": [{**document["jobs"][0], "id": "late", "share": "qs4"}],
        "actions": [],
    }
    output = load(write(tmp_path, extra), "--queue", "q", "--start", "2025-03-10T00:00:00Z")
    assert "Created shares: qs4." in output
    assert Job.objects.filter(queue__name="q", name="more-late").exists()
    # Loading the same history again is refused: the names are taken.
    with pytest.raises(CommandError, match="--prefix: queue 'q' already holds jobs named"):
        load(write(tmp_path, extra), "--queue", "q", "--start", "2025-03-10T00:00:00Z")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--start", "yesterday"], "--start: 'yesterday' is not an ISO date-time"),
        (["--start", "2999-01-01T00:00:00Z"], "--start: the history would end at"),
        (["--gpus-per-instance", "0"], "--gpus-per-instance: must be at least 1"),
    ],
)
def test_bad_input_names_the_option_and_changes_nothing(tmp_path, args, message):
    path = write(tmp_path, scenario_document("22-terminate.json"))
    with pytest.raises(CommandError, match=message) as raised:
        load(path, "--queue", "q", *args)
    assert raised.value.returncode == 2
    assert not JobQueue.objects.filter(name="q").exists()
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_an_instance_type_the_queue_does_not_have_is_refused(tmp_path):
    load(write(tmp_path, scenario_document("22-terminate.json")), "--queue", "q", "--start", START)
    other = scenario_document("01-walkthrough-borrow-reclaim-priority.json")
    with pytest.raises(CommandError, match="queue.capacity: 'ml.g5.xlarge' is not an instance"):
        load(write(tmp_path, other), "--queue", "q", "--start", START)


@pytest.mark.django_db
def test_an_invalid_scenario_is_refused_as_simulate_refuses_it(tmp_path):
    path = write(tmp_path, scenario_document("08-invalid-borrow-limit-on-reserve.json"))
    with pytest.raises(CommandError, match="borrow_limit") as raised:
        load(path, "--queue", "q", "--start", START)
    assert raised.value.returncode == 2
