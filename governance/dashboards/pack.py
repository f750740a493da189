"""The monthly leadership pack: one PDF and the month's CSVs, stored, listed, emailed.

`pack_make` draws the PDF with ReportLab (offline, no browser): the key figures with
their n and the change from the month before, the 12-month trends, the per-team table,
the policy changes with who made and who approved them, and the exceptions granted and
expired; the CSVs are the dashboard's tables (governance.dashboards.page.tables), so
the pack says what the page says. Files live in the default storage under
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
from reportlab.graphics.charts.legends import Legend
from reportlab.graphics.charts.lineplots import LinePlot
from reportlab.graphics.shapes import Drawing, String
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import (
    KeepTogether,
    PageBreak,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from core import permissions
from governance.dashboards import figures
from governance.dashboards import formulas as f
from governance.dashboards.csv import DATASETS, csv_filename, table_csv
from governance.dashboards.page import KPI_BY_KEY, dashboard_view, display, kpi_values
from governance.dashboards.rollups import rollups_read, rollups_refresh
from governance.dashboards.selectors.calendar import month_bounds, month_start
from governance.dashboards.selectors.reads import rollup_scope
from governance.models import ExceptionEvent, PolicyChange

PACK_ROOT = "packs"
MONTH_FOLDER = re.compile(r"^\d{4}-\d{2}$")
KINDS = {"pdf": "application/pdf", "csv": "application/zip"}
SENT = "sent.json"
TEXT = colors.HexColor("#1f2933")
MUTED = colors.HexColor("#4b5563")
GRID = colors.HexColor("#d5dbe3")


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
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for dataset in DATASETS:
            archive.writestr(
                csv_filename(dataset, month, None), "\ufeff" + table_csv(view["tables"][dataset])
            )
    return buffer.getvalue()


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


def _styles():
    sheet = getSampleStyleSheet()
    base = ParagraphStyle("base", parent=sheet["BodyText"], fontSize=8.5, leading=11)
    return {
        "title": ParagraphStyle("title", parent=sheet["Title"], fontSize=18, alignment=0),
        "h2": ParagraphStyle("h2", parent=sheet["Heading2"], fontSize=12, spaceBefore=8),
        "body": base,
        "small": ParagraphStyle("small", parent=base, fontSize=7.5, leading=9.5, textColor=MUTED),
        "cell": ParagraphStyle("cell", parent=base, fontSize=7.5, leading=9),
    }


def _text(value: str, style) -> Paragraph:
    """A paragraph of data (names, reasons): escaped, as ReportLab reads markup."""
    return Paragraph(escape(str(value)), style)


def _table(rows: list[list], widths: list[float], header_rows: int = 1) -> Table:
    table = Table(rows, colWidths=widths, repeatRows=header_rows)
    table.setStyle(
        TableStyle(
            [
                ("FONT", (0, 0), (-1, -1), "Helvetica", 7.5),
                ("FONT", (0, 0), (-1, header_rows - 1), "Helvetica-Bold", 7.5),
                ("TEXTCOLOR", (0, 0), (-1, -1), TEXT),
                ("LINEBELOW", (0, 0), (-1, header_rows - 1), 0.6, TEXT),
                ("LINEBELOW", (0, header_rows), (-1, -1), 0.25, GRID),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("ALIGN", (1, header_rows), (-1, -1), "RIGHT"),
            ]
        )
    )
    return table


def _kpi_rows(view: dict, styles) -> list[list]:
    rows = [["Figure", "Value", "n", f"{view['previous_month']:%b %Y}", "Change"]]
    for card in view["kpis"]:
        change = card["change"]["text"] + (
            f" ({card['change']['word']})" if card["change"]["word"] else ""
        )
        rows.append(
            [
                _text(card["label"], styles["cell"]),
                card["display"],
                "" if card["n"] is None else f"{card['n']:,}",
                card["previous_display"],
                _text(change, styles["cell"]),
            ]
        )
    return rows


def _trend_values(view: dict, key: str) -> list:
    return [kpi_values(data)[key][0] for _, data in view["trend"]]


def _thousands(value) -> str:
    return f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.1f}"


def _legend(width: float, height: float) -> Legend:
    legend = Legend()
    legend.x, legend.y = width - 120, height - 22
    legend.fontName = "Helvetica"
    legend.fontSize = 7
    legend.columnMaximum = 4
    legend.alignment = "right"
    return legend


def _line_chart(view: dict, keys: list[str], title: str, scale: float = 1.0) -> Drawing:
    """Twelve months of some KPIs as lines (gaps where a month has no figure)."""
    width, height = 170 * mm, 55 * mm
    drawing = Drawing(width, height)
    drawing.add(String(0, height - 10, title, fontName="Helvetica-Bold", fontSize=9))
    plot = LinePlot()
    plot.x, plot.y, plot.width, plot.height = 30, 28, width - 160, height - 50
    series, names = [], []
    for key in keys:
        values = _trend_values(view, key)
        points = [(i, v * scale) for i, v in enumerate(values) if v is not None]
        if points:
            series.append(points)
            names.append(KPI_BY_KEY[key].label)
    if not series:
        drawing.add(String(30, height / 2, figures.NO_DATA, fontSize=9, fillColor=MUTED))
        return drawing
    plot.data = series
    palette = [colors.HexColor(c) for c in (figures.WITHIN, figures.BORROWED, figures.FAILED)]
    for index in range(len(series)):
        plot.lines[index].strokeColor = palette[index % len(palette)]
        plot.lines[index].strokeWidth = 1.5
    labels = [f"{m:%b %y}" for m, _ in view["trend"]]
    plot.xValueAxis.valueMin, plot.xValueAxis.valueMax = 0, len(labels) - 1
    plot.xValueAxis.valueSteps = list(range(len(labels)))
    plot.xValueAxis.labelTextFormat = lambda i: labels[int(i)] if 0 <= int(i) < len(labels) else ""
    for axis in (plot.xValueAxis, plot.yValueAxis):
        axis.labels.fontName = "Helvetica"
        axis.labels.fontSize = 6.5
    plot.yValueAxis.labelTextFormat = _thousands
    plot.yValueAxis.valueMin = 0
    drawing.add(plot)
    legend = _legend(width, height)
    legend.colorNamePairs = [(palette[i % len(palette)], names[i]) for i in range(len(names))]
    drawing.add(legend)
    return drawing


def _capacity_chart(view: dict) -> Drawing:
    """Twelve months of capacity use, GPU-hours by category, stacked."""
    width, height = 170 * mm, 60 * mm
    drawing = Drawing(width, height)
    drawing.add(
        String(0, height - 10, "Capacity use (GPU-hours)", fontName="Helvetica-Bold", fontSize=9)
    )
    if not any(data for _, data in view["trend"]):
        drawing.add(String(30, height / 2, figures.NO_DATA, fontSize=9, fillColor=MUTED))
        return drawing
    chart = VerticalBarChart()
    chart.x, chart.y, chart.width, chart.height = 40, 28, width - 170, height - 50
    chart.data = [
        [round(data["gpu_hours"][category], 1) if data else 0 for _, data in view["trend"]]
        for category in f.CAPACITY_CATEGORIES
    ]
    chart.categoryAxis.categoryNames = [f"{m:%b %y}" for m, _ in view["trend"]]
    chart.categoryAxis.style = "stacked"
    for axis in (chart.categoryAxis, chart.valueAxis):
        axis.labels.fontName = "Helvetica"
        axis.labels.fontSize = 6.5
    chart.valueAxis.labelTextFormat = _thousands
    chart.valueAxis.valueMin = 0
    for index, category in enumerate(f.CAPACITY_CATEGORIES):
        chart.bars[index].fillColor = colors.HexColor(figures.CATEGORY_COLOURS[category])
        chart.bars[index].strokeColor = None
    drawing.add(chart)
    legend = _legend(width, height)
    legend.colorNamePairs = [
        (colors.HexColor(figures.CATEGORY_COLOURS[c]), figures.CATEGORY_LABELS[c])
        for c in f.CAPACITY_CATEGORIES
    ]
    drawing.add(legend)
    return drawing


def _team_rows(view: dict) -> list[list]:
    rows = [
        [
            "Team",
            "GPU-h delivered",
            "Entitled GPU-h",
            "Fairness",
            "Borrowed GPU-h",
            "Entitlement honoured (n)",
            "p90 wait (n)",
            "Lost GPU-h",
            "Finished",
            "Waiting",
        ]
    ]
    for row in view["teams"]:
        data, fair = row["data"], row["fairness"]
        honoured = data["entitlement_honoured"]
        rows.append(
            [
                row["name"],
                f"{data['delivered_gpu_hours']:,.1f}",
                f"{data['entitled_gpu_hours']:,.1f}",
                "—" if fair["ratio"] is None else f"{fair['ratio']:.2f}",
                f"{data['gpu_hours']['borrowed']:,.1f}",
                f"{display('fraction', honoured['fraction'])} ({honoured['n']:,})",
                f"{display('duration', data['wait_s'].get('p90'))} ({data['wait_s']['n']:,})",
                f"{data['lost_gpu_hours_total']:,.1f}",
                f"{data['jobs_finished']:,}",
                f"{data['jobs_waiting_at_end']['n']:,}",
            ]
        )
    return rows


def _pdf(view: dict, record: dict, now: dt.datetime) -> bytes:
    styles = _styles()
    month = view["month"]
    buffer = io.BytesIO()
    document = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        leftMargin=18 * mm,
        rightMargin=18 * mm,
        topMargin=16 * mm,
        bottomMargin=16 * mm,
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
        Paragraph("Key figures", styles["h2"]),
    ]
    if view["current"]:
        story.append(_table(_kpi_rows(view, styles), [52 * mm, 24 * mm, 16 * mm, 24 * mm, 58 * mm]))
    else:
        story.append(Paragraph("No figures for this month.", styles["body"]))
    story += [
        Paragraph("The last 12 months", styles["h2"]),
        _capacity_chart(view),
        _line_chart(
            view,
            ["entitlement_honoured", "goodput", "completion_rate_preempted"],
            "Entitlement honoured, goodput, preempted jobs completed (%)",
            scale=100,
        ),
        _line_chart(view, ["lost_per_1000"], "Lost GPU-hours per 1,000 delivered"),
        PageBreak(),
        Paragraph("Teams", styles["h2"]),
        Paragraph(
            "Fairness: a team's part of the GPU-hours delivered over its part of the "
            "entitlement (above 1: it received more, by borrowing).",
            styles["small"],
        ),
        _table(
            _team_rows(view),
            [
                30 * mm,
                16 * mm,
                16 * mm,
                13 * mm,
                16 * mm,
                20 * mm,
                20 * mm,
                13 * mm,
                15 * mm,
                15 * mm,
            ],
        ),
        Paragraph("Policy changes", styles["h2"]),
    ]
    if record["changes"]:
        rows = [["When (UTC)", "What", "Cause", "Made by", "Approved by", "Reason"]]
        rows += [
            [
                f"{c['at']:%d %b %H:%M}",
                _text(c["what"], styles["cell"]),
                c["cause"],
                _text(c["by"], styles["cell"]),
                _text(c["approved_by"], styles["cell"]),
                _text(c["reason"], styles["cell"]),
            ]
            for c in record["changes"]
        ]
        story.append(_table(rows, [20 * mm, 32 * mm, 16 * mm, 22 * mm, 28 * mm, 56 * mm]))
    else:
        story.append(Paragraph("No policy change this month.", styles["body"]))
    for key, title in (("granted", "Exceptions granted"), ("expired", "Exceptions expired")):
        story.append(Paragraph(title, styles["h2"]))
        items = record["exceptions"][key]
        if not items:
            story.append(Paragraph("None this month.", styles["body"]))
            continue
        rows = [["When (UTC)", "Request", "Team", "Kind", "Urgency", "Decided by", "Window"]]
        rows += [
            [
                f"{e['at']:%d %b %H:%M}",
                f"#{e['id']}",
                _text(e["team"], styles["cell"]),
                _text(e["kind"], styles["cell"]),
                _text(e["urgency"], styles["cell"]),
                _text(e["decided_by"], styles["cell"]),
                e["window"],
            ]
            for e in items
        ]
        story.append(_table(rows, [20 * mm, 14 * mm, 26 * mm, 28 * mm, 28 * mm, 24 * mm, 34 * mm]))
    story.append(
        KeepTogether(
            [Paragraph("How these figures are counted", styles["h2"])]
            + [_text(text, styles["small"]) for text in f.DEFINITIONS.values()]
            + [
                Paragraph(
                    "The CSVs attached hold the tables behind every figure, with raw values "
                    "in base units and a row of units: " + ", ".join(DATASETS) + ".",
                    styles["small"],
                )
            ]
        )
    )
    document.build(story)
    return buffer.getvalue()
