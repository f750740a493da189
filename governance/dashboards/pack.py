"""The monthly leadership pack: one PDF and the month's CSVs, stored, listed, emailed.

`pack_make` draws the PDF with ReportLab (offline, no browser): the key figures with
their n and the change from the month before, the 12-month trends, the teams that
worked (idle ones in one line), fairness queue by queue, the policy changes with who
made and who approved them, and the exceptions granted and expired; the CSVs are the
dashboard's tables (governance.dashboards.page.tables), so the pack says what the page
says, and fairness by queue (formulas.fairness_by_queue). Files live in the default storage under
`packs/YYYY-MM/` and are listed from there (no table: the folder is the record).

Beat makes last month's pack on the first of each month and emails it to leadership
(governance.dashboards.tasks); `pack_make` also runs on demand from the dashboard and
`manage.py signals_pack`.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import zipfile
from dataclasses import dataclass
from xml.sax.saxutils import escape

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.mail import EmailMessage
from django.db.models import Q
from django.utils import timezone
from reportlab.graphics.charts.barcharts import VerticalBarChart
from reportlab.graphics.charts.lineplots import LinePlot
from reportlab.graphics.shapes import Drawing, Line, Rect, String
from reportlab.graphics.widgets.markers import makeMarker
from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.platypus import (
    CondPageBreak,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from core import permissions
from governance.dashboards import figures
from governance.dashboards import formulas as f
from governance.dashboards.csv import PACK_DATASETS, csv_filename, table_csv
from governance.dashboards.page import (
    COST_LABELS,
    KPI_BY_KEY,
    dashboard_view,
    display,
    fairness_text,
    kpi_values,
)
from governance.dashboards.rollups import rollups_read, rollups_refresh
from governance.dashboards.selectors.calendar import (
    month_bounds,
    month_start,
    next_month,
    previous_month,
)
from governance.dashboards.selectors.reads import rollup_scope
from governance.models import ExceptionEvent, PolicyChange

PACK_ROOT = "packs"
MONTH_FOLDER = re.compile(r"^\d{4}-\d{2}$")
KINDS = {"pdf": "application/pdf", "csv": "application/zip"}
SENT = "sent.json"
TEXT = colors.HexColor("#1f2933")
MUTED = colors.HexColor("#4b5563")
GRID = colors.HexColor("#d5dbe3")
# Beat makes last month's pack on the first of each month at this hour (UTC): the
# `dashboard-monthly-pack` entry of config/celery.py (a test keeps the two equal).
PACK_HOUR_UTC = 6


@dataclass(frozen=True)
class Pack:
    month: dt.date
    pdf: str  # storage names
    csv: str
    made_at: dt.datetime | None
    sent_at: str | None


def _folder(month: dt.date) -> str:
    return f"{PACK_ROOT}/{month:%Y-%m}"


def _names(month: dt.date) -> dict[str, str]:
    folder = _folder(month)
    return {
        "pdf": f"{folder}/signals-{month:%Y-%m}.pdf",
        "csv": f"{folder}/signals-{month:%Y-%m}-csv.zip",
        "sent": f"{folder}/{SENT}",
    }


# -- reading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PackSchedule:
    """When beat makes the next pack, and of which month; what the dashboard says."""

    at: dt.datetime  # the next run, UTC
    month: dt.date  # the month that run makes the pack of (the one before `at`)
    day: str  # "today", "tomorrow" or "on Friday 1 January 2027", in the time zone given
    overdue: dt.date | None  # a month whose pack was due earlier today and is not made
    due_at: dt.datetime | None = None  # when that overdue pack was due


def _run_at(month: dt.date) -> dt.datetime:
    return dt.datetime.combine(month_start(month), dt.time(PACK_HOUR_UTC), tzinfo=dt.UTC)


def pack_schedule(*, now: dt.datetime, made: set[dt.date] | None = None, tz=None) -> PackSchedule:
    """The next run of the monthly pack after `now`: the first of this month at
    PACK_HOUR_UTC if that is still ahead (on the 1st before the hour it is today, the pack
    of last month), else the first of next month. `made` are the months whose packs exist:
    on the 1st after the hour, last month's missing pack is `overdue` (beat or its worker
    did not run). `day` is said in `tz` (default: the active time zone)."""
    now = now.astimezone(dt.UTC)
    this_run = _run_at(now.date())
    at = this_run if now < this_run else _run_at(next_month(now.date()))
    overdue = None
    if made is not None and this_run <= now < this_run + dt.timedelta(days=1):
        missed = previous_month(now.date())
        overdue = None if missed in made else missed
    tz = tz or timezone.get_current_timezone()
    local_at, today = at.astimezone(tz).date(), now.astimezone(tz).date()
    if local_at == today:
        day = "today"
    elif local_at == today + dt.timedelta(days=1):
        day = "tomorrow"
    else:
        day = f"on {local_at:%A} {local_at.day} {local_at:%B %Y}"
    return PackSchedule(
        at=at,
        month=previous_month(at.date()),
        day=day,
        overdue=overdue,
        due_at=this_run if overdue else None,
    )


def packs_list() -> list[Pack]:
    """The packs made so far, newest month first (from the storage folder)."""
    if not default_storage.exists(PACK_ROOT):
        return []
    folders, _ = default_storage.listdir(PACK_ROOT)
    packs = []
    for folder in sorted((name for name in folders if MONTH_FOLDER.match(name)), reverse=True):
        month = dt.datetime.strptime(folder, "%Y-%m").date()
        names = _names(month)
        if not default_storage.exists(names["pdf"]):
            continue
        sent_at = None
        if default_storage.exists(names["sent"]):
            with default_storage.open(names["sent"]) as handle:
                sent_at = json.load(handle).get("sent_at")
        packs.append(
            Pack(
                month=month,
                pdf=names["pdf"],
                csv=names["csv"],
                made_at=default_storage.get_modified_time(names["pdf"]),
                sent_at=sent_at,
            )
        )
    return packs


def pack_file(*, month: dt.date, kind: str):
    """(file name, open file, content type) of a stored pack part, or None."""
    name = _names(month).get(kind)
    if kind not in KINDS or not default_storage.exists(name):
        return None
    return name.rsplit("/", 1)[1], default_storage.open(name), KINDS[kind]


# -- making -----------------------------------------------------------------------------


def pack_make(*, month: dt.date, email: bool = False, now: dt.datetime | None = None) -> Pack:
    """Draw and store the pack of `month` (replacing an earlier one); with `email`, send
    it to leadership. Recomputes the month's figures first when it has none."""
    month = month_start(month)
    now = now or timezone.now()
    if rollup_scope(month=month, scope="all") is None:
        rollups_refresh(month=month, now=now)
    stored = rollups_read(month=month)
    view = dashboard_view(stored=stored, month=month, queue_id=None)
    record = _record(month)
    names = _names(month)
    pdf = _pdf(view, record, now)
    archive = _csv_zip(view, month)
    for key, content in (("pdf", pdf), ("csv", archive)):
        if default_storage.exists(names[key]):
            default_storage.delete(names[key])
        default_storage.save(names[key], ContentFile(content))
    if email:
        _send(month, pdf, archive, names, now)
    return next(pack for pack in packs_list() if pack.month == month)


