"""The monthly leadership pack: a PDF and the CSVs, stored under packs/YYYY-MM/, listed
and downloadable from the dashboard, emailed to leadership once a month, made on demand.
The PDF renders here (ReportLab, no browser) and its extracted text holds the figures."""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from io import StringIO

import pytest
from celery.schedules import crontab
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from pypdf import PdfReader

from core.celery import app
from core.formatting import percent
from fleet.models import InstanceType, QuotaShare
from governance.dashboards.csv import PACK_DATASETS
from governance.dashboards.pack import pack_make, pack_send_once, packs_list
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.reads import rollup_scope
from governance.models import ExceptionEvent, ExceptionRequest, PolicyChange, PolicyProposal
from tests.factories import UrgencyDefinitionFactory, UserFactory
from tests.governance.dashboards.conftest import load_into_db
from tests.governance.dashboards.test_signals import A_ORIGIN, APRIL, LEND_BORROW, MARCH


@pytest.fixture(autouse=True)
def storage(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.fixture
def april(db):
    """Scenario A's two months, and an exception approved in April that changed the
    borrower's limit (so the pack has a policy change with its approver)."""
    load_into_db(LEND_BORROW, origin=A_ORIGIN, gpu_count=8)
    share = QuotaShare.objects.get(name="borrower")
    owner = UserFactory(username="olu", roles=["exception_owners"])
    lead = UserFactory(username="lee", roles=["team_leads"])
    at = dt.datetime(2025, 4, 10, 9, tzinfo=dt.UTC)
    request = ExceptionRequest.objects.create(
        kind="TEMPORARY_CAPACITY",
        team=share.team,
        queue=share.queue,
        share=share,
        instance_type=InstanceType.objects.get(name="gpu"),
        extra_instances=2,
        urgency=UrgencyDefinitionFactory(name="Conference deadline"),
        justification="Final ablations.",
        window_start=at,
        window_end=at + dt.timedelta(hours=24),
        state=ExceptionRequest.State.EXPIRED,
        requested_by=lead,
        submitted_at=at - dt.timedelta(hours=2),
        decided_by=owner,
        decided_at=at - dt.timedelta(hours=1),
        activated_at=at,
        ended_at=at + dt.timedelta(hours=24),
    )
    ExceptionEvent.objects.create(
        request=request, at=at - dt.timedelta(hours=1), type="APPROVED", actor=owner
    )
    ExceptionEvent.objects.create(request=request, at=at + dt.timedelta(hours=24), type="EXPIRED")
    change = PolicyChange.objects.create(
        cause=PolicyChange.Cause.EXCEPTION,
        target=PolicyChange.Target.SHARE,
        queue=share.queue,
        share=share,
        object_repr=str(share),
        before={},
        after={},
        reason="Exception: 2 extra instances <urgent & short>.",
        exception_request=request,
    )
    PolicyChange.objects.filter(pk=change.pk).update(created_at=at)
    # An admin's edit that another admin approved as a proposal.
    ada = UserFactory(username="ada", roles=["admins"])
    bo = UserFactory(username="bo", roles=["admins"])
    edit = PolicyChange.objects.create(
        cause=PolicyChange.Cause.EDIT,
        target=PolicyChange.Target.SHARE,
        actor=ada,
        queue=share.queue,
        share=share,
        object_repr=str(share),
        before={},
        after={},
        reason="Borrow limit back to 100 %.",
    )
    PolicyChange.objects.filter(pk=edit.pk).update(created_at=at + dt.timedelta(days=2))
    PolicyProposal.objects.create(
        kind=PolicyProposal.Kind.SHARE_UPDATE,
        state=PolicyProposal.State.APPLIED,
        author=ada,
        reviewer=bo,
        reason=edit.reason,
        object_repr=str(share),
        share=share,
        applied_change=edit,
    )
    rollups_refresh(month=MARCH)
    rollups_refresh(month=APRIL)
    return share


def pdf_text(pack) -> str:
    from django.core.files.storage import default_storage

    with default_storage.open(pack.pdf) as handle:
        reader = PdfReader(io.BytesIO(handle.read()))
    # Table cells come out one per line: compare with single spaces.
    return " ".join(" ".join(page.extract_text() for page in reader.pages).split())


def test_the_pdf_holds_the_key_figures_teams_changes_and_exceptions(april):
    pack = pack_make(month=APRIL)
    text = pdf_text(pack)
    data, _ = rollup_scope(month=APRIL, scope="all")
    assert "April 2025" in text
    # Key figures with their n and the month before.
    delivered = data["delivered_gpu_hours"]
    march, _ = rollup_scope(month=MARCH, scope="all")
    assert (
        f"GPU-hours delivered {delivered:,.1f} {data['runs']} {march['delivered_gpu_hours']:,.1f}"
        in text
    )
    assert "Median turnaround 1 h 00 m 2" in text  # p50 3600 s over 2 jobs
    assert f"Goodput {percent(data['goodput'])} {data['runs']} {percent(march['goodput'])}" in text
    assert "too few to compare (n = 1, under 30)" in text
    # The 12-month trends, the teams, the policy change with its approver.
    assert "Capacity use (GPU-hours)" in text
    assert "lend-borrow-borrower" in text and "lend-borrow-lender" in text
    assert "olu (exception owner)" in text
    assert "ada bo (proposal review)" in text  # made by ada, approved by bo
    assert "<urgent & short>" in text  # data, not markup
    # The exception granted and expired, with who decided.
    assert "Exceptions granted" in text and "Conference deadline" in text
    assert text.count("#") >= 2


def test_the_csvs_are_the_dashboards_tables_with_units(april):
    from django.core.files.storage import default_storage

    pack = pack_make(month=APRIL)
    with default_storage.open(pack.csv) as handle:
        archive = zipfile.ZipFile(io.BytesIO(handle.read()))
    assert sorted(archive.namelist()) == sorted(f"signals-2025-04-{d}.csv" for d in PACK_DATASETS)
    rows = list(csv.reader(StringIO(archive.read("signals-2025-04-kpis.csv").decode("utf-8-sig"))))
    assert rows[0][:4] == ["figure", "value", "unit", "n"]
    assert {row[0]: row[1] for row in rows[2:]}["Median turnaround"] == "3600"


def test_packs_are_listed_by_month_newest_first(april):
    pack_make(month=MARCH)
    pack_make(month=APRIL)
    pack_make(month=APRIL)  # made again: replaced, not duplicated
    assert [pack.month for pack in packs_list()] == [APRIL, MARCH]


def test_beat_emails_last_months_pack_to_leadership_once(april):
    UserFactory(username="lin", email="lin@example.com", roles=["leadership"])
    UserFactory(username="quiet", email="", roles=["leadership"])
    assert pack_send_once(month=APRIL) is True
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["lin@example.com"]
    assert "April 2025" in message.subject
    names = [name for name, _, _ in message.attachments]
    assert names == ["signals-2025-04.pdf", "signals-2025-04-csv.zip"]
    assert pack_send_once(month=APRIL) is False  # delivered twice: one email
    assert len(mail.outbox) == 1
    assert packs_list()[0].sent_at is not None


def test_the_pack_is_scheduled_on_the_first_of_the_month():
    entry = app.conf.beat_schedule["dashboard-monthly-pack"]
    assert entry["task"] == "governance.dashboard.monthly_pack"
    assert entry["schedule"] == crontab(minute=0, hour=6, day_of_month=1)


@pytest.mark.parametrize("role", ["leadership", "admin"])
def test_made_on_demand_listed_and_downloaded_from_the_dashboard(client, request, april, role):
    client.force_login(request.getfixturevalue(role))
    response = client.post(reverse("dashboard-pack-make"), {"month": "2025-04"})
    assert response.status_code == 302
    page = client.get(reverse("dashboard"), {"month": "2025-04"}).content.decode()
    pdf_url = reverse("dashboard-pack", args=["2025-04", "pdf"])
    assert pdf_url in page
    download = client.get(pdf_url)
    assert download.status_code == 200
    assert download["Content-Type"] == "application/pdf"
    body = b"".join(download.streaming_content)
    assert body.startswith(b"%PDF")
    zipped = client.get(reverse("dashboard-pack", args=["2025-04", "csv"]))
    assert zipped["Content-Type"] == "application/zip"


def test_other_roles_cannot_make_or_download_packs(client, team_lead, april):
    pack_make(month=APRIL)
    client.force_login(team_lead)
    assert client.post(reverse("dashboard-pack-make"), {"month": "2025-04"}).status_code == 403
    assert client.get(reverse("dashboard-pack", args=["2025-04", "pdf"])).status_code == 403


def test_a_missing_pack_is_404(client, leadership, db):
    client.force_login(leadership)
    assert client.get(reverse("dashboard-pack", args=["2025-04", "pdf"])).status_code == 404
    assert client.get(reverse("dashboard-pack", args=["2025-13", "pdf"])).status_code == 404


def test_the_command_makes_and_emails_a_pack(april):
    UserFactory(username="lin", email="lin@example.com", roles=["leadership"])
    out = StringIO()
    call_command("signals_pack", "--month", "2025-04", "--email", stdout=out)
    assert "Made the pack of April 2025" in out.getvalue()
    assert "lin@example.com" in out.getvalue()
    assert len(mail.outbox) == 1
    with pytest.raises(CommandError, match="--month: 'April' is not a month") as raised:
        call_command("signals_pack", "--month", "April")
    assert raised.value.returncode == 2
