"""What-if contracts per workload class (issue 24 point 4): "class batch: grace 120 s,
minimum runtime 30 min" replays exactly the jobs of that class under it (a recorded
job's class is the one it copied at submission, a trace job's its share's default); a
share's override applies over the class's; bad names and values are refused, naming the
field, and nothing is kept."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils.html import escape

from core.errors import InvalidInput
from fleet.models import QuotaShare, WorkloadClass
from governance.policy.workload_classes import MAX_CONTRACT_SECONDS
from governance.whatif import services
from governance.whatif.compare import CONTRACT_FIELDS, compare_policies, with_contracts
from tests.governance.whatif.conftest import AWS_PHILLY_MAPPING, record_jobs, run_now

pytestmark = pytest.mark.django_db

# Of conftest.record_jobs' afternoon (0-2 and 6 on qs2, 3 on qs3, 4-5 on qs1): the class
# each job copied at submission. `batch` spans two shares; job 4 has none.
CLASSES = {0: "batch", 1: "batch", 2: "batch", 3: "interactive", 5: "batch", 6: "batch"}
BATCH_120 = {"grace": 120, "checkpoint_on_notice": 60, "min_runtime_reclaim": 1800}


@pytest.fixture
def classified(admin, aws_queue):
    """A comparison of the AWS sample queue where qs2 borrows in both runs, its jobs of
    class batch; qs1's return reclaims from them."""
    WorkloadClass.objects.create(name="batch")
    WorkloadClass.objects.create(name="interactive", grace=30)
    WorkloadClass.objects.create(name="unused")
    QuotaShare.objects.filter(queue=aws_queue, name="qs2").update(
        strategy=QuotaShare.Strategy.LEND_AND_BORROW
    )
    for number, job in enumerate(record_jobs(aws_queue)):
        job.workload_class = CLASSES.get(number, "")
        job.save(update_fields=["workload_class"])
    return services.comparison_create(actor=admin, queue=aws_queue)


def ids_of(comparison, *numbers) -> set[str]:
    """Engine ids of the recorded jobs by their number in record_jobs' plan."""
    names = {
        job["id"]: int(job_name.rsplit("-", 1)[1])
        for job, job_name in zip(
            comparison.workload_jobs,
            comparison.queue.jobs.order_by("submitted_at", "id").values_list("name", flat=True),
            strict=True,
        )
    }
    return {job_id for job_id, number in names.items() if number in numbers}


def replayed(comparison, run: str) -> dict[str, dict]:
    """The jobs of `run` as compare_policies hands them to the engine."""
    jobs = with_contracts(
        comparison.workload_jobs,
        comparison.contracts.get(run, {}),
        class_contracts=comparison.class_contracts.get(run, {}),
        job_classes=comparison.workload_classes,
    )
    return {job["id"]: job for job in jobs}


def test_a_recorded_workload_keeps_the_class_each_job_copied(classified):
    assert set(classified.workload_classes.values()) == {"batch", "interactive"}
    assert set(classified.workload_classes) == ids_of(classified, 0, 1, 2, 3, 5, 6)
    assert {
        job_id for job_id, name in classified.workload_classes.items() if name == "batch"
    } == ids_of(classified, 0, 1, 2, 5, 6)


def test_a_trace_job_has_its_share_default_class(classified):
    batch = WorkloadClass.objects.get(name="batch")
    QuotaShare.objects.filter(queue=classified.queue, name="qs2").update(
        default_workload_class=batch
    )
    services.comparison_set_workload(
        actor=classified.author,
        comparison=classified,
        kind="PHILLY",
        start=dt.date(2017, 10, 2),
        days=1,
        scale=0.1,
        mapping=AWS_PHILLY_MAPPING,
    )
    classified.refresh_from_db()
    qs2 = {job["id"] for job in classified.workload_jobs if job["share"] == "qs2"}
    assert qs2 and len(qs2) < len(classified.workload_jobs)
    assert classified.workload_classes == dict.fromkeys(qs2, "batch")


def test_a_class_override_changes_exactly_the_jobs_of_that_class(classified):
    services.comparison_set_class_contract(
        actor=classified.author,
        comparison=classified,
        run="draft",
        workload_class="batch",
        contract=BATCH_120,
    )
    classified.refresh_from_db()
    assert classified.class_contracts == {"draft": {"batch": BATCH_120}}
    assert classified.contracts == {}
    draft, current = replayed(classified, "draft"), replayed(classified, "current")
    changed = {job_id for job_id, job in draft.items() if job != current[job_id]}
    assert changed == ids_of(classified, 0, 1, 2, 5, 6)
    for job_id in changed:
        assert {name: draft[job_id][name] for name in BATCH_120} == BATCH_120
    for job_id in set(draft) - changed:  # the others keep no contract, as recorded
        assert {name: draft[job_id][name] for name in CONTRACT_FIELDS} == CONTRACT_FIELDS