def pack_send_once(*, month: dt.date, now: dt.datetime | None = None) -> bool:
    """Beat's pack: make and email the month's pack unless it was already sent (a task
    delivered twice sends one email). Returns whether it sent."""
    month = month_start(month)
    if default_storage.exists(_names(month)["sent"]):
        return False
    now = now or timezone.now()
    rollups_refresh(month=month, now=now)  # late events of the month just ended
    pack_make(month=month, email=True, now=now)
    return True


def leadership_emails() -> list[str]:
    users = (
        get_user_model()
        .objects.filter(groups__name=permissions.LEADERSHIP, is_active=True)
        .exclude(email="")
    )
    return sorted(set(users.values_list("email", flat=True)))


def _send(month, pdf: bytes, archive: bytes, names: dict, now: dt.datetime) -> None:
    recipients = leadership_emails()
    if recipients:
        message = EmailMessage(
            subject=f"Leadership pack: {month:%B %Y}",
            body=(
                f"The signals of {month:%B %Y}: key figures with their n, the last 12 months, "
                "the teams, the policy changes and the exceptions, in the attached PDF; "
                "the tables behind them in the attached CSVs.\n\n"
                f"Dashboard: {settings.SITE_URL}/dashboard/?month={month:%Y-%m}\n"
            ),
            to=recipients,
        )
        message.attach(names["pdf"].rsplit("/", 1)[1], pdf, KINDS["pdf"])
        message.attach(names["csv"].rsplit("/", 1)[1], archive, KINDS["csv"])
        message.send()
    note = json.dumps({"sent_at": now.isoformat(), "to": recipients}).encode()
    if default_storage.exists(names["sent"]):
        default_storage.delete(names["sent"])
    default_storage.save(names["sent"], ContentFile(note))


