"""Workloads of a what-if comparison: the jobs both policies are replayed on.

Three sources, all giving scenario-format jobs whose `share` names a share of the
cloned (current) policy:

- the jobs recorded on the queue in a period (default: the last 30 days);
- a window of the bundled Philly trace (start date + days), through the engine's
  trace reader;
- an uploaded CSV in the same (Philly) format, checked row by row: every bad row is
  reported with its line number and reason, and nothing is kept.

A trace row names a virtual cluster, not a share: a cluster with the name of a share
goes to that share, every other cluster to the shares in turn (in the order the
clusters first appear, in the policy's share order). Every trace job runs on the
queue's largest instance type (most instances, then name), with
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from core.errors import InvalidInput
from engine.trace import DEFAULT_TRACE, TIMESTAMP_FORMAT, TraceRow, read_trace
from fleet.bridge import job_pk, recorded_jobs
from fleet.models import Job

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


# -- the jobs recorded on the queue -------------------------------------------------------


def recorded_workload(
    *, queue, policy: dict, refs: Sequence[dict], start: dt.datetime, end: dt.datetime
) -> Workload:
    """The queue's jobs submitted in [start, end), as they were submitted (the engine
    replays them from their submission; what happened to them live does not matter),
    the replay's time 0 being the first submission, through the live scheduler's
    adapter (`fleet.bridge.recorded_jobs`: the same job ids and seconds).
    Jobs of a share or an instance type the policy no longer has are left out."""
    if end <= start:
        raise WorkloadError(["the period must end after it starts"])
    share_name = {
        ref["id"]: share["name"] for ref, share in zip(refs, policy["shares"], strict=True)
    }
    jobs = recorded_jobs(
        queue,
        start=start,
        end=end,
        share_names=share_name,
        instance_types=policy["queue"]["capacity"],
    )
    description = (
        f"{len(jobs)} jobs recorded on {queue.name} from {start:%Y-%m-%d %H:%M} "
        f"to {end:%Y-%m-%d %H:%M} UTC"
    )
    params = {"start": start.isoformat(), "end": end.isoformat()}
    copied = dict(
        Job.objects.filter(queue=queue, submitted_at__gte=start, submitted_at__lt=end)
        .exclude(workload_class="")
        .values_list("id", "workload_class")
    )
    classes = {job["id"]: copied[pk] for job in jobs if (pk := job_pk(job["id"])) in copied}
    return Workload(jobs=jobs, description=description, params=params, classes=classes)


def share_default_classes(jobs: Sequence[Mapping], share_classes: Mapping[str, str]) -> dict:
    """Job id -> the default class of the job's share (`share_classes`: share name ->
    class name, shares without a default left out): the class of a trace job."""
    return {job["id"]: share_classes[job["share"]] for job in jobs if job["share"] in share_classes}


def default_period(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    return now - dt.timedelta(days=DEFAULT_DAYS), now


# -- trace rows -> jobs ------------------------------------------------------------------


def _largest_type(capacity: dict[str, int]) -> str:
    return min(capacity, key=lambda name: (-capacity[name], name))


def trace_jobs(
    rows: Iterable[TraceRow],
    *,
    capacity: dict[str, int],
    share_names: Sequence[str],
    gpus_per_instance: dict[str, int],
    scale: float,
    origin: dt.datetime | None = None,
) -> list[dict]:
    """Scenario jobs of trace rows: ordered by time then file position (the engine's
    trace tie-break), ids `j00000`..., submit times from `origin` (default: the first)."""
    ordered = sorted(rows, key=lambda row: (row.submitted, row.position))
    if not ordered:
        return []
    origin = origin or ordered[0].submitted
    itype = _largest_type(capacity)
    gpus = gpus_per_instance.get(itype, 1)
    share_of: dict[str, str] = {}
    others = [name for name in share_names]
    turn = 0
    jobs = []
    for number, row in enumerate(ordered):
        share = share_of.get(row.vc)
        if share is None:
            if row.vc in share_names:
                share = row.vc
            else:
                share = others[turn % len(others)]
                turn += 1
            share_of[row.vc] = share
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
) -> Workload:
    """The Philly jobs submitted in [start, start + days); `share_classes` (share name
    -> default class) gives the jobs their classes."""
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
    jobs = trace_jobs(
        rows,
        capacity=policy["queue"]["capacity"],
        share_names=[share["name"] for share in policy["shares"]],
        gpus_per_instance=gpus_per_instance,
        scale=scale,
        origin=origin,
    )
    description = (
        f"{len(jobs)} jobs of the Philly trace from {start:%Y-%m-%d} for {days:g} days, "
        f"GPU demand x {scale:g} (Microsoft Philly trace, CC BY 4.0)"
    )
    params = {"start": start.isoformat(), "days": days, "scale": scale}
    classes = share_default_classes(jobs, share_classes or {})
    return Workload(jobs=jobs, description=description, params=params, classes=classes)


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


def upload_workload(
    *,
    raw: bytes,
    filename: str,
    policy: dict,
    gpus_per_instance: dict[str, int],
    scale: float = 1.0,
    share_classes: Mapping[str, str] | None = None,
) -> Workload:
    scale = _check_scale(scale)
    rows = read_upload(raw)
    jobs = trace_jobs(
        rows,
        capacity=policy["queue"]["capacity"],
        share_names=[share["name"] for share in policy["shares"]],
        gpus_per_instance=gpus_per_instance,
        scale=scale,
    )
    description = f"{len(jobs)} jobs from the uploaded trace {filename}, GPU demand x {scale:g}"
    return Workload(
        jobs=jobs,
        description=description,
        params={"filename": filename, "scale": scale},
        classes=share_default_classes(jobs, share_classes or {}),
    )
