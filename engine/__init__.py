"""The scheduling engine: quota rules, the scheduling pass and the simulator.

Pure Python, standard library only (a test enforces it), no global state: time is a
parameter. The live scheduler builds a `Snapshot` from the database and applies the
decisions of `schedule(snapshot, now)`; the simulator, the what-if replay and the impact
preview run the same pass. The contract is the scenario format
(`shared/spec/scenario-format.md`); the engine adds one optional job field,
`protected_until` (seconds): while `now < protected_until` the job is never chosen as a
reclaim or in-share victim, though a `capacity_change` may still preempt it. A queue's
`borrowing_order` and `victim_order` name the orders its passes choose by
(`engine.ordering`; today's `FIFO` and `V1`, the defaults, are the only ones).

Interruption contracts (the format's v2): `JobSpec`, `RunningJob` and `PendingJob`
carry `min_runtime_reclaim`, `min_runtime_preempt`, `grace` and `checkpoint_on_notice`
(all defaulted: no contract). A job is protected from a cause if `protected_until` or
its minimum runtime (counted from `RunningJob.run_started_at`, default `started_at`)
says so. A victim with grace gets notice: `Preempt.grace_until` (with `stop_at`, its
stop instant, and `saves`, whether it saves on notice) instead of stopping at once, and
the starter does not start. The caller then keeps the victim running as STOPPING
(`RunningJob.stopping_until` = its stop instant, `notice_for` = the starter): it holds
its capacity, is never a reclaim or in-share victim again, and a capacity cut stops it
first (a `Preempt` with cause `capacity_change` for a STOPPING job is its stop). The
starter waits (`PendingJob.awaiting_victims`, the STOPPING victims it waits for;
`held_instances`, the instances its victims already freed, held for it) and blocks its
share until they have all stopped. `engine.contracts.reclaim_bound` and
`policy_reclaim_bound` give a lender's time to get its capacity back (V13).
"""

from .contracts import CONTRACT_FIELDS
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
    "CONTRACT_FIELDS",
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
