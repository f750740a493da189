"""Workloads of a what-if comparison: the jobs both policies are replayed on.

Three sources, all giving scenario-format jobs whose `share` names a share of the
cloned (current) policy:

- the jobs recorded on the queue in a period (default: the 30 days up to its last
  submission, the last 30 days on a queue in use);
- a window of the bundled Philly trace (start date + days), through the engine's
  trace reader;
- an uploaded CSV in the same (Philly) format, checked row by row: every bad row is
  reported with its line number and reason, and nothing is kept.

Jobs map to shares by an explicit mapping, team -> share (`Workload.mapping`), shown
and editable before the run. A trace row names a team (a virtual cluster), not a
share; by default a team goes to the share named like it, else to the share whose team
is named like it, else to the one share named `<prefix>-<team>` (`vc-6c71a0`), else to
the one share whose team is named so (`default_share`). A recorded job's "team" is the
share it was submitted to, by default that share. The jobs of a team mapped to no
share are left out of the replay, and the mapping says which and how many.

Every trace job runs on the queue's largest instance type (most instances, then name), with
`ceil(num_gpus x scale / GPUs per instance)` instances (at least 1): `scale` shrinks
the trace's demand to a small fleet. Jobs too large for the policy are kept; the
engine reports them as never able to run.

Each workload also gives the workload class of its jobs (`Workload.classes`, job id ->
class name, jobs without a class left out), so that a what-if can replay a class's jobs
under another contract: a recorded job's class is the name it copied at submission
(`Job.workload_class`, kept even if the class was renamed since); a trace job's is its
share's default class when the workload is chosen (a trace names no job definition).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from django.db.models import Count

from core.errors import InvalidInput
from engine.trace import DEFAULT_TRACE, TIMESTAMP_FORMAT, TraceRow, read_trace
from fleet.bridge import job_pk, recorded_jobs
from fleet.models import Job, QuotaShare

DEFAULT_DAYS = 30
PHILLY_DEFAULT_START = dt.date(2017, 10, 1)
TRACE_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
MAX_UPLOAD_ROWS = 100_000
MAX_ERRORS_SHOWN = 20


class WorkloadError(InvalidInput):
    """The workload cannot be built. `problems` are readable lines (`line 4: ...`), the
    messages of the field `workload`."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems) or ["invalid workload"]
        super().__init__({"workload": self.problems})


@dataclass(frozen=True)
class Workload:
    jobs: list[dict]
    description: str
    params: dict
    # Job id -> workload class name, for the jobs that have one.
    classes: dict[str, str] = field(default_factory=dict)
    # Team -> share, as build_mapping stores it.
    mapping: dict = field(default_factory=dict)


# -- the mapping, team -> share ----------------------------------------------------------

TRACE_TEAMS = "trace"
RECORDED_TEAMS = "recorded"
# How a default was found, shown beside it.
MATCHED_SHARE = "share of that name"
MATCHED_TEAM = "share of the team of that name"
MATCHED_PREFIXED_SHARE = "share named …-{team}"
MATCHED_PREFIXED_TEAM = "share of the team named …-{team}"


def default_share(team: str, shares: Sequence[Mapping]) -> tuple[str | None, str]:
    """The share a team's jobs go to by default, and how it was found: the share named
    like the team; else the one share whose team is named so; else the one share named
    `<prefix>-<team>` (`vc-6c71a0` for the trace's `6c71a0`); else the one share whose
    team is named so. Two candidates at one step are no match: the admin chooses."""
    names = [share["name"] for share in shares]
    if team in names:
        return team, MATCHED_SHARE
    steps = (
        ([s["name"] for s in shares if s.get("team") == team], MATCHED_TEAM),
        ([name for name in names if name.endswith(f"-{team}")], MATCHED_PREFIXED_SHARE),
        (
            [s["name"] for s in shares if (s.get("team") or "").endswith(f"-{team}")],
            MATCHED_PREFIXED_TEAM,
        ),
    )
    for candidates, how in steps:
        if len(candidates) == 1:
            return candidates[0], how.format(team=team)
    return None, ""