def test_a_share_override_applies_over_the_class_field_by_field(classified):
    services.comparison_set_contracts(
        actor=classified.author,
        comparison=classified,
        contracts={"draft": {"qs1": {"grace": 0}}},
        class_contracts={"draft": {"batch": BATCH_120}},
    )
    classified.refresh_from_db()
    draft = replayed(classified, "draft")
    (qs1_batch,) = ids_of(classified, 5)
    (qs1_none,) = ids_of(classified, 4)
    # Batch on qs1: the share's grace 0 wins; the class's other fields stay.
    assert draft[qs1_batch]["grace"] == 0
    assert draft[qs1_batch]["min_runtime_reclaim"] == 1800
    assert draft[qs1_batch]["checkpoint_on_notice"] == 60
    # qs1 without a class: the share's alone; batch elsewhere: the class's alone.
    assert draft[qs1_none]["grace"] == 0 and draft[qs1_none]["min_runtime_reclaim"] == 0
    for job_id in ids_of(classified, 0, 1, 2, 6):
        assert draft[job_id]["grace"] == 120
    assert services.PRECEDENCE.endswith("the share's value wins.")


def test_grace_with_a_checkpoint_on_the_class_loses_less_and_reclaims_later(classified):
    services.comparison_set_contracts(
        actor=classified.author,
        comparison=classified,
        contracts={},
        class_contracts={
            "current": {"batch": {"grace": 0}},
            "draft": {"batch": {"grace": 120, "checkpoint_on_notice": 60}},
        },
    )
    classified.refresh_from_db()
    comparison = run_now(classified)
    assert comparison.status == "DONE"
    before = comparison.results["current"]["interruptions"]
    after = comparison.results["draft"]["interruptions"]
    # qs1 reclaims its instance from a batch job in both runs: at once and losing the
    # work since its last checkpoint with grace 0; with notice, it saves in 60 s and
    # loses nothing, and qs1 waits those 60 s.
    assert before["time_to_reclaim"]["n"] == after["time_to_reclaim"]["n"] >= 1
    assert before["time_to_reclaim"]["max"] == 0
    assert after["time_to_reclaim"]["max"] == 60
    assert after["lender_wait_gpu_seconds"] > before["lender_wait_gpu_seconds"] == 0
    assert after["lost_gpu_seconds"] < before["lost_gpu_seconds"]
    assert before["by_class"]["batch"]["lost_gpu_seconds"] > 0
    assert after["by_class"]["batch"]["lost_gpu_seconds"] == 0
    assert after["stops"]["checkpointed_on_notice"] >= 1
    # Lost work by how the jobs stopped adds up to the lost work, in both runs.
    for figures in (before, after):
        assert sum(figures["lost_gpu_seconds_by_stop"].values()) == figures["lost_gpu_seconds"]
        assert (
            sum(row["lost_gpu_seconds"] for row in figures["by_class"].values())
            == (figures["lost_gpu_seconds"])
        )
    assert after["lost_gpu_seconds_by_stop"]["checkpointed_on_notice"] == 0
    assert comparison.results["class_contracts"] == comparison.class_contracts
    # What the task stored is the pure comparison of the same inputs.
    direct = compare_policies(
        current=comparison.current_policy,
        draft=comparison.draft_policy,
        jobs=comparison.workload_jobs,
        gpus_per_instance=services.gpus_per_instance(policy=comparison.current_policy),
        class_contracts=comparison.class_contracts,
        job_classes=comparison.workload_classes,
    )
    for run in ("current", "draft"):
        assert comparison.results[run]["interruptions"] == direct[run]["interruptions"]


