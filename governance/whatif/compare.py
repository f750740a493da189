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
from governance.whatif.metrics import differences, interruption_metrics, run_metrics

PHASES = (("current", "current policy"), ("draft", "draft policy"))
# The interruption contract of a job (scenario format v2, V1) and its value when none
# is given: all 0 and no checkpoint on notice is no contract.
CONTRACT_FIELDS = {
    "min_runtime_reclaim": 0,
    "min_runtime_preempt": 0,
    "grace": 0,
    "checkpoint_on_notice": None,
}

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


def with_contracts(
    jobs: Sequence[Mapping],
    contracts: Mapping[str, Mapping],
    *,
    class_contracts: Mapping[str, Mapping] | None = None,
    job_classes: Mapping[str, str] | None = None,
) -> list[dict]:
    """The jobs with the overrides of their class and of their share applied, field by
    field, over the job's own contract: first the class's (`class_contracts`: class
    name -> the fields of CONTRACT_FIELDS it sets; a job's class is `job_classes[id]`),
    then the share's (`contracts`: share name -> fields). So where both name a field,
    the share's value wins: the share is the last word for its jobs, and "class batch:
    grace 120 s, but share qs2: grace 0" says what it reads. Every job carries all four
    fields, so the replay is a v2 document (its reclaim episodes are counted) even where
    all are 0."""
    class_contracts = class_contracts or {}
    job_classes = job_classes or {}
    return [
        {
            **CONTRACT_FIELDS,
            **job,
            **class_contracts.get(job_classes.get(job["id"], ""), {}),
            **contracts.get(job["share"], {}),
        }
        for job in jobs
    ]


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
    contracts: Mapping[str, Mapping[str, Mapping]] | None = None,
    class_contracts: Mapping[str, Mapping[str, Mapping]] | None = None,
    job_classes: Mapping[str, str] | None = None,
) -> dict:
    """The stored results of a comparison: metrics of both replays and the sentences.
    `progress(fraction, label)` may raise to stop the work (the task's cancellation).

    `contracts` ({"current": {share: contract}, "draft": {share: contract}}) replays the
    jobs of those shares under those interruption contracts, `class_contracts` (the
    same by workload class name) the jobs of those classes (`job_classes`: job id ->
    class), the share's fields over the class's (compare.with_contracts); either gives
    each run's `interruptions` (metrics.interruption_metrics): lost GPU-hours against
    lender wait and time to reclaim."""
    started = time.monotonic()
    names = [share["name"] for share in current["shares"]]
    policies = {"current": current, "draft": with_names(draft, names)}
    report = progress or (lambda fraction, label: None)
    results = {}
    interruptions: dict[str, dict] = {}
    overrides = contracts is not None or class_contracts is not None
    contracts = contracts or {}
    class_contracts = class_contracts or {}
    for phase, (key, label) in enumerate(PHASES):
        total_jobs = len(jobs)
        report(phase / 2, f"Simulating the {label}: 0 of {total_jobs:,} jobs submitted")

        def engine_progress(now, submitted, total, phase=phase, label=label):
            fraction = (phase + (submitted / total if total else 1)) / 2
            report(fraction, f"Simulating the {label}: {submitted:,} of {total:,} jobs submitted")

        replayed = (
            with_contracts(
                jobs,
                contracts.get(key, {}),
                class_contracts=class_contracts.get(key, {}),
                job_classes=job_classes,
            )
            if overrides
            else jobs
        )
        scenario = scenario_for(policies[key], replayed, names=names, name=f"what-if {key}")
        simulated = simulate(scenario, progress=engine_progress)
        results[key] = result_to_json(simulated)
        if overrides:
            interruptions[key] = interruption_metrics(
                result=results[key],
                episodes=simulated.reclaim_episodes,
                jobs=replayed,
                policy=policies[key],
                gpus_per_instance=gpus_per_instance,
                job_classes=job_classes or {},
            )
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
    for key, figures in interruptions.items():
        measured[key]["interruptions"] = figures
    labels = share_labels(current)
    return {
        **measured,
        "contracts": {key: dict(contracts.get(key, {})) for key, _ in PHASES}
        if overrides
        else None,
        "class_contracts": {key: dict(class_contracts.get(key, {})) for key, _ in PHASES}
        if overrides
        else None,
        "labels": labels,
        "sentences": differences(
            current=measured["current"], draft=measured["draft"], labels=labels
        ),
        "jobs": len(jobs),
        "seconds": round(time.monotonic() - started, 2),
    }
