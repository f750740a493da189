"""Every signal's formula, each in one function whose docstring is its definition.

The dashboard shows these docstrings as the definitions of its figures ("How these
figures are counted"), the signals API documents its fields with them, and the monthly
pack prints them: one text per signal, next to the code that computes it.

The month rule, for every figure: **a figure counts in the month in which it was
settled** (`MONTH_RULE`). The functions here are pure: the month sweep
(governance.dashboards.timeline) feeds them what it observed.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.stats import quartiles

# Below this many observations in either month, a change is shown without an arrow or
# a "better / worse" word: a handful of jobs moves a median or a fraction by chance.
MIN_SAMPLE = 30
# An entitled job that starts within this many seconds of becoming runnable had its
# entitlement honoured.
ENTITLEMENT_GRACE_S = 300
# Jobs with at least this many preemptions are listed as repeated yielders.
REPEATED_YIELDER_PREEMPTIONS = 3
PER_GPU_HOURS = 1000

MONTH_RULE = (
    "Every figure counts in the month in which it was settled: an hour of capacity in "
    "the month it passed; a preemption, a termination and the work they lost in the "
    "month they happened; a wait in the month it ended (the job started); a turnaround "
    "and a job's outcome in the month the job finished; an entitled start when the job "
    "started or its five minutes ran out. Times are UTC; the month under way counts up "
    "to the moment the figures were computed."
)

CAPACITY_CATEGORIES = ("within_limit", "borrowed", "idle_lendable", "idle_reserved")
# How a preempted job stopped (spec v2): at once (no notice), at the end of its notice
# without a checkpoint (rolled back to its last periodic checkpoint), or after saving
# its progress on notice.
STOP_KINDS = ("immediate", "stopped_without_checkpoint", "checkpointed_on_notice")
NO_CLASS = ""
LOST_CAUSES = ("reclaim", "priority", "capacity_change", "terminated", "failed", "requeued")
PREEMPTION_CAUSES = ("reclaim", "priority", "capacity_change")


def capacity_split(*, usage: int, limit: int, reserved: bool) -> tuple[int, int, int, int]:
    """Capacity use: at every moment, each share's instances of each type fall in one
    category, the categories of the queue page's bars. *Within limit* = min(usage,
    limit); *borrowed* = what it runs beyond its limit; *idle lendable* = its unused
    limit when its strategy lends; *idle reserved* = its unused limit when its strategy
    holds it (engine.strategies). Instance-hours add these up over the month's hours from the
    share's creation; GPU-hours multiply by the type's GPUs per instance."""
    idle = max(0, limit - usage)
    return (
        min(usage, limit),
        max(0, usage - limit),
        0 if reserved else idle,
        idle if reserved else 0,
    )


def lent_out(*, borrowed: int, idle: dict) -> dict:
    """Lent to others: at every moment, what the shares of a queue borrow of an instance
    type (their use beyond their limits) is lent by its lending shares, together, as the
    engine's ledger pools their idle limits; the pool does not say whose instance a
    borrower holds, so it is shared out among the lenders in proportion to their idle
    limits (as the queue page and /metrics share it out), never more than their idle.
    `idle`: lender -> its idle instances; returns lender -> instances lent (fractional).
    Instance-hours and GPU-hours add these up over the month, as *capacity* does."""
    total = sum(idle.values())
    lent = min(borrowed, total)
    if lent <= 0:
        return {}
    return {lender: lent * instances / total for lender, instances in idle.items()}


def cost(*, instance_hours: float, price_per_hour) -> float | None:
    """Cost: the instance-hours of a type (used within limit, borrowed, or lent to
    others) times the type's price per instance-hour, in the currency set
    (`COST_CURRENCY`), added up over the types; a type without a price has no cost (it
    is named, never counted as 0). Prices are those set when the figures are read, so a
    month's cost says what its use costs at today's prices."""
    return None if price_per_hour is None else instance_hours * float(price_per_hour)


def entitlement_use(*, within_limit: float, idle_lendable: float, idle_reserved: float):
    """Use of entitlement: the part of a share's limit (GPU-hours within limit + idle)
    that its own jobs used within the limit. None without a limit in the month."""
    entitled = within_limit + idle_lendable + idle_reserved
    return within_limit / entitled if entitled else None


def fits_within_limit(
    *, instance_type: str, instances: int, room: dict[str, int], ahead: Iterable[tuple[str, int]]
) -> bool:
    """Entitled start: a job is entitled to start when it becomes runnable (submitted,
    or requeued after a preemption) if it fits within its share's limit: for each
    instance type, what its share already runs, plus the share's runnable jobs queued
    ahead of it (priority, then submission; jobs that can never start are skipped, as
    the scheduler skips them), plus the job itself, is at most the share's limit."""
    need = {instance_type: instances}
    if instances > room.get(instance_type, 0):
        return False
    for type_name, count in ahead:
        need[type_name] = need.get(type_name, 0) + count
        if need[type_name] > room.get(type_name, 0):
            return False
    return True