def _csv_zip(view: dict, month: dt.date) -> bytes:
    tables = _pack_tables(view)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for dataset in PACK_DATASETS:
            archive.writestr(
                csv_filename(dataset, month, None), "\ufeff" + table_csv(tables[dataset])
            )
    return buffer.getvalue()


def _pack_tables(view: dict) -> dict[str, dict]:
    """The dashboard's tables (the team table with each team's fairness combined over
    its queues, as the page shows it), and fairness queue by queue."""
    tables = dict(view["tables"])
    tables["fairness"] = {
        "title": "Fairness by queue",
        "header": [
            "queue",
            "team",
            "delivered GPU-hours",
            "entitled GPU-hours",
            "queue delivered GPU-hours",
            "queue entitled GPU-hours",
            "part of delivered",
            "part of entitlement",
            "fairness ratio",
        ],
        "units": ["", "", "GPU-hours", "GPU-hours", "GPU-hours", "GPU-hours"]
        + ["fraction", "fraction", "ratio"],
        "rows": [
            [
                p["queue_name"],
                p["team_name"],
                p["delivered_gpu_hours"],
                p["entitled_gpu_hours"],
                p["queue_delivered_gpu_hours"],
                p["queue_entitled_gpu_hours"],
                p["delivered_fraction"],
                p["entitled_fraction"],
                p["ratio"],
            ]
            for p in _fairness_rows(view)
        ],
    }
    return tables


def _record(month: dt.date) -> dict:
    """The month's policy changes (who made them, who approved them) and exceptions
    granted and expired."""
    start, end = month_bounds(month)
    changes = (
        PolicyChange.objects.filter(created_at__gte=start, created_at__lt=end)
        .select_related("actor", "exception_request__decided_by", "queue", "share")
        .prefetch_related("whatif_comparisons__reviewer", "proposals__reviewer")
        .order_by("created_at", "id")
    )
    rows = []
    for change in changes:
        approver = ""
        if change.exception_request_id and change.exception_request.decided_by:
            approver = f"{change.exception_request.decided_by} (exception owner)"
        else:
            reviewed = [(p.reviewer, "proposal review") for p in change.proposals.all()] + [
                (c.reviewer, "what-if review") for c in change.whatif_comparisons.all()
            ]
            approver = next((f"{who} ({how})" for who, how in reviewed if who), "")
        rows.append(
            {
                "at": change.created_at,
                "what": change.object_repr,
                "cause": change.get_cause_display(),
                "by": str(change.actor) if change.actor else "the system",
                "approved_by": approver or "—",
                "reason": change.reason,
            }
        )
    events = (
        ExceptionEvent.objects.filter(
            Q(type=ExceptionEvent.Type.APPROVED) | Q(type=ExceptionEvent.Type.EXPIRED),
            at__gte=start,
            at__lt=end,
        )
        .select_related("request__team", "request__urgency", "request__decided_by", "actor")
        .order_by("at", "id")
    )
    exceptions = {"granted": [], "expired": []}
    for event in events:
        request = event.request
        exceptions["granted" if event.type == ExceptionEvent.Type.APPROVED else "expired"].append(
            {
                "at": event.at,
                "id": request.pk,
                "team": request.team.name if request.team_id else "",
                "kind": request.get_kind_display(),
                "urgency": request.urgency.name if request.urgency_id else "",
                "decided_by": str(request.decided_by) if request.decided_by else "—",
                "window": f"{request.window_start:%d %b %H:%M} – {request.window_end:%d %b %H:%M}",
            }
        )
    return {"changes": rows, "exceptions": exceptions}


# -- the PDF ----------------------------------------------------------------------------

MARGIN_X, MARGIN_Y = 18 * mm, 16 * mm
FRAME_WIDTH = A4[0] - 2 * MARGIN_X
# A section starts on the next page unless this much room is left for its heading, a
# line of text and the first rows of its table: no heading alone at a page's foot, and
# no page left mostly blank (tables split across pages, their header repeated).
SECTION_ROOM = 40 * mm
CHART_HEIGHT = 62 * mm
LEGEND_ROW = 11
# The line charts' series in drawing order: the widest line and marker first, so that a
# series running on top of another (three figures all at 100 %) leaves it visible
# around it, and the marker's shape tells them apart where the colours cannot.
LINE_STYLES = (
    (figures.WITHIN, 4.5, "FilledCircle", 7.5, None),
    (figures.BORROWED, 2.5, "FilledSquare", 5, (5, 2)),
    (figures.FAILED, 1, "FilledTriangle", 3.5, None),
)
ONE_LINE = (figures.WITHIN, 1.5, "FilledCircle", 4, None)
IDLE_TEAMS_LISTED = 60
# ReportLab's built-in fonts print WinAnsi (cp1252) only: what the definitions write
# beyond it, spelt in it.
WINANSI = str.maketrans(
    {
        "\u2212": "-",
        "\u230a": "floor(",
        "\u230b": ")",
        "\u2265": ">=",
        "\u2264": "<=",
        "\u2192": "->",
    }
)
EMPHASIS = re.compile(r"\*([^*]+)\*")
CODE = re.compile(r"`([^`]+)`")


