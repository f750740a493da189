"""What each share strategy does, declared once: every rule that depends on a strategy
asks this table, in the engine and outside it (validation, the pass, forms, serializers,
dashboards, the glossary, pages and their script through data attributes).

- `lends`: its unused limit is idle capacity others may borrow (and reclaim takes back).
- `borrows`: its jobs may run beyond its limit on capacity others lend.
- `holds_idle`: its unused limit is held for its own jobs in every phase (v1.1).
- `takes_borrow_limit`: it has a borrow limit (a percent of its limit; -1 unlimited).

A new strategy is a row here (and, outside the engine, its words in the policy-code
translators and a migration of the database's constraint).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StrategyCapabilities:
    name: str
    lends: bool
    borrows: bool
    holds_idle: bool
    takes_borrow_limit: bool
    # What it means, in one sentence of plain words (the glossary and the pages say it).
    meaning: str


_TABLE = (
    StrategyCapabilities(
        name="RESERVE",
        lends=False,
        borrows=False,
        holds_idle=True,
        takes_borrow_limit=False,
        meaning="The share keeps its idle instances for its own team. Nobody else may use "
        "them, so the team starts at once, but idle capacity stays unused.",
    ),
    StrategyCapabilities(
        name="LEND",
        lends=True,
        borrows=False,
        holds_idle=False,
        takes_borrow_limit=False,
        meaning="The share lends its idle instances to other shares. When the owning team "
        "needs them back, the borrowers' jobs are preempted (reclaimed). It never borrows.",
    ),
    StrategyCapabilities(
        name="LEND_AND_BORROW",
        lends=True,
        borrows=True,
        holds_idle=False,
        takes_borrow_limit=True,
        meaning="The share lends its idle instances and may also borrow idle instances of "
        "other shares, up to its borrow limit. Borrowed instances can be reclaimed at any "
        "time.",
    ),
)

CAPABILITIES: dict[str, StrategyCapabilities] = {row.name: row for row in _TABLE}
# In the order documents and messages list them.
STRATEGIES: tuple[str, ...] = tuple(CAPABILITIES)
# A new share's strategy when none is given.
DEFAULT_STRATEGY = "LEND"


def strategy_capabilities(name: str) -> StrategyCapabilities:
    """The row of strategy `name` (KeyError for an unknown one: validate first)."""
    return CAPABILITIES[name]


def strategies_that(**capabilities: bool) -> tuple[str, ...]:
    """The strategies with these capabilities, in table order."""
    for key in capabilities:
        if key not in StrategyCapabilities.__dataclass_fields__ or key in ("name", "meaning"):
            raise TypeError(f"no such capability: {key}")
    return tuple(
        row.name
        for row in _TABLE
        if all(getattr(row, key) == value for key, value in capabilities.items())
    )


def spoken_list(names: tuple[str, ...]) -> str:
    """'A', 'A or B', 'A, B or C': how messages list strategies."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} or {names[-1]}"