def test_a_minimum_runtime_on_the_class_avoids_preemptions(classified):
    # qs1 comes back at 2000 s; the batch jobs started at 0 and 30 s are protected for
    # 50 minutes: the reclaim waits for their protection to end (or for them to finish).
    services.comparison_set_class_contract(
        actor=classified.author,
        comparison=classified,
        run="draft",
        workload_class="batch",
        contract={"min_runtime_reclaim": 3000},
    )
    classified.refresh_from_db()
    comparison = run_now(classified)
    before = comparison.results["current"]["interruptions"]
    after = comparison.results["draft"]["interruptions"]
    assert before["protected_blocks"] == 0
    assert after["protected_blocks"] >= 1
    assert after["by_class"]["batch"]["protected_blocks"] == after["protected_blocks"]
    assert after["by_class"]["batch"]["lost_gpu_seconds"] == 0
    assert after["lost_gpu_seconds"] < before["lost_gpu_seconds"]
    assert after["time_to_reclaim"]["max"] > before["time_to_reclaim"]["max"] == 0


@pytest.mark.parametrize(
    ("class_contracts", "field", "words"),
    [
        (
            {"draft": {"nightly": {"grace": 1}}},
            "class_contracts.draft.nightly",
            "no workload class",
        ),
        ({"draft": {"batch": {"grace": -1}}}, "class_contracts.draft.batch.grace", "from 0 to"),
        (
            {"draft": {"batch": {"min_runtime_reclaim": MAX_CONTRACT_SECONDS + 1}}},
            "class_contracts.draft.batch.min_runtime_reclaim",
            "(a week)",
        ),
        (
            {"draft": {"batch": {"checkpoint_on_notice": 0}}},
            "class_contracts.draft.batch.checkpoint_on_notice",
            "from 1 to",
        ),
        ({"draft": {"batch": {"grace": True}}}, "class_contracts.draft.batch.grace", "whole"),
        ({"draft": {"batch": {"patience": 5}}}, "class_contracts.draft.batch.patience", "not a"),
        ({"later": {"batch": {"grace": 5}}}, "class_contracts.later", "the runs are"),
    ],
)
def test_bad_class_overrides_are_refused_naming_the_field(
    classified, class_contracts, field, words
):
    with pytest.raises(InvalidInput) as error:
        services.comparison_set_contracts(
            actor=classified.author,
            comparison=classified,
            contracts={"draft": {"qs2": {"grace": 10}}},
            class_contracts=class_contracts,
        )
    assert list(error.value.errors) == [field]
    assert words in error.value.errors[field][0]
    classified.refresh_from_db()
    assert (classified.contracts, classified.class_contracts) == ({}, {})


def test_a_too_large_share_value_is_refused_too(classified):
    with pytest.raises(InvalidInput) as error:
        services.comparison_set_share_contract(
            actor=classified.author,
            comparison=classified,
            run="draft",
            share="qs2",
            contract={"grace": MAX_CONTRACT_SECONDS + 1},
        )
    assert list(error.value.errors) == ["contracts.draft.qs2.grace"]
    classified.refresh_from_db()
    assert classified.contracts == {}


def test_a_class_no_longer_defined_is_still_a_choice_while_jobs_carry_it(classified):
    WorkloadClass.objects.filter(name="interactive").update(name="chat")
    services.comparison_set_class_contract(
        actor=classified.author,
        comparison=classified,
        run="current",
        workload_class="interactive",
        contract={"grace": 30},
    )
    classified.refresh_from_db()
    assert classified.class_contracts == {"current": {"interactive": {"grace": 30}}}


# -- the page ---------------------------------------------------------------------------


def test_the_page_offers_the_classes_and_sets_one(classified, client):
    client.force_login(classified.author)
    detail = reverse("whatif-detail", args=[classified.pk])
    page = client.get(detail).content.decode()
    assert "batch (5 jobs in this workload)" in page
    assert "interactive (1 job in this workload)" in page
    assert "unused (0 jobs in this workload)" in page
    assert escape(services.PRECEDENCE) in page
    url = reverse("whatif-contracts", args=[classified.pk])
    response = client.post(
        url,
        {"run": "draft", "workload_class": "batch", "grace": "120", "checkpoint_on_notice": "60"},
    )
    assert response.status_code == 302
    classified.refresh_from_db()
    assert classified.class_contracts == {
        "draft": {"batch": {"grace": 120, "checkpoint_on_notice": 60}}
    }
    page = client.get(detail).content.decode()
    assert "Draft policy: class batch: grace 2 m 00 s, checkpoint on notice 1 m 00 s" in page
    # The share form still sets a share's, listed after the classes'.
    assert client.post(url, {"run": "draft", "share": "qs1", "grace": "0"}).status_code == 302
    page = client.get(detail).content.decode()
    assert "class batch: grace 2 m 00 s, checkpoint on notice 1 m 00 s; qs1: grace 0 s" in page
    # All fields blank removes the class's.
    assert client.post(url, {"run": "draft", "workload_class": "batch"}).status_code == 302
    classified.refresh_from_db()
    assert classified.class_contracts == {}
    assert classified.contracts == {"draft": {"qs1": {"grace": 0}}}