def mapping_check(
    chosen: Mapping, *, teams: Collection[str], share_names: Collection[str]
) -> dict[str, str | None]:
    """The admin's choices ({team: share name, or "" / None to leave its jobs out}),
    or InvalidInput keyed `mapping.<team>` naming what is wrong."""
    if not isinstance(chosen, Mapping):
        raise InvalidInput({"mapping": ['give {team: share name} ("" leaves a team out)']})
    errors: dict[str, list[str]] = {}
    cleaned: dict[str, str | None] = {}
    for team, share in chosen.items():
        key = f"mapping.{team}"
        if team not in teams:
            errors[key] = [f"no team '{team}' in this workload"]
        elif share in (None, ""):
            cleaned[team] = None
        elif not isinstance(share, str) or share not in share_names:
            errors[key] = [
                f"no share named '{share}' in the cloned policy "
                f"(one of {', '.join(sorted(share_names))}, or empty to leave it out)"
            ]
        else:
            cleaned[team] = share
    if errors:
        raise InvalidInput(errors)
    return cleaned


def build_mapping(
    counts: Mapping[str, int],
    *,
    shares: Sequence[Mapping],
    chosen: Mapping | None = None,
    source: str = TRACE_TEAMS,
) -> dict:
    """The stored mapping of a workload whose teams have `counts` jobs: per team (most
    jobs first, then name) its jobs, its default share and how it was found, and its
    share: the admin's choice where there is one (mapping_check), else the default.
    A team whose share is None is left out of the replay."""
    chosen = mapping_check(
        chosen or {}, teams=counts, share_names=[share["name"] for share in shares]
    )
    teams = []
    for team in sorted(counts, key=lambda name: (-counts[name], name)):
        default, how = default_share(team, shares)
        teams.append(
            {
                "team": team,
                "jobs": counts[team],
                "default": default,
                "matched": how,
                "chosen": team in chosen,
                "share": chosen.get(team, default),
            }
        )
    return {"source": source, "teams": teams}


def mapped_shares(mapping: Mapping) -> dict[str, str | None]:
    """Team -> its share (None: left out) of a stored mapping."""
    return {entry["team"]: entry["share"] for entry in mapping.get("teams", [])}


def left_out(mapping: Mapping) -> list[tuple[str, int]]:
    """(team, jobs) of the teams mapped to no share, in the mapping's order."""
    return [
        (entry["team"], entry["jobs"])
        for entry in mapping.get("teams", [])
        if entry["share"] is None
    ]


def left_out_text(mapping: Mapping) -> str:
    """ "; 18 jobs of 4 teams mapped to no share are left out" or ""."""
    teams = left_out(mapping)
    if not teams:
        return ""
    jobs = sum(count for _team, count in teams)
    return (
        f"; {jobs:,} job{'s' if jobs != 1 else ''} of {len(teams)} "
        f"team{'s' if len(teams) != 1 else ''} mapped to no share "
        f"{'is' if jobs == 1 else 'are'} left out"
    )


# -- the jobs recorded on the queue -------------------------------------------------------


