"""The demo's history: the last months of the Philly trace replayed on the `philly` queue.

`seed_history` replays the last `months` full months before `end` on the demo's
`philly` queue, with a plausible record of policy edits, a capacity maintenance
window, and exception requests (filed, approved, denied, revoked) that really act on
the replay: their policy changes are actions of the scenario (demo.history.story).
Idempotent: a queue that already has replayed jobs is left alone.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from demo.history.load import job_tables_analyze, result_load
from demo.history.story import PolicyStory, story_records_write
from engine import load_scenario, simulate
from engine.trace import TraceOptions, build_scenario, read_trace, read_vc_sizes
from fleet.models import InstanceType, Job, JobQueue, UrgencyDefinition, WorkloadClass
from governance.models import PolicyChange

HISTORY_PREFIX = "philly-"
HISTORY_REASON = "Recorded history (demo replay of the Philly trace)"
# The busiest stretch of the trace: its first day is mapped to the first replayed month.
TRACE_START = dt.datetime(2017, 10, 2)

HISTORY_QUEUE = "philly"
HISTORY_TYPE = "philly.gpu"
# The replayed months ran on today's fleet (demo.organisation sizes it to the trace's
# demand): the jobs a what-if replays ran on the policy it clones, give or take the
# story's edits, maintenance windows and exceptions.
HISTORY_SEED = 2017
CHECKPOINT_INTERVAL = 1800
RESTART_OVERHEAD = 120
# Interruption contracts (spec v2) of some teams' training, as their workload classes
# would give them: the class name copied onto each job, and its contract. The others
# have the standard one (`HISTORY_DEFAULT_CONTRACT`). Borrowers with a contract make a
# lender wait for its capacity: the dashboard's time to reclaim is not 0 s.
HISTORY_DEFAULT_CONTRACT = ("standard-training", {"grace": 60, "checkpoint_on_notice": 30})
HISTORY_CONTRACTS = {
    "vc-6214e9": (
        "checkpointing-training",
        {"min_runtime_reclaim": 600, "grace": 120, "checkpoint_on_notice": 60},
    ),
    "vc-b436b2": ("long-training", {"min_runtime_reclaim": 1800, "grace": 300}),
    "vc-ee9e8c": ("graceful-batch", {"grace": 120, "checkpoint_on_notice": 90}),
    "vc-7f04ca": ("protected-finetune", {"min_runtime_preempt": 900}),
}
HISTORY_CLASS_DESCRIPTIONS = {
    "standard-training": "Training that saves a checkpoint within 30 s of notice.",
    "checkpointing-training": "Protected for 10 minutes after each start; checkpoints "
    "within a minute of notice.",
    "long-training": "Long runs: protected from reclaim for 30 minutes, 5 minutes of notice, "
    "no checkpoint on notice.",
    "graceful-batch": "Batch work given 2 minutes of notice to save and exit.",
    "protected-finetune": "Fine-tuning protected for 15 minutes from in-share preemption.",
}


def history_class(share: str) -> str:
    """The workload class of a replayed share's jobs (its default class on the queue)."""
    return _history_contract(share)[0]


def seed_workload_classes(actor) -> None:
    """The classes whose contracts the replayed history's jobs carry, as an import (it
    applies at once and is recorded, also when policy changes need review)."""
    from governance.policy.workload_classes import workload_class_save

    classes = [HISTORY_DEFAULT_CONTRACT, *HISTORY_CONTRACTS.values()]
    existing = set(WorkloadClass.objects.values_list("name", flat=True))
    for name, contract in classes:
        if name in existing:
            continue
        data = {
            "name": name,
            "description": HISTORY_CLASS_DESCRIPTIONS.get(name, ""),
            "min_runtime_reclaim": 0,
            "min_runtime_preempt": 0,
            "grace": 0,
            "checkpoint_on_notice": None,
            **contract,
        }
        workload_class_save(
            actor=actor,
            data=data,
            reason="Demo: the workload classes of the Philly teams' training.",
            cause=PolicyChange.Cause.IMPORT,
        )


@dataclass
class HistorySummary:
    months: list[dt.date] = field(default_factory=list)
    jobs: int = 0
    events: int = 0
    policy_changes: int = 0
    exceptions: int = 0
    seconds: float = 0.0
    skipped: str = ""


