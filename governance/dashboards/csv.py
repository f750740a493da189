"""CSV exports of the dashboard: one file per table or figure, the same rows the page
shows (governance.dashboards.page.tables)."""

from __future__ import annotations

import csv
import io

DATASETS = (
    "kpis",
    "turnaround",
    "lender-wait",
    "preemptions",
    "recovery",
    "policy",
    "yielders",
    "shares",
)


def table_csv(table: dict) -> str:
    """A table ({"header", "rows"}) as CSV text; missing values are empty cells."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table["header"])
    for row in table["rows"]:
        writer.writerow(["" if value is None else value for value in row])
    return buffer.getvalue()


def csv_filename(dataset: str, month, queue_name: str | None) -> str:
    scope = f"-{queue_name}" if queue_name else ""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in scope)
    return f"signals-{month:%Y-%m}{safe}-{dataset}.csv"
