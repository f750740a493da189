"""The scheduling engine: quota rules, the scheduling pass and the simulator.

Pure Python, standard library only (a test enforces it), no global state: time is a
parameter. The live scheduler builds a `Snapshot` from the database and applies the
decisions of `schedule(snapshot, now)`; the simulator, the what-if replay and the impact
preview run the same pass. The contract is the scenario format
(`shared/spec/scenario-format.md`); the engine adds one optional job field,
`protected_until` (seconds): while `now < protected_until` the job is never chosen as a
reclaim or in-share victim, though a `capacity_change` may still preempt it.
"""

from .impact import Impact, assess_job_change, assess_policy_change
from .quota import ShareUsage, share_usage
from .results import Event, JobOutcome, SimulationResult, dump_result, result_to_json
from .scheduling import schedule
from .simulator import simulate
from .types import (
    Fail,
    JobSpec,
    PassResult,
    PendingJob,
    Preempt,
    Problem,
    QueueSpec,
    RunningJob,
    Scenario,
    ScenarioError,
    ShareSpec,
    Snapshot,
    Start,
)
from .validation import load_scenario, parse_json, validate_policy

__all__ = [
    "Event",
    "Fail",
    "Impact",
    "JobOutcome",
    "JobSpec",
    "PassResult",
    "PendingJob",
    "Preempt",
    "Problem",
    "QueueSpec",
    "RunningJob",
    "Scenario",
    "ScenarioError",
    "ShareSpec",
    "ShareUsage",
    "SimulationResult",
    "Snapshot",
    "Start",
    "assess_job_change",
    "assess_policy_change",
    "dump_result",
    "load_scenario",
    "parse_json",
    "result_to_json",
    "schedule",
    "share_usage",
    "simulate",
    "validate_policy",
]
