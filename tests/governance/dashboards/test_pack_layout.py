"""The pack as a leader reads it: every page's text boxes apart (headers wrapped, nothing
printed on top of anything), no page left mostly blank, every chart's series drawn and
named, idle teams in one line, and fairness compared within each queue.

The PDF is read back with pypdf and laid out box by box (pdf_boxes): each string's
position, font and size from the page's content stream, its width from ReportLab's font
metrics."""

from __future__ import annotations

import csv
import io
import zipfile
from io import StringIO

import pytest
from django.core.files.storage import default_storage
from pypdf import PdfReader
from reportlab.graphics.charts.lineplots import LinePlot
from reportlab.graphics.shapes import String
from reportlab.lib.pagesizes import A4

from fleet.models import QuotaShare
from governance.dashboards.pack import _line_chart, pack_make
from governance.dashboards.page import KPI_BY_KEY
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.calendar import months_back
from governance.dashboards.selectors.reads import empty_signals
from tests.governance.dashboards.conftest import load_into_db
from tests.governance.dashboards.pdf_boxes import overlapping_boxes, page_boxes
from tests.governance.dashboards.test_pack import april, storage  # noqa: F401 (fixtures)
from tests.governance.dashboards.test_signals import A_ORIGIN, APRIL, MARCH

IDLE_TEAMS = 9
# A second queue where nothing runs, with ten times the first queue's entitlement: its
# teams are idle, and one of its shares belongs to the first queue's borrower.
IDLE_FLEET = {
    "name": "idle-fleet",
    "queue": {"capacity": {"gpu": 40}},
    "shares": [
        {"name": f"t{index:02}", "capacity_limits": {"gpu": 4}, "strategy": "LEND"}
        for index in range(IDLE_TEAMS + 1)
    ],
    "jobs": [],
}


@pytest.fixture
def fleet(april):  # noqa: F811 (the fixture imported above)
    load_into_db(IDLE_FLEET, origin=A_ORIGIN, gpu_count=8)
    QuotaShare.objects.filter(queue__name="idle-fleet", name="t00").update(team=april.team)
    rollups_refresh(month=MARCH)
    rollups_refresh(month=APRIL)
    return april


def pack_reader(month=APRIL) -> PdfReader:
    pack = pack_make(month=month)
    with default_storage.open(pack.pdf) as handle:
        return PdfReader(io.BytesIO(handle.read()))


def test_no_two_text_boxes_overlap_on_any_page(fleet):
    reader = pack_reader()
    pairs = overlapping_boxes(reader)
    assert not pairs, "text printed on top of other text: " + "; ".join(
        f"page {a.page + 1}: {a.text!r} and {b.text!r}" for a, b in pairs[:10]
    )
    width = A4[0]
    for index in range(len(reader.pages)):
        for box in page_boxes(reader, index):
            assert box.x0 >= 0 and box.x1 <= width, f"{box.text!r} runs off page {index + 1}"


def test_no_page_but_the_last_is_left_mostly_blank(fleet):
    """Pages break where the next block no longer fits (a table splits, its header
    repeated): the text of every page but the last reaches its bottom third."""
    reader = pack_reader()
    margin = 16 * 72 / 25.4
    frame = A4[1] - 2 * margin
    for index in range(len(reader.pages) - 1):
        lowest = min(box.y0 for box in page_boxes(reader, index))
        blank = (lowest - margin) / frame
        assert blank < 0.3, f"page {index + 1} is {blank:.0%} blank at its foot"


def pdf_text(reader: PdfReader) -> str:
    return " ".join(" ".join(page.extract_text() for page in reader.pages).split())


def test_idle_teams_are_one_line_not_rows_of_zeros(fleet):
    text = pdf_text(pack_reader())
    idle = [f"idle-fleet-t{index:02}" for index in range(1, IDLE_TEAMS + 1)]
    assert f"{IDLE_TEAMS} idle teams (no GPU-hour delivered, no job started or waiting;" in text
    assert ": " + ", ".join(idle) + "." in text
    for name in idle:
        assert text.count(name) == 1, name  # in the line, in no table
    # The teams that ran keep their rows.
    assert "lend-borrow-borrower 75.2" in text and "lend-borrow-lender 0.0" in text