def _month_floor(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _months_back(month: dt.datetime, count: int) -> dt.datetime:
    for _ in range(count):
        month = (month - dt.timedelta(days=1)).replace(day=1)
    return month


def _history_contract(share: str) -> tuple[str, dict]:
    """(workload class, contract) of a replayed share's jobs."""
    return HISTORY_CONTRACTS.get(share, HISTORY_DEFAULT_CONTRACT)


def _trace_jobs(days: float) -> list[dict]:
    """The trace's jobs of the window, on the demo queue's share and type names."""
    options = TraceOptions(
        seed=HISTORY_SEED,
        checkpoint_interval=CHECKPOINT_INTERVAL,
        restart_overhead=RESTART_OVERHEAD,
        start=TRACE_START,
        days=days,
    )
    document = build_scenario(read_trace(), read_vc_sizes(), options)
    for job in document["jobs"]:
        job["share"] = f"vc-{job['share']}"
        job["instance_type"] = HISTORY_TYPE
        job.update(_history_contract(job["share"])[1])
    return document["jobs"]


def seed_history(*, months: int = 3, end: dt.datetime | None = None) -> HistorySummary:
    """Replay `months` full months of the Philly trace, ending at the start of `end`'s
    month (default: now), onto the demo's `philly` queue; then refresh their rollups.

    Needs seed_demo's queue, users and urgency definitions. Idempotent: a queue that
    already holds replayed jobs is left as it is.
    """
    from django.contrib.auth import get_user_model

    from governance.dashboards.rollups import rollups_refresh

    started = time.perf_counter()
    summary = HistorySummary()
    queue = JobQueue.objects.filter(name=HISTORY_QUEUE).first()
    if queue is None:
        summary.skipped = f"no queue named {HISTORY_QUEUE!r}: run seed_demo first"
        return summary
    if Job.objects.filter(queue=queue, name__startswith=HISTORY_PREFIX).exists():
        summary.skipped = "the history is already there"
        return summary
    users = {
        u.username: u
        for u in get_user_model().objects.filter(username__in=("admin", "lead", "owner"))
    }
    urgencies = list(UrgencyDefinition.objects.order_by("name"))
    end_month = _month_floor(end or timezone.now())
    origin = _months_back(end_month, months)
    shares = {share.name: share for share in queue.shares.select_related("team")}

    story = PolicyStory(
        queue=queue,
        instance_type=HISTORY_TYPE,
        shares=shares,
        origin=origin,
        end=end_month,
        rng=random.Random(HISTORY_SEED),
        admin=users.get("admin"),
        lead=users.get("lead"),
        owner=users.get("owner"),
        urgencies=urgencies,
    )
    document = {
        "name": "philly-history",
        "queue": {"capacity": {HISTORY_TYPE: story.capacity}},
        "shares": [story.share_doc(name) for name in shares],
    }
    for doc in document["shares"]:
        doc.pop("team")
    month = origin
    while month < end_month:
        summary.months.append(month.date())
        following = _months_back(month + dt.timedelta(days=40), 0).replace(day=1)
        story.month(month, following)
        month = following
    days = (end_month - origin).total_seconds() / 86400
    document["jobs"] = [job for job in _trace_jobs(days) if job["share"] in shares]
    document["actions"] = sorted(story.actions, key=lambda action: action["at"])
    scenario = load_scenario(document)
    result = simulate(scenario)
    with transaction.atomic():
        loaded = result_load(
            scenario=scenario,
            result=result,
            queue=queue,
            shares=shares,
            instance_types={HISTORY_TYPE: InstanceType.objects.get(name=HISTORY_TYPE)},
            origin=origin,
            name_prefix=HISTORY_PREFIX,
            until=end_month,
            workload_classes={share: _history_contract(share)[0] for share in shares},
        )
        summary.policy_changes, summary.exceptions = story_records_write(story, queue)
        job_tables_analyze()
    for month in summary.months:
        rollups_refresh(month=month)
    summary.jobs, summary.events = loaded.jobs, loaded.events
    summary.seconds = time.perf_counter() - started
    return summary
