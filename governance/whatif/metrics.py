"""The figures of one replay, per share and overall, and the differences in plain words.

Pure functions over the engine's result document (`result_to_json`) and the scenario
that produced it, so a test can recompute every number from `simulate`. Definitions
(design.md, "The signals"):

- turnaround: submission to success, of the jobs that succeeded; median and p90 by
  nearest rank (as the engine's own summary);
- waiting: seconds RUNNABLE in all, mean over every job;
- preemptions: PREEMPTED events; reclaims: those with cause `reclaim`;
- lost GPU-seconds: lost work x instances x GPUs per instance; restart overhead the same;
- utilisation: GPU-seconds held / (GPUs x horizon); per share against its own limit
  (over 100% when it borrows), overall against the queue's capacity; the horizon is the
  same for both policies of a comparison (the later makespan), so they compare;
- never ran: jobs that were never started (misconfigured, or failed at submission);
- interruptions (spec v2; `interruption_metrics`): time to reclaim over the engine's
  reclaim episodes (n, p50 lower median, p90 nearest rank, max), by the share that
  waited; lender wait GPU-seconds: each episode's length x the waiting job's GPUs (the
  entitled capacity a lender went without); stops by how the victim stopped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.stats import nearest_rank, quartiles

OVERALL = "__all__"
TIMELINE_BINS = 48
# A relative change smaller than this is "about the same" and not worth a sentence.
NOTABLE_CHANGE = 0.05
NOTABLE_GPU_SECONDS = 360  # 0.1 GPU-hour
# Below this overall utilisation, "the same outcome" is said with why (a quiet fleet).
QUIET_FLEET = 0.25


def _quartiles(values: Sequence[int]) -> dict | None:
    """The box of a box plot; the median under the key the stored results use."""
    box = quartiles(values)
    if box is None:
        return None
    box["median"] = box.pop("p50")
    return box


def _held_intervals(events: Sequence[Mapping]) -> list[tuple[str, int, int]]:
    """(job, start, end) of every run: STARTED until its PREEMPTED, SUCCEEDED or FAILED;
    a victim given notice (spec v2, `grace_until`) holds its capacity until STOPPED."""
    open_runs: dict[str, int] = {}
    runs = []
    last = 0
    for event in events:
        job, t = event["job"], event["t"]
        last = t
        if event["type"] == "STARTED":
            open_runs[job] = t
        elif event["type"] == "PREEMPTED" and "grace_until" in event:
            continue
        elif event["type"] in ("PREEMPTED", "STOPPED", "SUCCEEDED", "FAILED") and job in open_runs:
            runs.append((job, open_runs.pop(job), t))
    runs += [(job, start, last) for job, start in open_runs.items()]
    return runs


def run_metrics(
    *,
    result: Mapping,
    jobs: Sequence[Mapping],
    policy: Mapping,
    gpus_per_instance: Mapping[str, int],
    horizon: int,
    bins: int = TIMELINE_BINS,
) -> dict:
    """Per share (policy order) and overall figures of one replay, plus its utilisation
    timeline (`bins` equal slices of [0, horizon), fraction of the queue's GPUs held)."""
    horizon = max(1, horizon)
    shares = [share["name"] for share in policy["shares"]]
    gpu_of = {
        job["id"]: gpus_per_instance.get(job["instance_type"], 1) * job["instances"] for job in jobs
    }
    capacity_gpus = sum(
        count * gpus_per_instance.get(itype, 1)
        for itype, count in policy["queue"]["capacity"].items()
    )
    limit_gpus = {
        share["name"]: sum(
            count * gpus_per_instance.get(itype, 1)
            for itype, count in share["capacity_limits"].items()
        )
        for share in policy["shares"]
    }
    groups: dict[str, dict] = {
        name: {
            "jobs": 0,
            "succeeded": 0,
            "failed": 0,
            "never_ran": 0,
            "turnarounds": [],
            "waiting": 0,
            "preemptions": 0,
            "reclaims": 0,
            "lost_gpu_seconds": 0,
            "restart_gpu_seconds": 0,
            "used_gpu_seconds": 0,
        }
        for name in [*shares, OVERALL]
    }
    share_of = {}
    for job_id, outcome in result["jobs"].items():
        share_of[job_id] = outcome["share"]
        gpus = gpu_of[job_id]
        for key in (outcome["share"], OVERALL):
            group = groups[key]
            group["jobs"] += 1
            group["waiting"] += outcome["waiting_time"]
            group["preemptions"] += outcome["preemptions"]
            group["lost_gpu_seconds"] += outcome["lost_work"] * gpus
            group["restart_gpu_seconds"] += outcome["restart_overhead"] * gpus
            if outcome["first_started_at"] is None:
                group["never_ran"] += 1
            if outcome["state"] == "SUCCEEDED":
                group["succeeded"] += 1
                group["turnarounds"].append(outcome["finished_at"] - outcome["submitted_at"])
            elif outcome["state"] == "FAILED":
                group["failed"] += 1
    for event in result["events"]:
        if event["type"] == "PREEMPTED" and event.get("cause") == "reclaim":
            groups[event["share"]]["reclaims"] += 1
            groups[OVERALL]["reclaims"] += 1

    width = horizon / bins
    timeline = [0.0] * bins
    for job_id, start, end in _held_intervals(result["events"]):
        gpus = gpu_of[job_id]
        held = (end - start) * gpus
        groups[share_of[job_id]]["used_gpu_seconds"] += held
        groups[OVERALL]["used_gpu_seconds"] += held
        first, last = int(start // width), min(bins - 1, int(max(start, end - 1) // width))
        for index in range(first, last + 1):
            lo, hi = max(start, index * width), min(end, (index + 1) * width)
            if hi > lo:
                timeline[index] += (hi - lo) * gpus

    def finish(name: str, group: dict) -> dict:
        turnarounds = sorted(group.pop("turnarounds"))
        waiting = group.pop("waiting")
        denominator = (capacity_gpus if name == OVERALL else limit_gpus.get(name, 0)) * horizon
        return {
            **group,
            "waiting_mean": round(waiting / group["jobs"]) if group["jobs"] else None,
            "turnaround_p50": nearest_rank(turnarounds, 50),
            "turnaround_p90": nearest_rank(turnarounds, 90),
            "turnaround": _quartiles(turnarounds),
            "utilisation": group["used_gpu_seconds"] / denominator if denominator else None,
        }

    slice_gpu_seconds = capacity_gpus * width
    return {
        "makespan": result["makespan"],
        "horizon": horizon,
        "shares": {name: finish(name, groups[name]) for name in shares},
        "overall": finish(OVERALL, groups[OVERALL]),
        "timeline": {
            "bin_seconds": width,
            "utilisation": [
                round(value / slice_gpu_seconds, 4) if slice_gpu_seconds else 0.0
                for value in timeline
            ],
        },
    }


STOP_KINDS = ("immediate", "stopped_without_checkpoint", "checkpointed_on_notice")
NO_CLASS = ""


def stop_kind(job: Mapping) -> str:
    """How every stop of this replayed job goes under its contract (spec v2, V6):
    at once with grace 0; with grace, saving on notice when its checkpoint_on_notice
    fits in the grace, else at the end of the grace, rolled back to its last periodic
    checkpoint. A replay has no actions (no terminations, no capacity cuts) and a job's
    contract is fixed for the replay, so all of a job's stops are of this one kind and
    its `lost_work` is what they lost."""
    grace = job.get("grace") or 0
    if not grace:
        return STOP_KINDS[0]
    notice = job.get("checkpoint_on_notice")
    return STOP_KINDS[2] if notice is not None and notice <= grace else STOP_KINDS[1]


def reclaim_stats(waits: Sequence[int]) -> dict:
    """n, p50 (the lower median, element (n-1)//2, as the engine's), p90 (nearest rank)
    and max of reclaim episode lengths in seconds; None values when n is 0."""
    ordered = sorted(waits)
    count = len(ordered)
    return {
        "n": count,
        "p50": ordered[(count - 1) // 2] if count else None,
        "p90": nearest_rank(ordered, 90),
        "max": ordered[-1] if count else None,
    }


def interruption_metrics(
    *,
    result: Mapping,
    episodes: Sequence[tuple[str, int, int]],
    jobs: Sequence[Mapping],
    policy: Mapping,
    gpus_per_instance: Mapping[str, int],
    job_classes: Mapping[str, str] | None = None,
) -> dict:
    """Time to reclaim, lender wait, lost work (in all, and by how the jobs stopped) and
    stops of one replay (spec v2), and by workload class the lost work, stops and
    preemptions avoided of the jobs of each class.

    `episodes` are the engine's reclaim episodes (job, begin, start)
    (SimulationResult.reclaim_episodes); `result` its JSON document; `jobs` the
    replayed jobs with the contracts they ran under; `job_classes` job id -> class
    (jobs without one count under NO_CLASS)."""
    job_classes = job_classes or {}
    spec = {job["id"]: job for job in jobs}
    gpu_of = {
        job["id"]: gpus_per_instance.get(job["instance_type"], 1) * job["instances"] for job in jobs
    }
    shares = [share["name"] for share in policy["shares"]]
    waits: dict[str, list[int]] = {name: [] for name in [*shares, OVERALL]}
    lender_wait = dict.fromkeys([*shares, OVERALL], 0)
    for job_id, begin, start in episodes:
        share = result["jobs"][job_id]["share"]
        for key in (share, OVERALL):
            waits[key].append(start - begin)
            lender_wait[key] += (start - begin) * gpu_of[job_id]
    stops = dict.fromkeys(STOP_KINDS, 0)
    for event in result["events"]:
        if event.get("cause") not in ("reclaim", "priority"):
            continue
        if event["type"] == "PREEMPTED" and "grace_until" not in event:
            stops["immediate"] += 1
        elif event["type"] == "STOPPED":
            job = spec[event["job"]]
            notice = job.get("checkpoint_on_notice")
            saves = notice is not None and notice <= (job.get("grace") or 0)
            stops["checkpointed_on_notice" if saves else "stopped_without_checkpoint"] += 1
    outcomes = result["jobs"].values()
    lost_by_stop = dict.fromkeys(STOP_KINDS, 0)
    by_class: dict[str, dict] = {}
    for job_id, outcome in result["jobs"].items():
        lost = outcome["lost_work"] * gpu_of[job_id]
        lost_by_stop[stop_kind(spec[job_id])] += lost
        figures = by_class.setdefault(
            job_classes.get(job_id, NO_CLASS),
            {"jobs": 0, "lost_gpu_seconds": 0, "preemptions": 0, "protected_blocks": 0},
        )
        figures["jobs"] += 1
        figures["lost_gpu_seconds"] += lost
        figures["preemptions"] += outcome["preemptions"]
        figures["protected_blocks"] += outcome.get("protected_blocks", 0)
    return {
        "time_to_reclaim": reclaim_stats(waits[OVERALL]),
        "time_to_reclaim_by_share": {name: reclaim_stats(waits[name]) for name in shares},
        "lender_wait_gpu_seconds": lender_wait[OVERALL],
        "lender_wait_gpu_seconds_by_share": {name: lender_wait[name] for name in shares},
        "lost_gpu_seconds": sum(
            o["lost_work"] * gpu_of[job_id] for job_id, o in result["jobs"].items()
        ),
        "lost_gpu_seconds_by_stop": lost_by_stop,
        "stops": stops,
        "by_class": dict(sorted(by_class.items())),
        "notice_gpu_seconds": sum(
            o.get("notice_time", 0) * gpu_of[job_id] for job_id, o in result["jobs"].items()
        ),
        "protected_blocks": sum(o.get("protected_blocks", 0) for o in outcomes),
    }


# -- plain words -----------------------------------------------------------------------


def _relative(old, new) -> float | None:
    if old is None or new is None or old == 0:
        return None
    return (new - old) / old


def _percent_words(change: float) -> str:
    return f"{round(abs(change) * 100)}%"


def _hours_words(gpu_seconds: float) -> str:
    return f"{abs(gpu_seconds) / 3600:,.1f} GPU-hours"


def share_sentences(who: str, current: Mapping, draft: Mapping) -> list[str]:
    """What changes for one share, most telling first; empty when nothing notable does."""
    lines = []
    change = _relative(current["waiting_mean"], draft["waiting_mean"])
    if change is not None and abs(change) >= NOTABLE_CHANGE:
        lines.append(f"{who} waits {_percent_words(change)} {'less' if change < 0 else 'more'}")
    elif not current["waiting_mean"] and draft["waiting_mean"]:
        lines.append(f"{who} now waits (it never did before)")
    change = _relative(current["turnaround_p90"], draft["turnaround_p90"])
    if change is not None and abs(change) >= NOTABLE_CHANGE:
        lines.append(
            f"{who}'s slowest tenth of jobs finish {_percent_words(change)} "
            f"{'sooner' if change < 0 else 'later'}"
        )
    lost = draft["lost_gpu_seconds"] - current["lost_gpu_seconds"]
    if abs(lost) >= NOTABLE_GPU_SECONDS:
        lines.append(
            f"{who} loses {_hours_words(lost)} {'more' if lost > 0 else 'less'} to preemptions"
        )
    reclaims = draft["reclaims"] - current["reclaims"]
    if reclaims:
        lines.append(
            f"{who} has {abs(reclaims)} {'more' if reclaims > 0 else 'fewer'} "
            f"job{'s' if abs(reclaims) != 1 else ''} reclaimed"
        )
    never = draft["never_ran"] - current["never_ran"]
    if never:
        lines.append(
            f"{abs(never)} {'more' if never > 0 else 'fewer'} job{'s' if abs(never) != 1 else ''}"
            f" of {who} could never run"
        )
    return lines


def differences(*, current: Mapping, draft: Mapping, labels: Mapping[str, str]) -> list[str]:
    """Sentences for people: per share (labels: share -> "team vision"), then overall."""
    lines = []
    for name, figures in current["shares"].items():
        if name in draft["shares"]:
            lines += share_sentences(labels.get(name, name), figures, draft["shares"][name])
    old, new = current["overall"]["utilisation"], draft["overall"]["utilisation"]
    if old is not None and new is not None and round(old * 100) != round(new * 100):
        lines.append(
            f"The fleet is busy {round(new * 100)}% of the time instead of {round(old * 100)}%"
        )
    if not lines:
        same = "Both policies give the same outcome on this workload."
        if old is not None and old < QUIET_FLEET:
            # A newcomer's first what-if on a quiet fleet: say why, and what to try.
            same = (
                f"Both policies give the same outcome on this workload: the fleet is busy "
                f"{round(old * 100)}% of the time, so no share waits for capacity another "
                "holds. Raise the GPU demand scale (traces) or choose a busier period to "
                "see where the policies differ."
            )
        return [same]
    # Share names are identifiers: a sentence may start with one as it is spelled.
    return [line + "." for line in lines]
