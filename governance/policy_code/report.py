"""A plan in words, for the command line and the API (the page renders the same parts)."""

from __future__ import annotations

import json

from governance.policy_code.plan import REMOVED, Change, Plan


def value_text(value) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "none" if value is None else str(value)


def change_title(change: Change) -> str:
    what = {
        "share": "share",
        "queue": "capacity of queue",
        "executor_binding": "Slurm binding of queue",
        "urgency": "urgency definition",
        "workload_class": "workload class",
    }[change.target]
    action = (
        "removed (disabled: a share is never deleted)"
        if change.action == REMOVED
        else (change.action)
    )
    return f"{what} {change.name}: {action}"


def plan_lines(plan: Plan) -> list[str]:
    lines = [f"Plan for {plan.source} ({plan.format} format)"]
    if plan.teams:
        lines.append("Teams to create: " + ", ".join(team.name for team in plan.teams))
    if plan.instance_types:
        lines.append(
            "Instance types to create: "
            + ", ".join(f"{t.name} ({t.gpu_count} GPUs per instance)" for t in plan.instance_types)
        )
    for change in plan.class_writes + plan.urgency_changes:
        lines += _change_lines(change, indent="")
    for queue in plan.queues:
        lines.append(f"Queue {queue.name}{'' if queue.queue else ' (new)'}:")
        if not queue.changes:
            lines.append("  no change")
        for change in queue.changes:
            lines += _change_lines(change, indent="  ")
        if queue.impact:
            lines.append("  Impact now:")
            lines += [f"    - {line.text}" for line in queue.impact]
    for change in plan.class_deletions:
        lines += _change_lines(change, indent="")
    if plan.other_impact:
        lines.append("Impact on other queues:")
        lines += [f"  - {line.text}" for line in plan.other_impact]
    if plan.warnings:
        lines.append("Warnings:")
        lines += [f"  - {warning}" for warning in plan.warnings]
    count = len(plan.changes)
    lines.append(
        "Nothing to change." if plan.is_empty else f"{count} change{'s' if count != 1 else ''}."
    )
    return lines


def _change_lines(change: Change, *, indent: str) -> list[str]:
    lines = [f"{indent}{change_title(change)}"]
    for name, before, after in change.fields:
        lines.append(f"{indent}    {name}: {value_text(before)} -> {value_text(after)}")
    return lines


def plan_document(plan: Plan) -> dict:
    """The plan as JSON for the API: every change with its fields, impact and warnings."""

    def change_doc(change: Change) -> dict:
        return {
            "target": change.target,
            "action": change.action,
            "name": change.name,
            "queue": change.queue,
            "fields": [
                {"field": name, "before": before, "after": after}
                for name, before, after in change.fields
            ],
        }

    return {
        "source": plan.source,
        "format": plan.format,
        "teams_to_create": [team.name for team in plan.teams],
        "instance_types_to_create": [
            {"name": t.name, "gpus": t.gpu_count} for t in plan.instance_types
        ],
        "urgency_definitions": [change_doc(change) for change in plan.urgency_changes],
        # Added and changed first, deleted last: the order the apply writes them.
        "workload_classes": [
            change_doc(change) for change in plan.class_writes + plan.class_deletions
        ],
        "queues": [
            {
                "name": queue.name,
                "exists": queue.queue is not None,
                "changes": [change_doc(change) for change in queue.changes],
                "impact": [
                    {"kind": line.kind, "text": line.text, "jobs": list(line.jobs)}
                    for line in queue.impact
                ],
            }
            for queue in plan.queues
        ],
        "other_impact": [
            {"kind": line.kind, "text": line.text, "jobs": list(line.jobs)}
            for line in plan.other_impact
        ],
        "warnings": plan.warnings,
        "versions": plan.versions(),
        "change_count": len(plan.changes),
    }