def recorded_workload(
    *,
    queue,
    policy: dict,
    refs: Sequence[dict],
    start: dt.datetime,
    end: dt.datetime,
    mapping: Mapping | None = None,
) -> Workload:
    """The queue's jobs submitted in [start, end), as they were submitted (the engine
    replays them from their submission; what happened to them live does not matter),
    the replay's time 0 being the first submission, through the live scheduler's
    adapter (`fleet.bridge.recorded_jobs`: the same job ids and seconds).
    A job's team is the share it was submitted to (its name as cloned; a share made
    since goes by its name now), mapped by `mapping` (build_mapping) or by default to
    the share of that name. Jobs of an instance type the policy no longer has are left
    out."""
    if end <= start:
        raise WorkloadError(["the period must end after it starts"])
    cloned = {ref["id"]: share["name"] for ref, share in zip(refs, policy["shares"], strict=True)}
    period = Job.objects.filter(
        queue=queue,
        submitted_at__gte=start,
        submitted_at__lt=end,
        instance_type__name__in=list(policy["queue"]["capacity"]),
    )
    per_share = dict(
        period.order_by()
        .values("share_id")
        .annotate(jobs=Count("id"))
        .values_list("share_id", "jobs")
    )
    live = dict(
        QuotaShare.objects.filter(pk__in=set(per_share) - set(cloned)).values_list("pk", "name")
    )
    team_of = {pk: cloned.get(pk) or live[pk] for pk in per_share}
    counts: dict[str, int] = {}
    for pk, jobs in per_share.items():
        counts[team_of[pk]] = counts.get(team_of[pk], 0) + jobs
    stored = build_mapping(counts, shares=policy["shares"], chosen=mapping, source=RECORDED_TEAMS)
    share_of = mapped_shares(stored)
    share_names = {pk: share_of[team] for pk, team in team_of.items() if share_of[team]}
    jobs = recorded_jobs(
        queue,
        start=start,
        end=end,
        share_names=share_names,
        instance_types=policy["queue"]["capacity"],
    )
    description = (
        f"{len(jobs)} jobs recorded on {queue.name} from {start:%Y-%m-%d %H:%M} "
        f"to {end:%Y-%m-%d %H:%M} UTC{left_out_text(stored)}"
    )
    params = {"start": start.isoformat(), "end": end.isoformat()}
    copied = dict(
        Job.objects.filter(queue=queue, submitted_at__gte=start, submitted_at__lt=end)
        .exclude(workload_class="")
        .values_list("id", "workload_class")
    )
    classes = {job["id"]: copied[pk] for job in jobs if (pk := job_pk(job["id"])) in copied}
    return Workload(
        jobs=jobs, description=description, params=params, classes=classes, mapping=stored
    )


def share_default_classes(jobs: Sequence[Mapping], share_classes: Mapping[str, str]) -> dict:
    """Job id -> the default class of the job's share (`share_classes`: share name ->
    class name, shares without a default left out): the class of a trace job."""
    return {job["id"]: share_classes[job["share"]] for job in jobs if job["share"] in share_classes}


def default_period(now: dt.datetime, *, queue=None) -> tuple[dt.datetime, dt.datetime]:
    """The recorded workload's default period: the `DEFAULT_DAYS` days up to the last
    job submitted on `queue` (to the minute after it), or up to `now` when that is
    sooner or the queue has none. On a queue in use that is the last 30 days; on one
    whose jobs stopped coming (the demo's replayed months end at the month's start)
    it is the last 30 days that hold jobs, never an empty period."""
    end = now
    if queue is not None:
        last = (
            Job.objects.filter(queue=queue, submitted_at__lte=now)
            .order_by("-submitted_at")
            .values_list("submitted_at", flat=True)
            .first()
        )
        if last is not None:
            end = min(now, last.replace(second=0, microsecond=0) + dt.timedelta(minutes=1))
    return end - dt.timedelta(days=DEFAULT_DAYS), end


# -- trace rows -> jobs ------------------------------------------------------------------


def _largest_type(capacity: dict[str, int]) -> str:
    return min(capacity, key=lambda name: (-capacity[name], name))


def trace_jobs(
    rows: Iterable[TraceRow],
    *,
    capacity: dict[str, int],
    share_of: Mapping[str, str | None],
    gpus_per_instance: dict[str, int],
    scale: float,
    origin: dt.datetime | None = None,
) -> list[dict]:
    """Scenario jobs of trace rows whose team `share_of` maps to a share (the others are
    left out): ordered by time then file position (the engine's trace tie-break), ids
    `j00000`... counted over every row (so a mapping change renames no job), submit
    times from `origin` (default: the first row)."""
    ordered = sorted(rows, key=lambda row: (row.submitted, row.position))
    if not ordered:
        return []
    origin = origin or ordered[0].submitted
    itype = _largest_type(capacity)
    gpus = gpus_per_instance.get(itype, 1)
    jobs = []
    for number, row in enumerate(ordered):
        share = share_of.get(row.vc)
        if share is None:
            continue
        jobs.append(
            {
                "id": f"j{number:05d}",
                "share": share,
                "priority": 0,
                "instance_type": itype,
                "instances": max(1, math.ceil(row.gpus * scale / gpus)),
                "submit_at": int((row.submitted - origin).total_seconds()),
                "duration": max(1, math.ceil(row.duration)),
            }
        )
    return jobs


