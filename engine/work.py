"""The work model of a training job (scenario format, rule 8), in one place.

A started job progresses one compute second per second, after its restart overhead
when it is a restart; progress is saved at each multiple of its checkpoint interval;
a preemption loses what was done since the last save. The simulator and the live
scheduler both use these functions, so they agree on every figure.
"""

from __future__ import annotations


def run_progress(*, saved: int, elapsed: int, overhead: int, duration: int) -> int:
    """Work done `elapsed` seconds into a run that resumed from `saved` after `overhead`."""
    return min(duration, saved + max(0, elapsed - overhead))


def checkpointed(progress: int, interval: int | None) -> int:
    """What a checkpointing job keeps of `progress`: the last multiple of `interval`."""
    return progress // interval * interval if interval else 0


def overhead_spent(*, elapsed: int, overhead: int) -> int:
    """Seconds of a run spent restarting (loading) rather than progressing."""
    return min(elapsed, overhead)


def run_length(*, saved: int, overhead: int, duration: int) -> int:
    """How long an uninterrupted run from `saved` takes to finish the job."""
    return overhead + max(0, duration - saved)
