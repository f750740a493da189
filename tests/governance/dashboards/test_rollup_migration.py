"""Migration 0009 moves each stored rollup's version from inside its figures to its own
column: the rows of the current version stay current, the rows of version 1 (which carried no
version) become stale and are recomputed on read."""

from __future__ import annotations

import datetime as dt
import importlib

from django.apps import apps

from governance.dashboards.rollups import rollups_refresh_stale
from governance.dashboards.selectors.reads import rollup_current
from governance.dashboards.selectors.signals import SIGNALS_VERSION
from governance.models import MonthlyRollup

migration = importlib.import_module("governance.migrations.0009_monthlyrollup_version")


def _row(month, data):
    return MonthlyRollup.objects.create(
        month=month, scope="all", data=data, computed_at=dt.datetime.now(dt.UTC)
    )


def test_the_version_moves_out_of_the_figures_into_its_column(db):
    v2 = _row(dt.date(2025, 3, 1), {"version": SIGNALS_VERSION, "jobs_ended": 4})
    v1 = _row(dt.date(2025, 2, 1), {"jobs_ended": 3})
    migration.version_from_data(apps, None)
    v2.refresh_from_db()
    v1.refresh_from_db()
    assert (v2.version, v2.data) == (SIGNALS_VERSION, {"jobs_ended": 4})
    assert (v1.version, v1.data) == (1, {"jobs_ended": 3})
    assert rollup_current(month=dt.date(2025, 3, 1))
    assert not rollup_current(month=dt.date(2025, 2, 1))
    assert rollups_refresh_stale() == [dt.date(2025, 2, 1)]
    # And back: the version returns into the figures.
    migration.version_into_data(apps, None)
    v2.refresh_from_db()
    assert v2.data == {"version": SIGNALS_VERSION, "jobs_ended": 4}


def test_a_row_of_unknown_version_is_stale(db):
    _row(dt.date(2025, 1, 1), {"jobs_ended": 1})  # the column's default: 0
    assert not rollup_current(month=dt.date(2025, 1, 1))