def trace_mapping(rows: Sequence[TraceRow], *, policy: dict, chosen: Mapping | None) -> dict:
    """build_mapping of the rows' teams (virtual clusters)."""
    return build_mapping(Counter(row.vc for row in rows), shares=policy["shares"], chosen=chosen)


def _check_scale(scale) -> float:
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not 0 < scale <= 100:
        raise WorkloadError(["scale: must be a number above 0 and at most 100"])
    return float(scale)


_TRACE_CACHE: dict[str, list[TraceRow]] = {}


def _philly_rows() -> list[TraceRow]:
    """The bundled trace, read once per process (it never changes at run time)."""
    key = str(DEFAULT_TRACE)
    if key not in _TRACE_CACHE:
        _TRACE_CACHE[key] = read_trace(DEFAULT_TRACE)
    return _TRACE_CACHE[key]


def philly_workload(
    *,
    policy: dict,
    gpus_per_instance: dict[str, int],
    start: dt.date = PHILLY_DEFAULT_START,
    days: float = DEFAULT_DAYS,
    scale: float = 1.0,
    share_classes: Mapping[str, str] | None = None,
    mapping: Mapping | None = None,
) -> Workload:
    """The Philly jobs submitted in [start, start + days), their teams mapped to shares
    by `mapping` over the defaults (build_mapping); `share_classes` (share name ->
    default class) gives the jobs their classes."""
    scale = _check_scale(scale)
    if not isinstance(days, (int, float)) or not 0 < days <= 120:
        raise WorkloadError(["days: must be more than 0 and at most 120"])
    origin = dt.datetime.combine(start, dt.time())
    end = origin + dt.timedelta(days=days)
    rows = [row for row in _philly_rows() if origin <= row.submitted < end]
    if not rows:
        raise WorkloadError(
            ["the Philly trace has no job in that window: it runs from 2017-09-04 to 2017-12-22"]
        )
    stored = trace_mapping(rows, policy=policy, chosen=mapping)
    jobs = trace_jobs(
        rows,
        capacity=policy["queue"]["capacity"],
        share_of=mapped_shares(stored),
        gpus_per_instance=gpus_per_instance,
        scale=scale,
        origin=origin,
    )
    description = (
        f"{len(jobs)} jobs of the Philly trace from {start:%Y-%m-%d} for {days:g} days, "
        f"GPU demand x {scale:g} (Microsoft Philly trace, CC BY 4.0){left_out_text(stored)}"
    )
    params = {"start": start.isoformat(), "days": days, "scale": scale}
    classes = share_default_classes(jobs, share_classes or {})
    return Workload(
        jobs=jobs, description=description, params=params, classes=classes, mapping=stored
    )


# -- uploaded CSV ---------------------------------------------------------------------


def _parse_row(record: dict, line: int, position: int) -> tuple[TraceRow | None, list[str]]:
    problems = []
    submitted = None
    try:
        submitted = dt.datetime.strptime((record.get("timestamp") or "").strip(), TIMESTAMP_FORMAT)
    except ValueError:
        problems.append(f"line {line}: timestamp must look like 2017-10-09 07:01:55")
    duration = None
    try:
        duration = float(record.get("duration") or "")
        if not math.isfinite(duration) or duration <= 0:
            problems.append(f"line {line}: duration must be a number of seconds above 0")
    except ValueError:
        problems.append(f"line {line}: duration must be a number of seconds above 0")
    gpus = None
    try:
        gpus = int((record.get("num_gpus") or "").strip())
        if gpus < 1:
            problems.append(f"line {line}: num_gpus must be a whole number, at least 1")
    except ValueError:
        problems.append(f"line {line}: num_gpus must be a whole number, at least 1")
    gpu_time = (record.get("gpu_time") or "").strip()
    if gpu_time:
        try:
            float(gpu_time)
        except ValueError:
            problems.append(f"line {line}: gpu_time must be a number (or empty)")
    cluster = (record.get("cluster") or "").strip()
    if not cluster:
        problems.append(f"line {line}: cluster is empty; name a share or a virtual cluster")
    if problems:
        return None, problems
    return TraceRow(
        submitted=submitted, duration=duration, gpus=gpus, vc=cluster, position=position
    ), []


