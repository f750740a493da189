"""GPU-hours and cost by team and by share (the chargeback view): each scope's use of
each instance type in the month, used within its limit, borrowed, and lent to others
(the rollups' `usage_by_type`), priced at the types' prices per instance-hour
(formulas.cost). Pure: the prices come in (selectors.reads.instance_type_prices).

A type without a price has no cost: a scope whose types are all unpriced has none (null,
"—"), one with some priced types is costed on those and names the others; with no
price set at all, there are no cost figures anywhere (no column of zeros).
"""

from __future__ import annotations

from decimal import Decimal

from governance.dashboards import formulas as f
from governance.dashboards.selectors.scopes import USE_CATEGORIES


def cost_figures(data: dict | None, prices: dict[str, Decimal], currency: str) -> dict:
    """{"currency", "gpu_hours" and "instance_hours": {within_limit, borrowed, lent},
    "cost": the same in money or None, "priced_types", "unpriced_types"} of one rollup."""
    by_type = (data or {}).get("usage_by_type") or {}
    used = sorted(
        name for name, figures in by_type.items() if any(figures["instance_hours"].values())
    )
    priced = [name for name in used if prices.get(name) is not None]
    costs = None
    if priced:
        costs = {
            category: sum(
                f.cost(
                    instance_hours=by_type[name]["instance_hours"][category],
                    price_per_hour=prices[name],
                )
                for name in priced
            )
            for category in USE_CATEGORIES
        }
    return {
        "currency": currency,
        "gpu_hours": {
            c: sum(by_type[name]["gpu_hours"][c] for name in used) for c in USE_CATEGORIES
        },
        "instance_hours": {
            c: sum(by_type[name]["instance_hours"][c] for name in used) for c in USE_CATEGORIES
        },
        "cost": costs,
        "priced_types": priced,
        "unpriced_types": [name for name in used if name not in priced],
    }
