"""Reads of the what-if comparisons, shaped for the pages and the API."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import QuerySet

from core.formatting import duration, gpu_hours, percent
from fleet.bridge import BORROW_UNLIMITED
from fleet.models import WorkloadClass
from governance.models import WhatIfComparison
from governance.whatif import figures, workloads

POLICY_FIELDS = (
    ("team", "Team"),
    ("strategy", "Strategy"),
    ("borrow_limit", "Borrow limit (%)"),
    ("in_share_preemption", "In-share preemption"),
    ("state", "State"),
    ("capacity_limits", "Capacity limits"),
)


def comparison_list() -> QuerySet[WhatIfComparison]:
    return WhatIfComparison.objects.select_related("queue", "author").defer(
        "current_policy",
        "draft_policy",
        "workload_jobs",
        "workload_classes",
        "share_mapping",
        "results",
    )


def _policy_value(key: str, value) -> str:
    if value is None:
        return "—"
    if key == "capacity_limits":
        return ", ".join(f"{name} × {count}" for name, count in value.items()) or "—"
    if key == "borrow_limit" and value == BORROW_UNLIMITED:
        return "unlimited"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


@dataclass(frozen=True)
class DraftShareRow:
    index: int
    name: str
    draft_name: str
    changed: bool
    fields: list[tuple[str, str, str, bool]]  # label, current, draft, differs


def draft_rows(comparison: WhatIfComparison) -> list[DraftShareRow]:
    rows = []
    pairs = zip(comparison.current_policy["shares"], comparison.draft_policy["shares"], strict=True)
    for index, (old, new) in enumerate(pairs):
        fields = []
        for key, label in POLICY_FIELDS:
            before, after = _policy_value(key, old.get(key)), _policy_value(key, new.get(key))
            fields.append((label, before, after, before != after))
        rows.append(DraftShareRow(index, old["name"], new["name"], old != new, fields))
    return rows


def workload_class_names(comparison: WhatIfComparison) -> list[str]:
    """The classes a contract override may name: those defined now, and those the
    workload's jobs carry (a recorded job keeps the name of a class renamed or deleted
    since), in name order."""
    defined = set(WorkloadClass.objects.values_list("name", flat=True))
    return sorted(defined | set((comparison.workload_classes or {}).values()))


def workload_class_counts(comparison: WhatIfComparison) -> list[tuple[str, int]]:
    """(class, jobs of the workload in it) of every class an override may name."""
    counts = Counter((comparison.workload_classes or {}).values())
    return [(name, counts[name]) for name in workload_class_names(comparison)]


def mapping_view(comparison: WhatIfComparison) -> dict | None:
    """The mapping of the workload's teams to shares, for the page: who the teams are
    (a trace's teams, or the shares recorded jobs were submitted to), and the teams
    left out with their jobs."""
    stored = comparison.share_mapping or {}
    if not stored.get("teams"):
        return None
    left = workloads.left_out(stored)
    return {
        "recorded": stored.get("source") == workloads.RECORDED_TEAMS,
        "teams": stored["teams"],
        "left_out": [{"team": team, "jobs": jobs} for team, jobs in left],
        "left_out_jobs": sum(jobs for _team, jobs in left),
        "mapped_jobs": sum(entry["jobs"] for entry in stored["teams"] if entry["share"]),
    }


def mapping_document(comparison: WhatIfComparison) -> dict:
    """The API's mapping: {team: share or null} and the teams left out."""
    stored = comparison.share_mapping or {}
    return {
        "source": stored.get("source"),
        "teams": [
            {key: entry[key] for key in ("team", "jobs", "share", "default", "matched")}
            for entry in stored.get("teams", [])
        ],
        "left_out": [{"team": team, "jobs": jobs} for team, jobs in workloads.left_out(stored)],
    }


# -- results -----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricRow:
    label: str
    current: str
    draft: str
    change: str


def _change(old, new, kind: str) -> str:
    if old is None or new is None:
        return "—"
    delta = new - old
    if kind == "gpu":
        hours = round(delta / 3600, 1)
        return f"{'+' if hours > 0 else '−'}{abs(hours):,.1f}" if hours else "about the same"
    if kind == "duration" and old and abs(delta) / old >= 0.005:
        sign = "+" if delta > 0 else "−"
        return f"{sign}{round(abs(delta) / old * 100)}%"
    if kind == "count" and delta:
        return f"{'+' if delta > 0 else '−'}{abs(delta)}"
    if kind == "fraction" and round(delta * 100):
        return f"{'+' if delta > 0 else '−'}{abs(round(delta * 100))} points"
    return "same" if not delta else "about the same"


FORMAT = {
    "duration": duration,
    "gpu": gpu_hours,
    "count": lambda value: "—" if value is None else f"{value:,}",
    "fraction": percent,
}


def _metric_rows(current: dict, draft: dict, *, overall: bool) -> list[MetricRow]:
    spec = [
        ("Jobs", "jobs", "count"),
        ("Median turnaround", "turnaround_p50", "duration"),
        ("p90 turnaround", "turnaround_p90", "duration"),
        ("Mean waiting", "waiting_mean", "duration"),
        ("Preemptions", "preemptions", "count"),
        ("Reclaims", "reclaims", "count"),
        ("Lost GPU-hours", "lost_gpu_seconds", "gpu"),
        ("Restart overhead (GPU-hours)", "restart_gpu_seconds", "gpu"),
        (
            "Utilisation of the queue" if overall else "Utilisation of its limit",
            "utilisation",
            "fraction",
        ),
        ("Jobs that never ran", "never_ran", "count"),
    ]
    return [
        MetricRow(
            label,
            FORMAT[kind](current[key]),
            FORMAT[kind](draft[key]),
            _change(current[key], draft[key], kind),
        )
        for label, key, kind in spec
    ]


CONTRACT_LABELS = {
    "min_runtime_reclaim": "min runtime (reclaim)",
    "min_runtime_preempt": "min runtime (in-share)",
    "grace": "grace",
    "checkpoint_on_notice": "checkpoint on notice",
}


def contract_text(contracts: dict, class_contracts: dict | None = None) -> str:
    """One run's contracts for people, the classes' first (the shares' apply over
    them): "class batch: grace 2m 00s; borrower: grace 2m 00s, checkpoint on notice 30s"."""
    if not contracts and not class_contracts:
        return "as recorded (no contract)"
    parts = []
    for prefix, overrides in (("class ", class_contracts or {}), ("", contracts)):
        for name, fields in sorted(overrides.items()):
            spoken = ", ".join(
                f"{CONTRACT_LABELS[field]} {duration(value)}" for field, value in fields.items()
            )
            parts.append(f"{prefix}{name}: {spoken or 'none'}")
    return "; ".join(parts)


RUN_LABELS = (("current", "Current policy"), ("draft", "Draft policy"))


def contract_rows(comparison: WhatIfComparison) -> list[tuple[str, str]]:
    """(run label, its contracts in words) of the comparison's contract overrides."""
    contracts = comparison.contracts or {}
    class_contracts = comparison.class_contracts or {}
    return [
        (label, contract_text(contracts.get(run, {}), class_contracts.get(run, {})))
        for run, label in RUN_LABELS
    ]


def _ttr(stats: dict) -> str:
    if not stats["n"]:
        return "no reclaim"
    return (
        f"p50 {duration(stats['p50'])}, p90 {duration(stats['p90'])}, "
        f"longest {duration(stats['max'])} (n = {stats['n']})"
    )


STOP_LABELS = (
    ("immediate", "Stopped at once (no notice)"),
    ("stopped_without_checkpoint", "Stopped at the end of notice without checkpoint"),
    ("checkpointed_on_notice", "Checkpointed on notice"),
)


def _class_rows(old: dict, new: dict) -> list[dict]:
    """By workload class of the replayed jobs: lost GPU-hours, preemptions and
    preemptions avoided, current against draft (metrics.interruption_metrics)."""
    if "by_class" not in old:
        return []
    rows = []
    for name in sorted(set(old["by_class"]) | set(new["by_class"])):
        before, after = old["by_class"].get(name, {}), new["by_class"].get(name, {})
        row = {"label": name or "no class", "jobs": before.get("jobs", after.get("jobs"))}
        for key, kind in (
            ("lost_gpu_seconds", "gpu"),
            ("preemptions", "count"),
            ("protected_blocks", "count"),
        ):
            row[key] = (FORMAT[kind](before.get(key, 0)), FORMAT[kind](after.get(key, 0)))
        rows.append(row)
    # Only "no class": the workload has no classes and the table would repeat the totals.
    return rows if any(row["label"] != "no class" for row in rows) else []


def _interruption_rows(current: dict, draft: dict) -> list[MetricRow]:
    """Lost GPU-hours against lender wait and time to reclaim (metrics.interruption_metrics)."""
    rows = [
        ("Lost GPU-hours (preempted work)", "lost_gpu_seconds", "gpu"),
        ("Lender wait (GPU-hours)", "lender_wait_gpu_seconds", "gpu"),
        ("Capacity held during notice (GPU-hours)", "notice_gpu_seconds", "gpu"),
        ("Preemptions avoided by protection", "protected_blocks", "count"),
    ]
    result = [
        MetricRow(
            label,
            FORMAT[kind](current[key]),
            FORMAT[kind](draft[key]),
            _change(current[key], draft[key], kind),
        )
        for label, key, kind in rows
    ]
    old, new = current["time_to_reclaim"], draft["time_to_reclaim"]
    result.insert(
        2,
        MetricRow(
            "Time to reclaim", _ttr(old), _ttr(new), _change(old["p90"], new["p90"], "duration")
        ),
    )
    if "lost_gpu_seconds_by_stop" in current:  # results stored before the split have none
        for offset, (kind, label) in enumerate(STOP_LABELS):
            before = current["lost_gpu_seconds_by_stop"][kind]
            after = draft["lost_gpu_seconds_by_stop"][kind]
            result.insert(
                1 + offset,
                MetricRow(
                    f"Lost GPU-hours: {label.lower()}",
                    FORMAT["gpu"](before),
                    FORMAT["gpu"](after),
                    _change(before, after, "gpu"),
                ),
            )
    for kind, label in STOP_LABELS:
        result.append(
            MetricRow(
                f"Stops: {label.lower()}",
                FORMAT["count"](current["stops"][kind]),
                FORMAT["count"](draft["stops"][kind]),
                _change(current["stops"][kind], draft["stops"][kind], "count"),
            )
        )
    return result


def _contracts_view(results: dict, labels: dict) -> dict | None:
    current, draft = results["current"], results["draft"]
    if "interruptions" not in current:
        return None
    old, new = current["interruptions"], draft["interruptions"]
    contracts = results.get("contracts") or {}
    class_contracts = results.get("class_contracts") or {}
    return {
        "current_text": contract_text(
            contracts.get("current", {}), class_contracts.get("current", {})
        ),
        "draft_text": contract_text(contracts.get("draft", {}), class_contracts.get("draft", {})),
        "rows": _interruption_rows(old, new),
        "classes": _class_rows(old, new),
        "shares": [
            {
                "label": labels.get(name, name),
                "current": _ttr(stats),
                "draft": _ttr(new["time_to_reclaim_by_share"][name]),
                "current_wait": FORMAT["gpu"](old["lender_wait_gpu_seconds_by_share"][name]),
                "draft_wait": FORMAT["gpu"](new["lender_wait_gpu_seconds_by_share"][name]),
            }
            for name, stats in old["time_to_reclaim_by_share"].items()
            if stats["n"] or new["time_to_reclaim_by_share"][name]["n"]
        ],
    }


def results_view(comparison: WhatIfComparison) -> dict | None:
    """Tables, sentences and charts of a finished comparison (None before)."""
    results = comparison.results
    if not results:
        return None
    current, draft, labels = results["current"], results["draft"], results["labels"]
    shares = [
        {
            "name": name,
            "label": labels.get(name, name),
            "rows": _metric_rows(figures_, draft["shares"][name], overall=False),
        }
        for name, figures_ in current["shares"].items()
    ]
    box_rows = [
        {
            "label": name,
            "current": current["shares"][name]["turnaround"],
            "draft": draft["shares"][name]["turnaround"],
        }
        for name in current["shares"]
    ]
    timeline = current["timeline"]
    hours = [
        (index + 0.5) * timeline["bin_seconds"] / 3600
        for index in range(len(timeline["utilisation"]))
    ]
    return {
        "sentences": results["sentences"],
        "contracts": _contracts_view(results, labels),
        "overall": _metric_rows(current["overall"], draft["overall"], overall=True),
        "shares": shares,
        "jobs": results["jobs"],
        "seconds": results["seconds"],
        "horizon": current["horizon"],
        "turnaround_figure": figures.turnaround_figure(box_rows),
        "turnaround_table": [
            {
                "label": row["label"],
                "current": row["current"],
                "draft": row["draft"],
            }
            for row in box_rows
        ],
        "utilisation_figure": figures.utilisation_figure(
            bin_seconds=timeline["bin_seconds"],
            current=timeline["utilisation"],
            draft=draft["timeline"]["utilisation"],
        ),
        "utilisation_table": [
            (round(hour, 1), percent(old), percent(new))
            for hour, old, new in zip(
                hours, timeline["utilisation"], draft["timeline"]["utilisation"], strict=True
            )
        ],
    }


def comparison_document(comparison: WhatIfComparison) -> dict:
    """The API's representation."""
    return {
        "id": comparison.pk,
        "title": comparison.title,
        "note": comparison.note,
        "queue": comparison.queue_id,
        "author": comparison.author.get_username() if comparison.author else None,
        "status": comparison.status,
        "progress": comparison.progress,
        "progress_label": comparison.progress_label,
        "error": comparison.error,
        "review_state": comparison.review_state,
        "current_policy": comparison.current_policy,
        "draft_policy": comparison.draft_policy,
        "workload": {
            "kind": comparison.workload_kind,
            "params": comparison.workload_params,
            "description": comparison.workload_description,
            "jobs": len(comparison.workload_jobs),
            "mapping": mapping_document(comparison),
        },
        "contracts": comparison.contracts,
        "class_contracts": comparison.class_contracts,
        "results": comparison.results,
        "created_at": comparison.created_at.isoformat(),
        "finished_at": comparison.finished_at.isoformat() if comparison.finished_at else None,
    }
