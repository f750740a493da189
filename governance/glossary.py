"""The one glossary of the product.

Every page that shows one of these terms takes its tooltip or inline help from
here (through the `{% term %}` tag), and the knowledge base publishes the same
text as an article, so a term never means two things in two places.
Explanations are short, plain sentences for readers who are not scheduler experts.
"""

from __future__ import annotations

from engine.strategies import STRATEGIES, spoken_list, strategies_that, strategy_capabilities

_BORROWING = spoken_list(strategies_that(takes_borrow_limit=True))

GLOSSARY: dict[str, str] = {
    # What each strategy does, in the engine's words (engine.strategies).
    **{name: strategy_capabilities(name).meaning for name in STRATEGIES},
    "borrow limit": (
        "A percent of the share's own limit, not a number of instances: of each instance "
        f"type, a {_BORROWING} share may borrow up to its limit × this percent ÷ 100 "
        "(rounded down) on top of its limit. 0: it never borrows; 10,000 (the most): 100 "
        "times its limit; -1: unlimited."
    ),
    "in-share preemption": (
        "When on, a higher-priority job of a team may stop a lower-priority job of the "
        "same share to start sooner. When off, jobs of one share wait in turn."
    ),
    "reclaim": (
        "Taking lent instances back: when a lending team submits work, jobs running on "
        "its borrowed instances are preempted so the owner gets its capacity."
    ),
    "retry bound": (
        "How many times a preempted or failed job is restarted automatically before it "
        "is marked failed and needs a person to act."
    ),
    "capacity limit": (
        "The number of instances of one instance type that a share is entitled to "
        "(its quota). A share has one to five capacity limits, each at most the queue's "
        "capacity of that type; together the shares' limits may add up to more than the "
        "capacity, since shares lend and borrow."
    ),
    "quota share": (
        "A team's allocation in a job queue: capacity limits per instance type, a "
        f"strategy ({spoken_list(STRATEGIES)}) and the rules for preemption."
    ),
    "job queue": (
        "A pool of training instances with a fixed capacity per instance type, divided "
        "into quota shares. Jobs are submitted to a queue under one share."
    ),
    "lost work": (
        "Compute that had to be done again because a job was stopped after its last "
        "checkpoint. Measured in GPU-hours."
    ),
    "restart overhead": (
        "Time a job spends starting again after an interruption (loading the checkpoint, "
        "warming up) before it makes progress."
    ),
    "goodput": (
        "Useful compute as a share of all compute used: the GPU-hours that moved jobs "
        "forward, divided by all GPU-hours consumed, including lost work and restarts."
    ),
    "turnaround": (
        "Time from submitting a job to its finish: queue wait plus run time, including "
        "any time spent waiting after a preemption."
    ),
    "urgency definition": (
        "A shared, named reason for an exception (for example a deadline for a launch), "
        "with what it allows, for how long, and who may invoke it."
    ),
    "exception request": (
        "A team's request for a temporary change (higher priority, extra capacity, or "
        "protection from preemption), justified by an urgency definition, for a set window."
    ),
}


def _normalise(term: str) -> str:
    return " ".join(term.replace("_", " ").replace("-", " ").split()).lower()


# "Lend and borrow", "lend_and_borrow" and "In-share preemption" find their entries.
_BY_KEY = {_normalise(name): name for name in GLOSSARY}


def canonical(term: str) -> str | None:
    """The glossary's spelling of a term, matched loosely; None if unknown."""
    return _BY_KEY.get(_normalise(term or ""))


def explain(term: str) -> str:
    """The plain-language explanation of a glossary term.

    Raises KeyError for an unknown term, so a typo in a template fails loudly in tests
    instead of showing an empty tooltip.
    """
    name = canonical(term)
    if name is None:
        raise KeyError(f"{term!r} is not in the glossary")
    return GLOSSARY[name]
