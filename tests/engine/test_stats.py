"""The one home of the statistics: nearest-rank percentiles, interpolated quantiles and
the box of a box plot, at their edges."""

import math
import random

import pytest

from engine.stats import nearest_rank, percentile, quantile, quartiles


def test_nothing_to_summarise_gives_none_not_an_error():
    assert nearest_rank([], 50) is None
    assert percentile([], 90) is None
    assert quantile([], 0.5) is None
    assert quartiles([]) is None


@pytest.mark.parametrize("percent", [0, 1, 25, 50, 90, 99, 100])
def test_one_value_is_every_percentile(percent):
    assert nearest_rank([42], percent) == 42
    assert quantile([42], percent / 100) == 42


def test_p0_is_the_minimum_and_p100_the_maximum():
    values = [3, 5, 8, 13, 21]
    assert nearest_rank(values, 0) == 3
    assert nearest_rank(values, 100) == 21
    assert quantile(values, 0) == 3
    assert quantile(values, 1) == 21


def test_nearest_rank_is_the_smallest_value_with_that_share_at_or_below_it():
    values = list(range(1, 11))  # 1..10
    assert nearest_rank(values, 50) == 5  # 5 of 10 at or below 5
    assert nearest_rank(values, 51) == 6
    assert nearest_rank(values, 90) == 9
    assert nearest_rank(values, 91) == 10
    assert nearest_rank([10, 20, 30, 40], 25) == 10
    assert nearest_rank([10, 20, 30, 40], 26) == 20


def test_nearest_rank_against_its_definition_on_random_data():
    rng = random.Random(14)
    for _ in range(200):
        values = sorted(rng.randint(0, 20) for _ in range(rng.randint(1, 30)))
        percent = rng.randint(0, 100)
        got = nearest_rank(values, percent)
        at_or_below = sum(v <= got for v in values)
        assert at_or_below * 100 >= percent * len(values)
        smaller = [v for v in values if v < got]
        assert not smaller or sum(v <= smaller[-1] for v in values) * 100 < percent * len(values)


def test_ties_give_the_tied_value():
    values = [7, 7, 7, 7, 9]
    assert [nearest_rank(values, p) for p in (0, 25, 50, 80, 81, 100)] == [7, 7, 7, 7, 9, 9]
    assert quartiles([4, 4, 4]) == {"min": 4, "q1": 4, "p50": 4, "q3": 4, "p90": 4, "max": 4}


def test_percentile_sorts_for_the_caller():
    assert percentile([30, 10, 20], 50) == 20
    assert percentile((x for x in [0.3, 0.1, 0.2]), 100) == 0.3


def test_quantile_interpolates_between_neighbours():
    assert quantile([0, 10], 0.5) == 5
    assert math.isclose(quantile([1.0, 2.0, 4.0], 0.75), 3.0)
    assert quantile([1, 2, 3, 4, 5], 0.5) == 3


def test_quartiles_of_a_small_sample():
    assert quartiles([1, 2, 3, 4, 5, 6, 7, 8]) == {
        "min": 1,
        "q1": 2,
        "p50": 4,
        "q3": 6,
        "p90": 8,
        "max": 8,
    }


@pytest.mark.parametrize("percent", [-1, 100.5])
def test_a_percent_out_of_range_is_refused_by_name(percent):
    with pytest.raises(ValueError, match="percent"):
        nearest_rank([1, 2], percent)


@pytest.mark.parametrize("q", [-0.1, 1.5])
def test_a_quantile_out_of_range_is_refused_by_name(q):
    with pytest.raises(ValueError, match="q must be"):
        quantile([1, 2], q)
