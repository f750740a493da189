"""Replays a scenario document through the live services with a controllable clock.

The queue, shares and jobs become database rows; time is `EPOCH + t` seconds and is
passed to every service as `now`, so nothing sleeps. At each instant the order is the
spec's (rule 9): finishing jobs, actions, submissions, then the pass. The instants are
the next submission, action or modelled finish, a protection's end and a runnable
time-limit expiry: exactly the instants at which the simulator runs passes.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction

from engine.types import MISCONFIGURATION_REASONS
from fleet.locks import lock_queue
from fleet.models import (
    CapacityLimit,
    InstanceType,
    Job,
    JobEvent,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
)
from scheduler.services.jobs import JobData, job_set_priority, job_submit, job_terminate
from scheduler.services.passes import finish_due, scheduling_pass, stop_due
from scheduler.work import finish_at
from tests.factories import job_definition

EPOCH = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
CONTRACT_FIELDS = ("min_runtime_reclaim", "min_runtime_preempt", "grace", "checkpoint_on_notice")


def at(t: int) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=t)


def seconds(moment: dt.datetime | None) -> int | None:
    return None if moment is None else round((moment - EPOCH).total_seconds())


def _types(names) -> dict[str, InstanceType]:
    return {name: InstanceType.objects.get_or_create(name=name)[0] for name in names}


def _set_limits(share: QuotaShare, limits: dict, types: dict) -> None:
    share.limits.all().delete()
    for name, count in limits.items():
        CapacityLimit.objects.create(share=share, instance_type=types[name], max_instances=count)


def build_queue(doc: dict) -> JobQueue:
    queue_doc = doc["queue"]
    queue = JobQueue.objects.create(
        name=doc["name"],
        default_preemption_retries=queue_doc.get("default_preemption_retries"),
        runnable_time_limit=queue_doc.get("runnable_time_limit"),
    )
    names = set(queue_doc["capacity"])
    for share in doc["shares"]:
        names |= set(share["capacity_limits"])
    types = _types(names)
    for name, count in queue_doc["capacity"].items():
        QueueCapacity.objects.create(queue=queue, instance_type=types[name], instances=count)
    for position, share_doc in enumerate(doc["shares"]):
        strategy = share_doc.get("strategy", "LEND")
        share = QuotaShare.objects.create(
            queue=queue,
            team=Team.objects.get_or_create(name=f"team-{share_doc['name']}")[0],
            name=share_doc["name"],
            strategy=strategy,
            borrow_limit=share_doc.get("borrow_limit", -1)
            if strategy == "LEND_AND_BORROW"
            else None,
            in_share_preemption=share_doc.get("in_share_preemption", False),
            state=share_doc.get("state", "ENABLED"),
            position=position,
        )
        _set_limits(share, share_doc["capacity_limits"], types)
    return queue


def _act(queue: JobQueue, action: dict, now: dt.datetime, jobs: dict[str, Job]) -> None:
    kind = action["type"]
    if kind == "set_priority":
        job_set_priority(job_id=jobs[action["job"]].pk, priority=action["priority"], now=now)
    elif kind == "terminate":
        job = Job.objects.get(pk=jobs[action["job"]].pk)
        if job.is_live:
            job_terminate(job_id=job.pk, now=now)
    elif kind == "update_share":
        share = QuotaShare.objects.get(queue=queue, name=action["share"])
        for key in ("strategy", "in_share_preemption", "state"):
            if key in action:
                setattr(share, key, action[key])
        if "borrow_limit" in action:
            share.borrow_limit = action["borrow_limit"]
        if share.strategy != "LEND_AND_BORROW":
            share.borrow_limit = None
        elif share.borrow_limit is None:
            share.borrow_limit = -1
        share.save()
        if "capacity_limits" in action:
            _set_limits(share, action["capacity_limits"], _types(action["capacity_limits"]))
    elif kind == "set_capacity":
        types = _types(action["capacity"])
        queue.capacities.all().delete()
        for name, count in action["capacity"].items():
            QueueCapacity.objects.create(queue=queue, instance_type=types[name], instances=count)
    else:  # pragma: no cover - the fixtures use only these
        raise ValueError(kind)


def _next_internal(queue: JobQueue, after: int) -> int | None:
    """The next modelled finish, protection end or time-limit expiry after `after`."""
    times = []
    for job in Job.objects.filter(queue=queue, state__in=Job.HOLDING_STATES):
        times.append(seconds(finish_at(job, 1.0)))
        if job.protected_until is not None:
            times.append(seconds(job.protected_until))
        if job.state == Job.State.STOPPING:
            times.append(seconds(job.stop_at))
        else:  # V5: the ends of its minimum runtimes are wake-ups
            for runtime in (job.min_runtime_reclaim, job.min_runtime_preempt):
                if runtime:
                    times.append(seconds(job.started_at) + runtime)
    limit = queue.runnable_time_limit
    if limit is not None:
        for since in Job.objects.filter(
            queue=queue,
            state=Job.State.RUNNABLE,
            reason__in=MISCONFIGURATION_REASONS,
            misconfigured_since__isnull=False,
        ).values_list("misconfigured_since", flat=True):
            times.append(seconds(since) + limit)
    return min((t for t in times if t > after), default=None)


def replay(doc: dict) -> tuple[JobQueue, dict[str, Job]]:
    """Run the scenario through the live services; returns the queue and jobs by id."""
    queue = build_queue(doc)
    # Scenario jobs give every work-model figure; the definition only lets them run.
    revision = job_definition(queue, name=f"scenario-{queue.pk}")
    shares = {share.name: share for share in queue.shares.select_related("queue", "team")}
    types = {t.name: t for t in InstanceType.objects.all()}
    # Same-instant submissions in id order, so the engine's id tie-break sees the same
    # order on zero-padded primary keys as on the scenario's ids.
    submissions = sorted(doc["jobs"], key=lambda job: (job.get("submit_at", 0), job["id"]))
    actions = sorted(enumerate(doc.get("actions", [])), key=lambda item: (item[1]["at"], item[0]))
    jobs: dict[str, Job] = {}
    last = -1
    while True:
        candidates = []
        if submissions:
            candidates.append(submissions[0].get("submit_at", 0))
        if actions:
            candidates.append(actions[0][1]["at"])
        internal = _next_internal(queue, after=last)
        if internal is not None:
            candidates.append(internal)
        if not candidates:
            break
        t = min(candidates)
        now = at(t)
        with transaction.atomic():
            locked = lock_queue(queue.pk)
            finish_due(locked, now=now)
            stop_due(locked, now=now)
        while actions and actions[0][1]["at"] == t:
            _act(queue, actions.pop(0)[1], now, jobs)
        while submissions and submissions[0].get("submit_at", 0) == t:
            spec = submissions.pop(0)
            share = shares[spec["share"]]
            share.refresh_from_db(fields=["state"])
            job = job_submit(
                data=JobData(
                    share=share,
                    name=spec["id"],
                    revision=revision,
                    instance_type=types[spec["instance_type"]],
                    instances=spec.get("instances", 1),
                    expected_duration=spec["duration"],
                    priority=spec.get("priority", 0),
                    checkpoint_interval=spec.get("checkpoint_interval"),
                    restart_overhead=spec.get("restart_overhead", 0),
                    preemption_retries=spec.get("preemption_retries"),
                ),
                now=now,
            )
            if spec.get("protected_until") is not None:
                Job.objects.filter(pk=job.pk).update(protected_until=at(spec["protected_until"]))
            # The contract (spec v2) as a workload class would have set it at submission.
            contract = {field: spec.get(field) or 0 for field in CONTRACT_FIELDS}
            contract["checkpoint_on_notice"] = spec.get("checkpoint_on_notice")
            Job.objects.filter(pk=job.pk).update(**contract)
            jobs[spec["id"]] = job
        scheduling_pass(queue_id=queue.pk, now=now)
        last = t
    return queue, {name: Job.objects.get(pk=job.pk) for name, job in jobs.items()}


def live_events(queue: JobQueue) -> list[dict]:
    """The lifecycle events in the result document's shape."""
    out = []
    for event in (
        JobEvent.objects.filter(job__queue=queue, type__in=JobEvent.LIFECYCLE)
        .select_related("job__share", "by")
        .order_by("at", "id")
    ):
        row = {
            "t": seconds(event.at),
            "type": event.type,
            "job": event.job.name,
            "share": event.job.share.name,
        }
        if event.type == JobEvent.Type.STARTED:
            row["borrowed"] = event.borrowed
        if event.cause:
            row["cause"] = event.cause
        if event.type == JobEvent.Type.PREEMPTED:
            row["by"] = event.by.name if event.by else None
        out.append(row)
    return _normalise(out)


def _normalise(events: list[dict]) -> list[dict]:
    """Submissions at one instant sorted by job (the replay submits them in id order)."""
    out: list[dict] = []
    run: list[dict] = []
    for event in [*events, None]:
        if (
            event is not None
            and event["type"] == "SUBMITTED"
            and (not run or run[0]["t"] == event["t"])
        ):
            run.append(event)
            continue
        out += sorted(run, key=lambda e: e["job"])
        run = []
        if event is not None:
            if event["type"] == "SUBMITTED":
                run.append(event)
            else:
                out.append(event)
    return out


def simulated_events(result: dict) -> list[dict]:
    keep = ("t", "type", "job", "share", "borrowed", "cause", "by")
    events = []
    for event in result["events"]:
        row = {key: event[key] for key in keep if key in event}
        if row["type"] != "PREEMPTED":
            row.pop("by", None)
        if row["type"] != "STARTED":
            row.pop("borrowed", None)
        events.append(row)
    return _normalise(events)
