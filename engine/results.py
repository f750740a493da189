"""The result of a simulation and its JSON document (the spec's "Result").

`Event` and `JobOutcome` are named tuples rather than frozen dataclasses: a replay of
the Philly trace makes hundreds of thousands of them, and a tuple is several times
cheaper to build while being just as immutable.

`dump_result` is byte-identical for identical input: keys are sorted wherever the spec
does not fix an order, and events stay in the order they happened (time, then the order
within the instant).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

from .stats import nearest_rank


class Event(NamedTuple):
    t: int
    type: str
    job: str
    share: str
    borrowed: bool | None = None
    cause: str | None = None
    by: str | None = None
    grace_until: int | None = None  # on a PREEMPTED with notice (spec v2)


class JobOutcome(NamedTuple):
    """One job's end state. For a FAILED job `reason` is the failure cause, and
    `finished_at` the time it failed; a job still RUNNABLE at the end (it can never
    finish) keeps its reason and counts as waiting until the last instant processed
    (the makespan, or a later action)."""

    id: str
    state: str
    reason: str | None
    share: str
    submitted_at: int
    first_started_at: int | None
    finished_at: int | None
    preemptions: int
    ran_borrowed: bool
    lost_work: int
    restart_overhead: int
    waiting_time: int
    notice_time: int = 0  # spec v2: seconds STOPPING, over its notices
    protected_blocks: int = 0  # spec v2, V4


@dataclass(frozen=True)
class SimulationResult:
    """`shares` are the scenario's share names in listed order. `contracts`: a v2
    document, whose result has the v2 fields (spec V12); `reclaims` are its reclaim
    episodes' lengths, in the order they ended, and `reclaim_episodes` the same episodes
    as (job id, begin, start) (in memory only: not part of the dumped document, whose
    bytes stay those of the spec; the dashboard's history writes each start's wait)."""

    scenario: str
    shares: tuple[str, ...]
    makespan: int
    jobs: tuple[JobOutcome, ...]
    events: tuple[Event, ...]
    contracts: bool = False
    reclaims: tuple[int, ...] = ()
    reclaim_episodes: tuple[tuple[str, int, int], ...] = ()

    @property
    def time_to_reclaim(self) -> dict:
        """V12: count, max and lower median of the reclaim episodes (None when none)."""
        ordered = sorted(self.reclaims)
        count = len(ordered)
        return {
            "count": count,
            "max": ordered[-1] if count else None,
            "p50": ordered[(count - 1) // 2] if count else None,
        }


def _event_to_json(event: Event) -> dict:
    document = {"t": event.t, "type": event.type, "job": event.job, "share": event.share}
    if event.type == "STARTED":
        document["borrowed"] = event.borrowed
    elif event.type == "PREEMPTED":
        document["cause"] = event.cause
        document["by"] = event.by
        if event.grace_until is not None:
            document["grace_until"] = event.grace_until
    elif event.type == "FAILED":
        document["cause"] = event.cause
    elif event.type == "STOPPED":
        document["cause"] = event.cause
        if event.by is not None:
            document["by"] = event.by
    return document


def result_to_json(result: SimulationResult) -> dict:
    """The result document of the spec (PREEMPTED always carries `by`, null if none);
    a v2 document's has the v2 fields too (V12), a v1 document's none of them (V2)."""
    document = {
        "scenario": result.scenario,
        "makespan": result.makespan,
        "jobs": {
            job.id: {
                "state": job.state,
                "reason": job.reason,
                "share": job.share,
                "submitted_at": job.submitted_at,
                "first_started_at": job.first_started_at,
                "finished_at": job.finished_at,
                "preemptions": job.preemptions,
                "ran_borrowed": job.ran_borrowed,
                "lost_work": job.lost_work,
                "restart_overhead": job.restart_overhead,
                "waiting_time": job.waiting_time,
            }
            for job in result.jobs
        },
        "events": [_event_to_json(event) for event in result.events],
    }
    if result.contracts:
        for job in result.jobs:
            fields = document["jobs"][job.id]
            fields["notice_time"] = job.notice_time
            fields["protected_blocks"] = job.protected_blocks
        document["time_to_reclaim"] = result.time_to_reclaim
    return document


def dump_result(result: SimulationResult, pretty: bool = False) -> str:
    return dump_json(result_to_json(result), pretty)


def dump_json(document: dict, pretty: bool = False) -> str:
    """A document as `dump_result` writes it: sorted keys, ASCII, compact or 2-space indent."""
    if pretty:
        return json.dumps(document, sort_keys=True, indent=2)
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


# -- the human summary ------------------------------------------------------------------


@dataclass(frozen=True)
class ShareSummary:
    share: str
    jobs: int
    finished: int
    failed: int
    runnable: int
    turnaround_p50: int | None
    turnaround_p90: int | None
    mean_waiting: int
    preemptions: int
    lost_work: int


def summarize(result: SimulationResult) -> list[ShareSummary]:
    """Per share (listed order; shares without jobs omitted): counts, turnaround
    (submission to success, nearest-rank percentiles), mean waiting, preemptions, lost work."""
    by_share: dict[str, list[JobOutcome]] = {share: [] for share in result.shares}
    for job in result.jobs:
        by_share[job.share].append(job)
    rows = []
    for share, jobs in by_share.items():
        if not jobs:
            continue
        turnaround = sorted(
            job.finished_at - job.submitted_at for job in jobs if job.state == "SUCCEEDED"
        )
        rows.append(
            ShareSummary(
                share=share,
                jobs=len(jobs),
                finished=len(turnaround),
                failed=sum(job.state == "FAILED" for job in jobs),
                runnable=sum(job.state == "RUNNABLE" for job in jobs),
                turnaround_p50=nearest_rank(turnaround, 50),
                turnaround_p90=nearest_rank(turnaround, 90),
                mean_waiting=round(sum(job.waiting_time for job in jobs) / len(jobs)),
                preemptions=sum(job.preemptions for job in jobs),
                lost_work=sum(job.lost_work for job in jobs),
            )
        )
    return rows


def format_seconds(seconds: int | None) -> str:
    """A duration for people: `45s`, `12m 05s`, `3h 20m`, `2d 04h`; `-` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600:02d}h"


def format_summary(result: SimulationResult) -> str:
    header = (
        "share",
        "jobs",
        "finished",
        "failed",
        "runnable",
        "turnaround p50",
        "turnaround p90",
        "mean wait",
        "preemptions",
        "lost work",
    )
    table = [header]
    for row in summarize(result):
        table.append(
            (
                row.share,
                str(row.jobs),
                str(row.finished),
                str(row.failed),
                str(row.runnable),
                format_seconds(row.turnaround_p50),
                format_seconds(row.turnaround_p90),
                format_seconds(row.mean_waiting),
                str(row.preemptions),
                format_seconds(row.lost_work),
            )
        )
    widths = [max(len(line[column]) for line in table) for column in range(len(header))]
    lines = [f"scenario {result.scenario}: makespan {format_seconds(result.makespan)}"]
    for line in table:
        cells = [line[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines)
