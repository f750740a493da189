"""The strategy table (engine.strategies): what each strategy does, declared once."""

import re
from pathlib import Path

import pytest

from engine.strategies import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    spoken_list,
    strategies_that,
    strategy_capabilities,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_spec_strategies_and_what_they_do():
    assert STRATEGIES == ("RESERVE", "LEND", "LEND_AND_BORROW")
    assert DEFAULT_STRATEGY in STRATEGIES
    reserve, lend, both = (strategy_capabilities(name) for name in STRATEGIES)
    assert (reserve.lends, reserve.borrows, reserve.holds_idle) == (False, False, True)
    assert (lend.lends, lend.borrows, lend.holds_idle) == (True, False, False)
    assert (both.lends, both.borrows, both.holds_idle) == (True, True, False)
    assert strategies_that(takes_borrow_limit=True) == ("LEND_AND_BORROW",)
    assert strategies_that(lends=True) == ("LEND", "LEND_AND_BORROW")
    # A strategy that holds its idle capacity never lends it.
    assert not any(strategy_capabilities(name).lends for name in strategies_that(holds_idle=True))


def test_asking_for_an_unknown_capability_fails():
    with pytest.raises(TypeError, match="no such capability: flies"):
        strategies_that(flies=True)
    with pytest.raises(TypeError):
        strategies_that(meaning="x")


def test_messages_list_strategies_as_sentences():
    assert spoken_list(STRATEGIES) == "RESERVE, LEND or LEND_AND_BORROW"
    assert spoken_list(("LEND",)) == "LEND"


# Where a strategy's name may be written: the engine (the table), the policy-code
# translators (other products' words for them), migrations, tests, the demo, benchmarks.
ALLOWED = ("engine/", "governance/policy_code/", "demo/", "tests/")
NAMES = re.compile(r"\b(RESERVE|LEND_AND_BORROW|LEND)\b")


def test_no_strategy_is_named_outside_the_table_and_its_translators():
    named = []
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT).as_posix()
        if path.suffix not in {".py", ".html", ".js"} or not path.is_file():
            continue
        if relative.startswith((".venv/", "var/", "node_modules/")) or "/migrations/" in relative:
            continue
        if relative.startswith(ALLOWED) or "bench" in path.name:
            continue
        if NAMES.search(path.read_text()):
            named.append(relative)
    assert named == []