def test_fairness_compares_a_team_with_its_entitlement_in_each_queue(fleet):
    """The borrower ran everything in its queue on half that queue's entitlement: 2.00
    there. Against every queue's entitlement (the idle fleet's included: its own share
    there and the other teams'), the same figures would say 7.33."""
    text = pdf_text(pack_reader())
    assert "Fairness by queue" in text
    assert "lend-borrow lend-borrow-borrower 75.2 11,520.0 100% 50% 2.00" in text
    assert "7.33" not in text
    assert "and used none of it (fairness 0): lend-borrow-lender in lend-borrow." in text
    assert "1 idle queue (nothing ran, no fairness to compare): idle-fleet." in text
    # The definition printed says so.
    assert "The totals are the queue's own, never those of every queue" in text


def test_the_csvs_carry_fairness_by_queue_not_across_queues(fleet):
    pack = pack_make(month=APRIL)
    with default_storage.open(pack.csv) as handle:
        archive = zipfile.ZipFile(io.BytesIO(handle.read()))

    def rows(dataset):
        text = archive.read(f"signals-2025-04-{dataset}.csv").decode("utf-8-sig")
        return list(csv.reader(StringIO(text)))

    fairness = rows("fairness")
    assert fairness[0] == [
        "queue",
        "team",
        "delivered GPU-hours",
        "entitled GPU-hours",
        "queue delivered GPU-hours",
        "queue entitled GPU-hours",
        "part of delivered",
        "part of entitlement",
        "fairness ratio",
    ]
    by_pair = {(row[0], row[1]): row for row in fairness[2:]}
    assert len(by_pair) == 2 + IDLE_TEAMS + 1  # every (queue, team), idle ones included
    borrower = by_pair["lend-borrow", "lend-borrow-borrower"]
    assert float(borrower[6]) == 1.0 and float(borrower[7]) == 0.5
    assert float(borrower[8]) == pytest.approx(2.0)
    assert by_pair["idle-fleet", "lend-borrow-borrower"][8] == ""  # nothing ran there
    # The team table's ratio combines the team's queues (the idle one weighs nothing):
    # 2.0, as in its one busy queue, never the 7.33 of every queue's entitlement.
    teams = rows("teams")
    assert len(teams[0]) == len(teams[1]) == len(teams[2])
    team = {row[0]: dict(zip(teams[0], row, strict=True)) for row in teams[2:]}
    borrower = team["lend-borrow-borrower"]
    assert float(borrower["fairness ratio"]) == pytest.approx(2.0)
    assert borrower["queues compared"] == "1"
    assert float(borrower["part of its queue's entitlement"]) == 0.5


THREE = ["entitlement_honoured", "goodput", "completion_rate_preempted"]


def trend_of(values: list) -> dict:
    """A view's 12 months where the three percentages all equal `values[i]` (None: a
    month without figures)."""
    months = months_back(APRIL, 12)
    trend = []
    for month, value in zip(months, values, strict=True):
        data = None
        if value is not None:
            data = empty_signals(month=month)
            data["entitlement_honoured"] = {"fraction": value, "n": 40, "honoured": 40}
            data["goodput"] = data["completion_rate_preempted"] = value
        trend.append((month, data))
    return {"trend": trend}


def test_three_equal_series_are_all_drawn_and_named():
    """Three figures at 100 % in the same months (the demo's case, where the chart
    showed one line): each is drawn, the later ones narrower than the ones beneath and
    with their own marker, so all three show; each is named in the legend with its
    latest figure; a month without figures is a gap, not a line across it."""
    view = trend_of([None] * 4 + [1.0] * 4 + [None] + [0.99] * 3)
    chart = _line_chart(view, THREE, "Entitlement honoured, goodput, preempted jobs", 100)
    (plot,) = [shape for shape in chart.contents if isinstance(shape, LinePlot)]
    assert [[x for x, _ in series] for series in plot.data] == [[4, 5, 6, 7], [9, 10, 11]] * 3
    drawn = [
        (plot.lines[i].strokeColor, plot.lines[i].strokeWidth, plot.lines[i].symbol.kind)
        for i in range(len(plot.data))
    ]
    assert len(set(drawn)) == 3  # one style a series, each for both runs
    widths = [width for _, width, _ in drawn[::2]]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 3
    assert len({marker for _, _, marker in drawn}) == 3
    legend = [shape.text for shape in chart.contents if isinstance(shape, String)]
    for key in THREE:
        assert f"{KPI_BY_KEY[key].label} (Apr 25: 99%)" in legend


def test_the_definitions_print_in_the_fonts_characters(fleet):
    """ReportLab's built-in fonts have no floor brackets or minus sign (they printed as
    black boxes), and the docstrings' *emphasis* is set in italics, not asterisks."""
    text = pdf_text(pack_reader()).split("How these figures are counted", 1)[1]
    assert "(element floor((n-1)/2) of the sorted waits" in text
    assert "(see entitled start)" in text and "*" not in text