def _styles():
    sheet = getSampleStyleSheet()
    base = ParagraphStyle(
        "base", parent=sheet["BodyText"], fontSize=8.5, leading=11, textColor=TEXT
    )
    cell = ParagraphStyle("cell", parent=base, fontSize=7.5, leading=9, spaceBefore=0)
    head = ParagraphStyle("head", parent=cell, fontName="Helvetica-Bold")
    return {
        "title": ParagraphStyle("title", parent=sheet["Title"], fontSize=18, alignment=0),
        "h2": ParagraphStyle(
            "h2", parent=sheet["Heading2"], fontSize=12, spaceBefore=8, keepWithNext=1
        ),
        "body": base,
        "small": ParagraphStyle("small", parent=base, fontSize=7.5, leading=9.5, textColor=MUTED),
        "cell": cell,
        "cell_right": ParagraphStyle("cell_right", parent=cell, alignment=TA_RIGHT),
        "head": head,
        "head_right": ParagraphStyle("head_right", parent=head, alignment=TA_RIGHT),
    }


def _winansi(value) -> str:
    return str(value).translate(WINANSI)


def _text(value, style) -> Paragraph:
    """A paragraph of data (names, reasons): escaped, as ReportLab reads markup."""
    return Paragraph(escape(_winansi(value)), style)


def _definition(text: str, style) -> Paragraph:
    """A formula's docstring as print: *emphasis* in italics, `names` in Courier."""
    markup = CODE.sub(r'<font face="Courier">\1</font>', escape(_winansi(" ".join(text.split()))))
    return Paragraph(EMPHASIS.sub(r"<i>\1</i>", markup), style)


def _table(styles, header: list[str], rows: list[list], weights: list[float], right=()):
    """A table as wide as the frame, its columns sharing the width by `weights`; every
    cell, header included, a paragraph that wraps within its column (so no text runs
    into the next), the columns in `right` (numbers) right-aligned."""
    widths = [FRAME_WIDTH * weight / sum(weights) for weight in weights]

    def cells(values, kind):
        return [
            _text(value, styles[kind + ("_right" if index in right else "")])
            for index, value in enumerate(values)
        ]

    table = Table(
        [cells(header, "head"), *(cells(row, "cell") for row in rows)],
        colWidths=widths,
        repeatRows=1,
    )
    table.setStyle(
        TableStyle(
            [
                ("LEFTPADDING", (0, 0), (-1, -1), 3),
                ("RIGHTPADDING", (0, 0), (-1, -1), 3),
                ("TOPPADDING", (0, 0), (-1, -1), 2),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 3),
                ("LINEBELOW", (0, 0), (-1, 0), 0.6, TEXT),
                ("LINEBELOW", (0, 1), (-1, -1), 0.25, GRID),
                ("VALIGN", (0, 0), (-1, 0), "BOTTOM"),
                ("VALIGN", (0, 1), (-1, -1), "TOP"),
            ]
        )
    )
    return table


def _section(title: str, styles) -> list:
    return [CondPageBreak(SECTION_ROOM), Paragraph(title, styles["h2"])]


def _kpi_table(view: dict, styles) -> Table:
    rows = []
    for card in view["kpis"]:
        change = card["change"]["text"] + (
            f" ({card['change']['word']})" if card["change"]["word"] else ""
        )
        rows.append(
            [
                card["label"],
                card["display"],
                "" if card["n"] is None else f"{card['n']:,}",
                card["previous_display"],
                change,
            ]
        )
    header = ["Figure", "Value", "n", f"{view['previous_month']:%b %Y}", "Change"]
    return _table(styles, header, rows, [52, 24, 16, 24, 58], right={1, 2, 3})