def entitlement_honoured(*, honoured: int, entitled: int):
    """Entitlement honoured: of the starts a share was entitled to (see *entitled
    start*), the fraction that started within 5 minutes of becoming runnable. Settled
    when the job starts or its 5 minutes run out; a job that ended (terminated) within
    its 5 minutes without starting is not counted."""
    return honoured / entitled if entitled else None


def capacity_lent_out(*, borrowed_by_others: int, free: int, reserved_for_others: int, need: int):
    """Lent out: when an entitled job becomes runnable, its capacity is lent out if
    other shares borrow instances of its type and the free instances (less what
    shares hold for themselves) do not cover it, so it can start only by reclaiming.
    *Lender wait* (the signals' `time_to_reclaim_s`) is how long such a job waited from
    becoming runnable to its start (the promise a lender is given), p50 and p90;
    settled at the start. It includes waiting behind its own share's queue; *time to
    reclaim* (`reclaim_time_s`) is the engine's reclaim episode alone."""
    return borrowed_by_others > 0 and free - reserved_for_others < need


def reclaim_time(*, reclaim_waits: Iterable[int]) -> dict:
    """Time to reclaim (the engine's, scenario format V12): a *reclaim episode* of a job
    begins when it is its share's head, within its limit, and can start only by taking
    back capacity other shares borrow; it ends when the job starts, and lasts
    start − begin seconds (0 when the reclaim was immediate). Recorded on the start
    (`reclaim_wait` of the STARTED event), settled in the month of the start; n =
    episodes, p50 the lower median (element ⌊(n−1)/2⌋ of the sorted waits, as the
    engine's), p90 nearest rank, and max. By share: the share of the job that waited
    (the lender). By class: the workload classes of the jobs the episode's start
    preempted (its victims, whose minimum runtime and grace made the lender wait); an
    episode with no victim counts under "no class"."""
    return duration_stats(reclaim_waits)


def stop_kind(*, notice: bool, saved_on_notice: bool) -> str:
    """Lost GPU-hours by how the preempted job stopped: *immediate* (no notice, rule 5:
    the work since the last periodic checkpoint is lost at the preemption),
    *stopped without checkpoint* (it had notice but did not save within it: at its
    STOPPED event it falls back to its last periodic checkpoint) and *checkpointed on
    notice* (it saved within its notice: nothing lost, the count shows the stops it
    saved). Counted in the month of the stop, with n = stops, by cause and by the
    stopped job's workload class."""
    if not notice:
        return STOP_KINDS[0]
    return STOP_KINDS[2] if saved_on_notice else STOP_KINDS[1]


def preemptions_avoided(*, protected_blocks: Iterable[int]) -> dict:
    """Preemptions avoided by protection: each time a victim was chosen (reclaim or
    in-share), the jobs the choice would have taken had no job been protected by its
    minimum runtime, and were spared (the engine's per-job `protected_blocks`, spec V4,
    at most one per job per instant). Settled in the month the protected job ended,
    with n = jobs spared at least once, by share and by the job's workload class."""
    blocks = [count for count in protected_blocks if count]
    return {"avoided": sum(blocks), "jobs": len(blocks)}


def goodput(*, delivered: float, lost: float, overhead: float):
    """Goodput: the part of the GPU-hours delivered in the month that was not lost
    (work redone after a preemption or a requeue, work of jobs that were terminated or
    failed) nor spent restarting: (delivered − lost − restart overhead) / delivered.
    Work still in progress at the month's end counts as useful; if it is lost later,
    that month counts the loss."""
    return (delivered - lost - overhead) / delivered if delivered else None