def read_upload(raw: bytes) -> list[TraceRow]:
    """Rows of an uploaded Philly-format CSV, or WorkloadError listing every bad row."""
    if len(raw) > MAX_UPLOAD_BYTES:
        raise WorkloadError([f"the file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB"])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise WorkloadError(["the file is not UTF-8 text: save it as CSV (UTF-8)"]) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [name.strip() for name in (reader.fieldnames or [])]
    missing = [name for name in TRACE_COLUMNS if name not in header]
    if missing:
        raise WorkloadError(
            [
                f"line 1: the header must name the columns {', '.join(TRACE_COLUMNS)}; "
                f"missing {', '.join(missing)}"
            ]
        )
    reader.fieldnames = header
    rows, problems = [], []
    for position, record in enumerate(reader):
        line = reader.line_num
        if not any((value or "").strip() for value in record.values() if isinstance(value, str)):
            continue  # blank line
        if None in record:
            problems.append(f"line {line}: more values than the {len(header)} columns")
            continue
        row, row_problems = _parse_row(record, line, position)
        problems += row_problems
        if row is not None:
            rows.append(row)
        if len(rows) > MAX_UPLOAD_ROWS:
            raise WorkloadError([f"the file has more than {MAX_UPLOAD_ROWS:,} jobs"])
    if problems:
        shown = problems[:MAX_ERRORS_SHOWN]
        if len(problems) > MAX_ERRORS_SHOWN:
            shown.append(f"... and {len(problems) - MAX_ERRORS_SHOWN} more problems")
        raise WorkloadError(shown)
    if not rows:
        raise WorkloadError(["the file has a header but no jobs"])
    return rows


def stored_rows(rows: Sequence[TraceRow]) -> list[list]:
    """An upload's rows as the mapping keeps them (so it can be mapped again without
    the file): [timestamp, duration, GPUs, cluster] in file order."""
    return [
        [row.submitted.strftime(TIMESTAMP_FORMAT), row.duration, row.gpus, row.vc]
        for row in sorted(rows, key=lambda row: row.position)
    ]


def rows_of(stored: Sequence[Sequence]) -> list[TraceRow]:
    return [
        TraceRow(
            submitted=dt.datetime.strptime(submitted, TIMESTAMP_FORMAT),
            duration=duration,
            gpus=gpus,
            vc=vc,
            position=position,
        )
        for position, (submitted, duration, gpus, vc) in enumerate(stored)
    ]


def upload_workload(
    *,
    raw: bytes | None = None,
    rows: Sequence[TraceRow] | None = None,
    filename: str,
    policy: dict,
    gpus_per_instance: dict[str, int],
    scale: float = 1.0,
    share_classes: Mapping[str, str] | None = None,
    mapping: Mapping | None = None,
) -> Workload:
    """The jobs of an uploaded trace (`raw`, checked by read_upload), or of its rows as
    the mapping kept them (`rows`, when it is mapped again)."""
    scale = _check_scale(scale)
    rows = read_upload(raw) if rows is None else list(rows)
    stored = trace_mapping(rows, policy=policy, chosen=mapping)
    jobs = trace_jobs(
        rows,
        capacity=policy["queue"]["capacity"],
        share_of=mapped_shares(stored),
        gpus_per_instance=gpus_per_instance,
        scale=scale,
    )
    description = (
        f"{len(jobs)} jobs from the uploaded trace {filename}, GPU demand x {scale:g}"
        f"{left_out_text(stored)}"
    )
    return Workload(
        jobs=jobs,
        description=description,
        params={"filename": filename, "scale": scale},
        classes=share_default_classes(jobs, share_classes or {}),
        mapping={**stored, "rows": stored_rows(rows)},
    )