def _trend_values(view: dict, key: str) -> list:
    return [kpi_values(data)[key][0] if data else None for _, data in view["trend"]]


def _axis_number(value) -> str:
    """An axis tick: thousands grouped, small values with the digits that tell the
    ticks apart (0.02, 0.04, not 0.0, 0.0)."""
    if value == 0:
        return "0"
    if abs(value) >= 10:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _runs(values: list) -> list[list[tuple[int, float]]]:
    """The months that have a figure, as runs of consecutive months: a month without
    one is a gap in the line, never a straight line drawn across it."""
    runs, current = [], []
    for index, value in enumerate(values):
        if value is None:
            if current:
                runs.append(current)
            current = []
        else:
            current.append((index, value))
    if current:
        runs.append(current)
    return runs


def _chart_frame(title: str, entries: list[tuple], height: float = CHART_HEIGHT):
    """A chart's drawing with its title and, under it, its legend: one entry per
    series (a swatch and its name), in rows as wide as the drawing. Returns (drawing,
    top of the plot area)."""
    drawing = Drawing(FRAME_WIDTH, height)
    drawing.add(String(0, height - 10, title, fontName="Helvetica-Bold", fontSize=9))
    x, y = 0.0, height - 10 - LEGEND_ROW - 2
    for swatch, label in entries:
        width = 18 + stringWidth(label, "Helvetica", 7) + 12
        if x and x + width > FRAME_WIDTH:
            x, y = 0.0, y - LEGEND_ROW
        for shape in swatch(x, y + 2.5):
            drawing.add(shape)
        drawing.add(String(x + 18, y, label, fontName="Helvetica", fontSize=7, fillColor=TEXT))
        x += width
    return drawing, y - 8


def _marker(kind: str, size: float, colour: str):
    return makeMarker(
        kind,
        size=size,
        fillColor=colors.HexColor(colour),
        strokeColor=colors.white,
        strokeWidth=0.5,
    )


def _line_swatch(style):
    colour, width, marker, size, dash = style

    def draw(x, y):
        line = Line(x, y, x + 14, y, strokeColor=colors.HexColor(colour), strokeWidth=width)
        line.strokeDashArray = dash
        symbol = _marker(marker, size, colour)
        symbol.x, symbol.y = x + 7, y
        return [line, symbol]

    return draw


def _box_swatch(colour):
    return lambda x, y: [Rect(x + 2, y - 3.5, 10, 7, fillColor=colour, strokeColor=None)]


def _no_data(drawing: Drawing, top: float) -> Drawing:
    drawing.add(String(36, top / 2, figures.NO_DATA, fontSize=9, fillColor=MUTED))
    return drawing


def _line_chart(view: dict, keys: list[str], title: str, scale: float = 1.0) -> Drawing:
    """Twelve months of some KPIs as lines, every series in the legend with its latest
    figure; gaps where a month has no figure."""
    labels = [f"{m:%b %y}" for m, _ in view["trend"]]
    plotted, entries = [], []
    styles = LINE_STYLES if len(keys) > 1 else (ONE_LINE,)
    for key, style in zip(keys, styles, strict=False):
        values = _trend_values(view, key)
        kpi = KPI_BY_KEY[key]
        last = next(((i, v) for i, v in reversed(list(enumerate(values))) if v is not None), None)
        latest = f" ({labels[last[0]]}: {display(kpi.kind, last[1])})" if last else " (no figures)"
        entries.append((_line_swatch(style), kpi.label + latest))
        plotted += [([(i, v * scale) for i, v in run], style) for run in _runs(values)]
    drawing, top = _chart_frame(title, entries)
    if not plotted:
        return _no_data(drawing, top)
    plot = LinePlot()
    plot.x, plot.y, plot.width, plot.height = 36, 20, FRAME_WIDTH - 46, top - 20
    plot.data = [points for points, _ in plotted]
    for index, (_, (colour, width, marker, size, dash)) in enumerate(plotted):
        line = plot.lines[index]
        line.strokeColor = colors.HexColor(colour)
        line.strokeWidth = width
        line.strokeDashArray = dash
        line.symbol = _marker(marker, size, colour)
    plot.xValueAxis.valueMin, plot.xValueAxis.valueMax = -0.3, len(labels) - 0.7
    plot.xValueAxis.valueSteps = list(range(len(labels)))
    plot.xValueAxis.labelTextFormat = lambda i: labels[round(i)]
    for axis in (plot.xValueAxis, plot.yValueAxis):
        axis.labels.fontName = "Helvetica"
        axis.labels.fontSize = 6.5
    plot.yValueAxis.labelTextFormat = _axis_number
    plot.yValueAxis.valueMin = 0
    highest = max(v for points, _ in plotted for _, v in points)
    if scale == 100:  # percentages: the whole scale, so 99 % looks like 99 %
        plot.yValueAxis.valueMax, plot.yValueAxis.valueStep = 100, 20
    elif not highest:
        plot.yValueAxis.valueMax = 1
    drawing.add(plot)
    return drawing