def per_thousand_gpu_hours(*, value: float, delivered_gpu_hours: float):
    """Per 1,000 GPU-hours delivered: a count or an amount divided by the GPU-hours the
    scope ran in the month, times 1,000, so that a month with half the work does not
    look twice as good."""
    return value * PER_GPU_HOURS / delivered_gpu_hours if delivered_gpu_hours else None


def fairness(
    *, delivered: float, delivered_total: float, entitled: float, entitled_total: float
) -> dict:
    """Fairness, queue by queue: a team's part of the GPU-hours delivered in a queue
    against its part of that queue's entitlement (the GPU-hours of its shares' limits
    there over the month). The totals are the queue's own, never those of every queue:
    capacity in another queue, idle or busy, is no entitlement a team could have used
    here, and dividing by it inflates the ratio of whoever works in a busy queue. A team
    with shares in several queues has one ratio in each; a queue where nothing ran has
    none. A ratio above 1 means the team received more than its entitled part of the
    queue (by borrowing), below 1 less."""
    delivered_fraction = delivered / delivered_total if delivered_total else None
    entitled_fraction = entitled / entitled_total if entitled_total else None
    ratio = (
        delivered_fraction / entitled_fraction
        if delivered_fraction is not None and entitled_fraction
        else None
    )
    return {
        "delivered_gpu_hours": delivered,
        "entitled_gpu_hours": entitled,
        # What its part of the entitlement would have brought it of what the queue
        # delivered (the ratio's denominator in GPU-hours: ratio = delivered / fair).
        "fair_gpu_hours": entitled_fraction * delivered_total if entitled_fraction else 0.0,
        "delivered_fraction": delivered_fraction,
        "entitled_fraction": entitled_fraction,
        "ratio": ratio,
    }


def fairness_across_queues(by_queue: Iterable[dict]) -> dict:
    """Fairness of a team over several queues (the dashboard's "All queues", the signals
    API's `team:` scope): never its use divided by every queue's entitlement, but its
    ratio in each queue where it has a share, combined. In each queue where anything
    ran, the team's *fair part* is its part of that queue's entitlement times the
    GPU-hours the queue delivered; the combined ratio is the GPU-hours it received in
    those queues over the sum of its fair parts. That is each queue's ratio weighted
    by the team's fair part there: a queue weighs what the team's entitlement there
    would have brought it, so an idle queue (nothing ran, no fair part) weighs nothing,
    and a busy queue where the team ran nothing pulls the ratio down. In one queue it
    is that queue's ratio; each queue's is listed beside it (`by_queue`)."""
    rows = list(by_queue)
    counted = [row for row in rows if row["queue_delivered_gpu_hours"]]
    delivered = sum(row["delivered_gpu_hours"] for row in rows)
    fair = sum(row["fair_gpu_hours"] for row in counted)
    one = counted[0] if len(counted) == 1 else None
    return {
        "delivered_gpu_hours": delivered,
        "entitled_gpu_hours": sum(row["entitled_gpu_hours"] for row in rows),
        "fair_gpu_hours": fair,
        # A team's parts of one queue; over several queues there is no one queue to be
        # a part of (null), the ratio combines them.
        "delivered_fraction": one["delivered_fraction"] if one else None,
        "entitled_fraction": one["entitled_fraction"] if one else None,
        "ratio": delivered / fair if fair else None,
        "queues": len(counted),
        "by_queue": [
            {
                key: row[key]
                for key in (
                    "queue_id",
                    "queue_name",
                    "delivered_gpu_hours",
                    "entitled_gpu_hours",
                    "fair_gpu_hours",
                    "ratio",
                )
            }
            for row in rows
        ],
    }


def fairness_by_team(shares: Iterable[dict], queues: dict | None = None) -> dict:
    """team id -> `fairness_across_queues` of that team, from `fairness_by_queue`."""
    teams: dict = {}
    for row in fairness_by_queue(shares, queues):
        teams.setdefault(row["team_id"], []).append(row)
    return {team: fairness_across_queues(rows) for team, rows in teams.items()}


