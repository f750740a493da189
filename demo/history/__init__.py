"""Months of real workload for the dashboard: replay a trace through the engine and write
what happened as the live scheduler writes it.

One module per concern:

- `load`: a simulation's result written as Job and JobEvent rows (`result_load`), and
  the queue a scenario describes (`queue_for_scenario`, for tests and benchmarks);
- `scenario`: any scenario's history with its policy record (`history_load`,
  manage.py load_history);
- `philly`: the demo's history, months of the Philly trace (`seed_history`);
- `story`: the policy edits, maintenance and exceptions that act on the demo's replay.

The names callers use are importable from `demo.history` itself.
"""

from demo.history.load import LoadSummary, queue_for_scenario, result_load
from demo.history.philly import (
    HISTORY_CONTRACTS,
    HISTORY_DEFAULT_CONTRACT,
    HISTORY_PREFIX,
    HISTORY_QUEUE,
    HISTORY_TYPE,
    HistorySummary,
    history_class,
    seed_history,
    seed_workload_classes,
)
from demo.history.scenario import HistoryLoadError, HistoryLoadSummary, history_load

__all__ = [
    "HISTORY_CONTRACTS",
    "HISTORY_DEFAULT_CONTRACT",
    "HISTORY_PREFIX",
    "HISTORY_QUEUE",
    "HISTORY_TYPE",
    "HistoryLoadError",
    "HistoryLoadSummary",
    "HistorySummary",
    "LoadSummary",
    "history_class",
    "history_load",
    "queue_for_scenario",
    "result_load",
    "seed_history",
    "seed_workload_classes",
]