def _capacity_chart(view: dict) -> Drawing:
    """Twelve months of capacity use, GPU-hours by category, stacked."""
    entries = [
        (_box_swatch(colors.HexColor(figures.CATEGORY_COLOURS[c])), figures.CATEGORY_LABELS[c])
        for c in f.CAPACITY_CATEGORIES
    ]
    drawing, top = _chart_frame("Capacity use (GPU-hours)", entries)
    if not any(data for _, data in view["trend"]):
        return _no_data(drawing, top)
    chart = VerticalBarChart()
    chart.x, chart.y, chart.width, chart.height = 44, 20, FRAME_WIDTH - 54, top - 20
    chart.data = [
        [round(data["gpu_hours"][category], 1) if data else 0 for _, data in view["trend"]]
        for category in f.CAPACITY_CATEGORIES
    ]
    chart.categoryAxis.categoryNames = [
        f"{m:%b %y}" if data else f"{m:%b %y}*" for m, data in view["trend"]
    ]
    chart.categoryAxis.style = "stacked"
    for axis in (chart.categoryAxis, chart.valueAxis):
        axis.labels.fontName = "Helvetica"
        axis.labels.fontSize = 6.5
    chart.valueAxis.labelTextFormat = _axis_number
    chart.valueAxis.valueMin = 0
    for index, category in enumerate(f.CAPACITY_CATEGORIES):
        chart.bars[index].fillColor = colors.HexColor(figures.CATEGORY_COLOURS[category])
        chart.bars[index].strokeColor = None
    drawing.add(chart)
    return drawing


def _idle(team: dict) -> bool:
    """No GPU-hour delivered, no job started, waiting, finished or failed."""
    return not (
        team["delivered_gpu_hours"]
        or team["wait_s"]["n"]
        or team["jobs_waiting_at_end"]["n"]
        or team["jobs_finished"]
        or team["jobs_failed"]
    )


def _names_line(names: list[str]) -> str:
    shown = ", ".join(names[:IDLE_TEAMS_LISTED])
    more = len(names) - IDLE_TEAMS_LISTED
    return shown + (f" and {more} more (all in the teams CSV)" if more > 0 else "")


def _teams_section(view: dict, styles) -> list:
    active = [row for row in view["teams"] if not _idle(row["data"])]
    idle = [row for row in view["teams"] if _idle(row["data"])]
    story = _section("Teams", styles)
    if active:
        rows = []
        for row in active:
            data = row["data"]
            honoured = data["entitlement_honoured"]
            rows.append(
                [
                    row["name"],
                    f"{data['delivered_gpu_hours']:,.1f}",
                    f"{data['entitled_gpu_hours']:,.1f}",
                    f"{data['gpu_hours']['borrowed']:,.1f}",
                    f"{display('fraction', honoured['fraction'])} ({honoured['n']:,})",
                    f"{display('duration', data['wait_s'].get('p90'))} ({data['wait_s']['n']:,})",
                    f"{data['lost_gpu_hours_total']:,.1f}",
                    f"{data['jobs_finished']:,}",
                    f"{data['jobs_waiting_at_end']['n']:,}",
                    fairness_text(row["fairness"]),
                ]
            )
        header = [
            "Team",
            "GPU-hours delivered",
            "Entitled GPU-hours",
            "Borrowed GPU-hours",
            "Entitlement honoured (n)",
            "p90 wait (n)",
            "Lost GPU-hours",
            "Jobs finished",
            "Waiting at month end",
            "Fairness (by queue)",
        ]
        weights = [30, 19, 19, 18, 22, 21, 17, 14, 16, 24]
        story.append(_table(styles, header, rows, weights, right=range(1, 10)))
        story.append(
            Paragraph(
                "Fairness: a team's ratio in each queue where it has a share (below), "
                "combined over its queues, each weighted by its fair part there (its part "
                "of the queue's entitlement times what the queue delivered): a queue "
                "where nothing ran weighs nothing.",
                styles["small"],
            )
        )
    else:
        story.append(Paragraph("No team ran or queued a job this month.", styles["body"]))
    if idle:
        entitled = sum(row["data"]["entitled_gpu_hours"] for row in idle)
        story.append(
            _text(
                f"{len(idle)} idle team{'s' if len(idle) != 1 else ''} (no GPU-hour delivered, "
                f"no job started or waiting; {entitled:,.1f} entitled GPU-hours between them): "
                + _names_line([row["name"] for row in idle])
                + ".",
                styles["small"],
            )
        )
    return story