def fairness_by_queue(shares: Iterable[dict], queues: dict | None = None) -> list[dict]:
    """`fairness` of each (queue, team) from the month's figures of the shares (their
    `queue_id`, `queue_name`, `team_id`, `team_name`, `delivered_gpu_hours` and
    `entitled_gpu_hours`): a team's shares in a queue add up, and each queue's totals
    are the sums of its own shares, or `queues`' figures of it (queue id -> the queue's
    rollup) when the shares given are only some of the queue's (one team's). Rows by
    queue name, then team name (then ids)."""
    shares = list(shares)
    totals_of: dict = {}
    for share in shares:
        totals = totals_of.setdefault(share.get("queue_id"), [0.0, 0.0])
        totals[0] += share["delivered_gpu_hours"]
        totals[1] += share["entitled_gpu_hours"]
    for queue_id, data in (queues or {}).items():
        totals_of[queue_id] = [data["delivered_gpu_hours"], data["entitled_gpu_hours"]]
    queues = totals_of
    pairs: dict = {}
    for share in shares:
        queue = share.get("queue_id")
        pair = pairs.setdefault(
            (queue, share.get("team_id")),
            {
                "queue_name": share.get("queue_name", ""),
                "team_name": share.get("team_name", ""),
                "delivered": 0.0,
                "entitled": 0.0,
            },
        )
        pair["delivered"] += share["delivered_gpu_hours"]
        pair["entitled"] += share["entitled_gpu_hours"]
    rows = [
        {
            "queue_id": queue,
            "queue_name": pair["queue_name"],
            "team_id": team,
            "team_name": pair["team_name"],
            "queue_delivered_gpu_hours": queues[queue][0],
            "queue_entitled_gpu_hours": queues[queue][1],
            **fairness(
                delivered=pair["delivered"],
                delivered_total=queues[queue][0],
                entitled=pair["entitled"],
                entitled_total=queues[queue][1],
            ),
        }
        for (queue, team), pair in pairs.items()
    ]
    return sorted(
        rows,
        key=lambda r: (r["queue_name"], r["team_name"], r["queue_id"] or 0, r["team_id"] or 0),
    )


def duration_stats(values: Iterable[int]) -> dict:
    """n, mean, min, q1, p50, q3, p90, max of durations in seconds (only n when empty)."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    return {"n": len(ordered), "mean": round(sum(ordered) / len(ordered)), **quartiles(ordered)}


def ratio(numerator: float, denominator: float):
    return numerator / denominator if denominator else None


# What each figure means, for the page, the API and the pack (the formulas' docstrings
# and a few definitions of counts that need no function).
DEFINITIONS = {
    "capacity": capacity_split.__doc__,
    "entitlement_use": entitlement_use.__doc__,
    "entitled_start": fits_within_limit.__doc__,
    "entitlement_honoured": entitlement_honoured.__doc__,
    "time_to_reclaim": capacity_lent_out.__doc__,
    "reclaim_time": reclaim_time.__doc__,
    "stops": stop_kind.__doc__,
    "preemptions_avoided": preemptions_avoided.__doc__,
    "goodput": goodput.__doc__,
    "per_thousand": per_thousand_gpu_hours.__doc__,
    "fairness": fairness.__doc__,
    "fairness_across_queues": fairness_across_queues.__doc__,
    "lent_out": lent_out.__doc__,
    "cost": cost.__doc__,
    "lost": (
        "Lost GPU-hours by cause: the work redone after each preemption (reclaim, "
        "in-share priority, capacity change) or requeue (a runner lost), since the last "
        "checkpoint, and the whole progress of a job that was terminated or failed; in "
        "the month it happened. Restart overhead: the time restarted jobs spent loading "
        "before progressing, in the month of the restart."
    ),
    "turnaround": (
        "Turnaround: submission to finish of the jobs that succeeded in the month; "
        "p50 and p90 (nearest rank), n = jobs."
    ),
    "wait": (
        "Wait: submission to first start of the jobs that first started in the month; "
        "p50 and p90, n = jobs. Jobs still waiting at the month's end are counted "
        "apart, with their age (time since they last became runnable)."
    ),
    "recovery": (
        "Completion of preempted jobs: of the jobs that ended in the month after at "
        "least one preemption, the fraction that succeeded."
    ),
    "policy": (
        "Policy edits: changes of shares, capacity and urgency by admins, reverts "
        "included (exceptions counted apart); exceptions by what happened to them in "
        "the month (filed, approved, denied, expired, revoked) and those active at any "
        "time in it."
    ),
    "units": (
        "Hours are wall-clock hours. Work figures kept in compute seconds (lost work, "
        "restart overhead, progress) are turned into hours at the speed the job ran: one "
        "compute second per second for recorded history and real processes, the "
        "simulated executor's clock speed for simulated live jobs."
    ),
}
