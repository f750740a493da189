"""CSV exports of the dashboard: one file per table or figure, the same rows the page
shows (governance.dashboards.page.tables).

Files are UTF-8 with a byte order mark and say so in the Content-Type: without the mark,
Excel (the leadership's tool for these files) reads a CSV as the local ANSI code page and
garbles every non-ASCII name; Python's csv (encoding="utf-8-sig"), pandas and
LibreOffice read the mark as what it is. Text that a spreadsheet would take for a formula
(=, +, -, @, or a tab or carriage return first) is neutralised with a leading apostrophe,
as OWASP advises against CSV injection: a team or job name is data, never a formula.
Numbers stay numbers (-3 is data, not a formula).
"""

from __future__ import annotations

import csv
import io

from django.http import HttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
BOM = "\ufeff"

DATASETS = (
    "kpis",
    "capacity",
    "turnaround",
    "waiting",
    "reclaim",
    "stops",
    "classes",
    "lost",
    "recovery",
    "policy",
    "yielders",
    "shares",
    "teams",
    "trend",
    "cost",
)
# The monthly pack's CSVs: the dashboard's, and fairness queue by queue (the page shows
# a team's fairness within the queue it is filtered to; the pack has every queue).
PACK_DATASETS = (*DATASETS, "fairness")


def safe_cell(value):
    """The cell as written: missing values empty, formula-like text neutralised."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def table_csv(table: dict) -> str:
    """A table ({"header", "units", "rows"}) as CSV text: the header, a row of units
    (seconds, hours, counts, fractions), then raw values; missing values are empty."""
    buffer = io.StringIO()
    # RFC 4180 line ends: a cell holding a carriage return or a newline is then quoted.
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([safe_cell(value) for value in table["header"]])
    writer.writerow([safe_cell(value) for value in table["units"]])
    for row in table["rows"]:
        writer.writerow([safe_cell(value) for value in row])
    return buffer.getvalue()


def csv_response(table: dict, filename: str) -> HttpResponse:
    """The table as a CSV download (UTF-8, with its charset declared)."""
    response = HttpResponse(
        (BOM + table_csv(table)).encode("utf-8"), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def csv_filename(dataset: str, month, scope_name: str | None) -> str:
    """`signals-2025-03[-queue or team]-dataset.csv`, safe in any file system."""
    scope = f"-{scope_name}" if scope_name else ""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in scope)
    return f"signals-{month:%Y-%m}{safe}-{dataset}.csv"
