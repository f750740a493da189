"""Fixtures of the dashboard tests: a scenario simulated and loaded into the database
with the loader the history replay uses."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from demo.history import queue_for_scenario, result_load
from engine import load_scenario, result_to_json, simulate

SCENARIOS = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"
# A Monday: a short scenario stays within March 2025.
ORIGIN = dt.datetime(2025, 3, 3, tzinfo=dt.UTC)


def scenario_document(name: str) -> dict:
    return json.loads((SCENARIOS / name).read_text())


def load_into_db(
    document: dict,
    *,
    origin: dt.datetime = ORIGIN,
    queue_name: str | None = None,
    gpu_count: int = 1,
):
    """Simulate `document`, write the result as the live scheduler would; return
    (result JSON, LoadSummary, queue)."""
    scenario = load_scenario(document)
    result = simulate(scenario)
    queue, shares, types = queue_for_scenario(
        scenario=scenario, name=queue_name or document["name"][:90], gpu_count=gpu_count
    )
    summary = result_load(
        scenario=scenario,
        result=result,
        queue=queue,
        shares=shares,
        instance_types=types,
        origin=origin,
    )
    return result_to_json(result), summary, queue