def _fairness_rows(view: dict) -> list[dict]:
    return f.fairness_by_queue(view["shares"])


def _ratio(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def _fairness_section(view: dict, styles) -> list:
    pairs = _fairness_rows(view)
    busy = [p for p in pairs if p["queue_delivered_gpu_hours"]]
    shown = [p for p in busy if p["delivered_gpu_hours"]]
    unused = [p for p in busy if not p["delivered_gpu_hours"] and p["entitled_gpu_hours"]]
    idle_queues = sorted({p["queue_name"] for p in pairs if not p["queue_delivered_gpu_hours"]})
    story = _section("Fairness by queue", styles)
    story.append(
        Paragraph(
            "In each queue, a team's part of the GPU-hours the queue delivered over its part "
            "of the queue's entitlement: above 1 it received more than its part (by "
            "borrowing), below 1 less. Queues are compared with themselves only: another "
            "queue's capacity, idle or busy, is no entitlement a team could use here.",
            styles["small"],
        )
    )
    if shown:
        rows = [
            [
                p["queue_name"],
                p["team_name"],
                f"{p['delivered_gpu_hours']:,.1f}",
                f"{p['entitled_gpu_hours']:,.1f}",
                display("fraction", p["delivered_fraction"]),
                display("fraction", p["entitled_fraction"]),
                _ratio(p["ratio"]),
            ]
            for p in shown
        ]
        header = [
            "Queue",
            "Team",
            "GPU-hours delivered",
            "Entitled GPU-hours",
            "Part of the queue's GPU-hours",
            "Part of the queue's entitlement",
            "Fairness",
        ]
        story.append(_table(styles, header, rows, [30, 34, 20, 20, 24, 24, 16], right=range(2, 7)))
    else:
        story.append(Paragraph("No queue delivered a GPU-hour this month.", styles["body"]))
    if unused:
        story.append(
            _text(
                "Entitled in a queue where others ran, and used none of it (fairness 0): "
                + _names_line([f"{p['team_name']} in {p['queue_name']}" for p in unused])
                + ".",
                styles["small"],
            )
        )
    if idle_queues:
        story.append(
            _text(
                f"{len(idle_queues)} idle queue{'s' if len(idle_queues) != 1 else ''} (nothing "
                "ran, no fairness to compare): " + _names_line(idle_queues) + ".",
                styles["small"],
            )
        )
    return story


def _money(value) -> str:
    return "—" if value is None else f"{value:,.2f}"


def _cost_rows(rows: list[dict], label, priced: bool) -> list[list]:
    out = []
    for row in rows:
        if not any(row["gpu_hours"].values()):
            continue
        cells = [label(row), *(f"{row['gpu_hours'][c]:,.1f}" for c in COST_LABELS)]
        if priced:
            money = row["cost"] or {}
            cells += [_money(money.get(c)) for c in COST_LABELS]
        out.append(cells)
    return out


def _cost_section(view: dict, styles) -> list:
    """GPU-hours and cost by team and by share (page.cost_view): the scopes that used,
    borrowed or lent anything; cost columns only when some instance type has a price."""
    cost = view["cost"]
    story = _section("GPU-hours and cost", styles)
    if cost["priced"]:
        prices = ", ".join(f"{name} {price}" for name, price in cost["prices"].items())
        note = (
            f"Cost in {cost['currency']}: instance-hours times the price per instance-hour "
            f"set now ({prices}); a type without a price has no cost (—)."
        )
    else:
        note = "No instance type has a price: GPU-hours only, no cost."
    story.append(
        _text(
            "Used within limit, borrowed beyond it, and lent to others (what others "
            "borrowed of a share's idle limit, shared out among the lenders by idle "
            "limit). " + note,
            styles["small"],
        )
    )
    header = ["GPU-hours within limit", "GPU-hours borrowed", "GPU-hours lent to others"]
    if cost["priced"]:
        header += [f"Cost within limit ({cost['currency']})"]
        header += [f"Cost borrowed ({cost['currency']})", f"Cost lent ({cost['currency']})"]
    weights = [34] + [18] * (len(header))
    for title, rows, label in (
        ("Team", cost["teams"], lambda r: r["name"]),
        ("Share", cost["shares"], lambda r: f"{r['queue']} / {r['name']} ({r['team']})"),
    ):
        cells = _cost_rows(rows, label, cost["priced"])
        if cells:
            story.append(
                _table(styles, [title, *header], cells, weights, right=range(1, len(header) + 1))
            )
            story.append(Spacer(1, 4))
    if len(story) == 2:
        story.append(Paragraph("Nothing ran or was lent this month.", styles["body"]))
    return story


def _changes_section(record: dict, styles) -> list:
    story = _section("Policy changes", styles)
    if not record["changes"]:
        return story + [Paragraph("No policy change this month.", styles["body"])]
    rows = [
        [f"{c['at']:%d %b %H:%M}", c["what"], c["cause"], c["by"], c["approved_by"], c["reason"]]
        for c in record["changes"]
    ]
    header = ["When (UTC)", "What", "Cause", "Made by", "Approved by", "Reason"]
    return story + [_table(styles, header, rows, [20, 32, 16, 22, 28, 56])]


def _exceptions_section(record: dict, key: str, title: str, styles) -> list:
    story = _section(title, styles)
    items = record["exceptions"][key]
    if not items:
        return story + [Paragraph("None this month.", styles["body"])]
    rows = [
        [
            f"{e['at']:%d %b %H:%M}",
            f"#{e['id']}",
            e["team"],
            e["kind"],
            e["urgency"],
            e["decided_by"],
            e["window"],
        ]
        for e in items
    ]
    header = ["When (UTC)", "Request", "Team", "Kind", "Urgency", "Decided by", "Window"]
    return story + [_table(styles, header, rows, [20, 14, 26, 26, 26, 20, 44], right={1})]


def _pdf(view: dict, record: dict, now: dt.datetime) -> bytes:
    styles = _styles()
    month = view["month"]
    buffer = io.BytesIO()
    document = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        leftMargin=MARGIN_X,
        rightMargin=MARGIN_X,
        topMargin=MARGIN_Y,
        bottomMargin=MARGIN_Y,
        title=f"Leadership pack {month:%B %Y}",
        author="Quota governance",
    )
    story = [
        Paragraph(f"Is the sharing arrangement working? {month:%B %Y}", styles["title"]),
        Paragraph(
            f"All queues, compared with {view['previous_month']:%B %Y} and the last 12 months. "
            f"Made {now:%d %B %Y %H:%M} UTC"
            + (
                f" from figures computed {view['computed_at']:%d %B %Y %H:%M} UTC."
                if view["computed_at"]
                else "."
            ),
            styles["small"],
        ),
        Spacer(1, 4),
        Paragraph(f"<b>Which month a figure belongs to.</b> {f.MONTH_RULE}", styles["small"]),
        Paragraph(
            f"n is the number of observations behind a figure; a change is called better or "
            f"worse only when both months have at least {f.MIN_SAMPLE}.",
            styles["small"],
        ),
        *_section("Key figures", styles),
        _kpi_table(view, styles)
        if view["current"]
        else Paragraph("No figures for this month.", styles["body"]),
        *_section("The last 12 months", styles),
        _capacity_chart(view),
    ]
    if any(data is None for _, data in view["trend"]):
        story.append(Paragraph("* no figures stored for that month.", styles["small"]))
    story += [
        Spacer(1, 6),
        _line_chart(
            view,
            ["entitlement_honoured", "goodput", "completion_rate_preempted"],
            "Entitlement honoured, goodput, preempted jobs completed (%)",
            scale=100,
        ),
        Spacer(1, 6),
        _line_chart(view, ["lost_per_1000"], "Lost GPU-hours per 1,000 delivered"),
        *_teams_section(view, styles),
        *_fairness_section(view, styles),
        *_cost_section(view, styles),
        *_changes_section(record, styles),
        *_exceptions_section(record, "granted", "Exceptions granted", styles),
        *_exceptions_section(record, "expired", "Exceptions expired", styles),
        *_section("How these figures are counted", styles),
        *(_definition(text, styles["small"]) for text in f.DEFINITIONS.values()),
        Paragraph(
            "The CSVs attached hold the tables behind every figure, with raw values in base "
            "units and a row of units: " + ", ".join(PACK_DATASETS) + ".",
            styles["small"],
        ),
    ]
    document.build(story)
    return buffer.getvalue()
