"""The quota rules every other layer reads from the engine: the borrow cap, the largest
job a share's quota allows, and whether a job can ever start (scenario format, rules 1
and 7)."""

import math

from engine.quota import borrow_cap, misconfiguration, quota_max
from engine.types import (
    BORROWABLE_CAPACITY_EXCEEDED,
    QUOTA_MANAGEMENT_LIMIT_EXCEEDED,
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
)


def test_the_borrow_cap_is_a_floor_rounded_percent_of_the_limit_and_minus_one_unlimited():
    assert borrow_cap(4, 50) == 2
    assert borrow_cap(3, 50) == 1  # floor(1.5)
    assert borrow_cap(4, 0) == 0
    assert borrow_cap(4, 200) == 8
    assert borrow_cap(4, -1) is None


def test_the_quota_allows_the_limit_plus_the_borrow_cap_only_for_lend_and_borrow():
    assert quota_max(4, "RESERVE", None) == 4
    assert quota_max(4, "LEND", None) == 4
    assert quota_max(4, "LEND_AND_BORROW", 50) == 6
    assert quota_max(4, "LEND_AND_BORROW", -1) == math.inf


def test_misconfiguration_reasons_come_in_the_specs_order():
    assert misconfiguration(5, 4, 8, 8) == SERVICE_ENVIRONMENT_MAX_RESOURCE
    assert misconfiguration(5, 8, 4, 8) == QUOTA_MANAGEMENT_LIMIT_EXCEEDED
    assert misconfiguration(5, 8, 8, 4) == BORROWABLE_CAPACITY_EXCEEDED
    assert misconfiguration(4, 4, 4) is None  # what borrowing allows defaults to no bound