@pytest.mark.parametrize(
    ("post", "field", "words"),
    [
        ({"workload_class": "nightly", "grace": "10"}, "workload_class", "no workload class named"),
        ({"workload_class": "batch", "grace": "-1"}, "grace", "greater than or equal to 0"),
        (
            {"workload_class": "batch", "min_runtime_reclaim": str(MAX_CONTRACT_SECONDS + 1)},
            "min_runtime_reclaim",
            "less than or equal to",
        ),
        ({"workload_class": "batch", "grace": "soon"}, "grace", "whole number"),
    ],
)
def test_the_page_refuses_a_bad_class_override_at_its_field(classified, client, post, field, words):
    client.force_login(classified.author)
    response = client.post(
        reverse("whatif-contracts", args=[classified.pk]), {"run": "draft", **post}
    )
    assert response.status_code == 400
    form = response.context["class_contract_form"]
    assert list(form.errors) == [field]
    assert words in form.errors[field][0]
    page = response.content.decode()
    assert f'id="id_class_{field}_error"' in page
    classified.refresh_from_db()
    assert classified.class_contracts == {}


def test_the_results_show_lost_work_by_stop_and_by_class(classified, client):
    services.comparison_set_contracts(
        actor=classified.author,
        comparison=classified,
        contracts={},
        class_contracts={
            "current": {"batch": {"grace": 0}},
            "draft": {"batch": {"grace": 120, "checkpoint_on_notice": 60}},
        },
    )
    classified.refresh_from_db()
    run_now(classified)
    client.force_login(classified.author)
    response = client.get(reverse("whatif-detail", args=[classified.pk]))
    rows = {row.label: row for row in response.context["results"]["contracts"]["rows"]}
    for label in (
        "Lost GPU-hours (preempted work)",
        "Lost GPU-hours: stopped at once (no notice)",
        "Lost GPU-hours: stopped at the end of notice without checkpoint",
        "Lost GPU-hours: checkpointed on notice",
        "Lender wait (GPU-hours)",
        "Time to reclaim",
        "Preemptions avoided by protection",
    ):
        assert label in rows
    assert rows["Time to reclaim"].current.startswith("p50 0 s, p90 0 s, longest 0 s (n = ")
    assert rows["Time to reclaim"].draft.startswith("p50 1 m 00 s, p90 1 m 00 s, longest 1 m 00 s")
    classes = {row["label"]: row for row in response.context["results"]["contracts"]["classes"]}
    assert set(classes) == {"batch", "interactive", "no class"}
    assert classes["batch"]["jobs"] == 5
    assert classes["batch"]["lost_gpu_seconds"][1] == "0.0"
    page = response.content.decode()
    assert "Lost work and preemptions by workload class of the replayed jobs" in page


# -- the API ----------------------------------------------------------------------------


def test_the_api_takes_class_contracts_and_names_a_bad_one(classified, client):
    client.force_login(classified.author)
    queue = classified.queue.pk
    body = {"queue": queue, "run": False}
    response = client.post(
        "/api/v1/what-if/",
        {**body, "contracts": [{"run": "draft", "workload_class": "nightly", "grace": 1}]},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "class_contracts.draft.nightly" in response.content.decode()
    response = client.post(
        "/api/v1/what-if/",
        {**body, "contracts": [{"run": "draft", "workload_class": "batch", "grace": 10**7}]},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "contracts[0].grace" in response.json()["errors"]
    response = client.post(
        "/api/v1/what-if/",
        {**body, "contracts": [{"run": "draft", "workload_class": "batch", "share": "qs2"}]},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "one of the two" in response.content.decode()
    count = type(classified).objects.count()
    response = client.post(
        "/api/v1/what-if/",
        {
            **body,
            "contracts": [
                {"run": "draft", "workload_class": "batch", "grace": 120},
                {"run": "draft", "share": "qs1", "grace": 0},
            ],
        },
        content_type="application/json",
    )
    assert response.status_code == 201
    document = response.json()
    assert document["class_contracts"] == {"draft": {"batch": {"grace": 120}}}
    assert document["contracts"] == {"draft": {"qs1": {"grace": 0}}}
    assert type(classified).objects.count() == count + 1
