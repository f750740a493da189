"""One comparison, without the database: replay a workload under the current policy and
under the draft, then measure both on the same horizon.

Pure (engine + metrics); the Celery task, the API and the benchmark call it. Both
scenarios use the current policy's share names, so the jobs (which name those) and the
figures line up even when the draft renames a share: a name is a label to the engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from engine import result_to_json, simulate
from fleet.bridge import engine_share_document
from governance.whatif.metrics import differences, run_metrics

PHASES = (("current", "current policy"), ("draft", "draft policy"))

Progress = Callable[[float, str], None]


def engine_shares(policy: Mapping) -> list[dict]:
    """The policy's shares as the scenario format spells them (without `team`)."""
    return [engine_share_document(share) for share in policy["shares"]]


def with_names(policy: Mapping, names: Sequence[str]) -> dict:
    shares = [{**share, "name": names[index]} for index, share in enumerate(policy["shares"])]
    return {**policy, "shares": shares}


def scenario_for(policy: Mapping, jobs: Sequence[Mapping], *, names: Sequence[str], name: str):
    shares = engine_shares(with_names(policy, names))
    return {"name": name, "queue": dict(policy["queue"]), "shares": shares, "jobs": list(jobs)}


def share_labels(policy: Mapping) -> dict[str, str]:
    """Share name -> how sentences name it: "qs1 (team vision)"."""
    labels = {}
    for share in policy["shares"]:
        team = share.get("team")
        if not team:
            labels[share["name"]] = share["name"]
        elif team.lower().startswith("team"):
            labels[share["name"]] = f"{share['name']} ({team})"
        else:
            labels[share["name"]] = f"{share['name']} (team {team})"
    return labels


def compare_policies(
    *,
    current: Mapping,
    draft: Mapping,
    jobs: Sequence[Mapping],
    gpus_per_instance: Mapping[str, int],
    progress: Progress | None = None,
) -> dict:
    """The stored results of a comparison: metrics of both replays and the sentences.
    `progress(fraction, label)` may raise to stop the work (the task's cancellation)."""
    started = time.monotonic()
    names = [share["name"] for share in current["shares"]]
    policies = {"current": current, "draft": with_names(draft, names)}
    report = progress or (lambda fraction, label: None)
    results = {}
    for phase, (key, label) in enumerate(PHASES):
        total_jobs = len(jobs)
        report(phase / 2, f"Simulating the {label}: 0 of {total_jobs:,} jobs submitted")

        def engine_progress(now, submitted, total, phase=phase, label=label):
            fraction = (phase + (submitted / total if total else 1)) / 2
            report(fraction, f"Simulating the {label}: {submitted:,} of {total:,} jobs submitted")

        scenario = scenario_for(policies[key], jobs, names=names, name=f"what-if {key}")
        results[key] = result_to_json(simulate(scenario, progress=engine_progress))
    report(1.0, "Measuring both replays")
    horizon = max(results["current"]["makespan"], results["draft"]["makespan"], 1)
    measured = {
        key: run_metrics(
            result=results[key],
            jobs=jobs,
            policy=policies[key],
            gpus_per_instance=gpus_per_instance,
            horizon=horizon,
        )
        for key, _ in PHASES
    }
    labels = share_labels(current)
    return {
        **measured,
        "labels": labels,
        "sentences": differences(
            current=measured["current"], draft=measured["draft"], labels=labels
        ),
        "jobs": len(jobs),
        "seconds": round(time.monotonic() - started, 2),
    }
