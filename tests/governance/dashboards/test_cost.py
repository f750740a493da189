"""GPU-hours and cost by team and by share: an admin sets a price per instance-hour (a
policy write: reason, history, review, revert), and the signals API, the dashboard and
the monthly pack show each scope's use within limit, borrowed and lent to others, and
its cost; a type without a price has no cost anywhere (never a 0).

Scenario A in April (tests.governance.dashboards.test_signals): the borrower's b1 runs 4
instances of `gpu` (8 GPUs each) against a limit of 2 from 7,200 s to 15,660 s, so 2 are
within its limit and 2 borrowed; the lender (limit 2) runs nothing in April, so the 2
borrowed are its idle limit, lent.
"""

from __future__ import annotations

import csv
import io
import zipfile
from decimal import Decimal

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse

from fleet.models import InstanceType
from governance.dashboards.pack import pack_make
from governance.dashboards.rollups import rollups_refresh
from governance.models import PolicyChange, PolicyProposal
from governance.policy.prices import instance_type_price_set
from governance.policy.services import PolicyError, policy_change_revert
from governance.proposals.services import proposal_approve
from tests.factories import UserFactory
from tests.governance.dashboards.conftest import load_into_db
from tests.governance.dashboards.pdf_boxes import overlapping_boxes
from tests.governance.dashboards.test_signals import A_ORIGIN, APRIL, LEND_BORROW

B1_RUN_HOURS = (15660 - 7200) / 3600
PRICE = Decimal("2.5")  # per instance-hour
GPUS = 8


@pytest.fixture
def lend_borrow(db, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    _, _, queue = load_into_db(LEND_BORROW, origin=A_ORIGIN, gpu_count=GPUS)
    return queue


@pytest.fixture
def priced(lend_borrow, admin):
    gpu = InstanceType.objects.get(name="gpu")
    instance_type_price_set(actor=admin, instance_type=gpu, price="2.5", reason="list price")
    rollups_refresh(month=APRIL)
    return lend_borrow


def signals(client, scope):
    response = client.get("/api/v1/signals/", {"month": "2025-04", "scope": scope})
    assert response.status_code == 200, response.content
    return response.json()["cost"]


def test_the_api_figures_equal_a_hand_computation(client, leadership, priced):
    client.force_login(leadership)
    hours = 2 * B1_RUN_HOURS  # instance-hours: 2 instances for b1's run
    price = float(PRICE)
    borrower = signals(client, "team:lend-borrow-borrower")
    assert borrower["currency"] == "USD"
    assert borrower["instance_hours"] == pytest.approx(
        {"within_limit": hours, "borrowed": hours, "lent": 0.0}
    )
    assert borrower["gpu_hours"] == pytest.approx(
        {"within_limit": GPUS * hours, "borrowed": GPUS * hours, "lent": 0.0}
    )
    assert borrower["cost"] == pytest.approx(
        {"within_limit": hours * price, "borrowed": hours * price, "lent": 0.0}
    )
    assert (borrower["priced_types"], borrower["unpriced_types"]) == (["gpu"], [])
    lender = signals(client, "share:lend-borrow/lender")
    assert lender["gpu_hours"] == pytest.approx(
        {"within_limit": 0.0, "borrowed": 0.0, "lent": GPUS * hours}
    )
    assert lender["cost"] == pytest.approx({"within_limit": 0.0, "borrowed": 0.0, "lent": 11.75})
    assert hours * price == pytest.approx(11.75)
    # The whole queue: everything borrowed was lent.
    queue = signals(client, "queue:lend-borrow")
    assert queue["gpu_hours"]["lent"] == pytest.approx(queue["gpu_hours"]["borrowed"])


def test_without_a_price_there_is_no_cost_anywhere(client, leadership, lend_borrow):
    rollups_refresh(month=APRIL)
    client.force_login(leadership)
    cost = signals(client, "team:lend-borrow-borrower")
    assert cost["cost"] is None and cost["unpriced_types"] == ["gpu"]
    assert cost["gpu_hours"]["borrowed"] == pytest.approx(GPUS * 2 * B1_RUN_HOURS)
    page = client.get(reverse("dashboard"), {"month": "2025-04"})
    html = page.content.decode()
    assert "GPU-hours lent to others" in html
    assert "Cost within limit" not in html
    assert "No instance type has a price yet" in html
    rows = csv_rows(client.get(reverse("dashboard-csv", args=["cost"]), {"month": "2025-04"}))
    assert not any(name.startswith("cost") for name in rows[0])


def csv_rows(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))


def test_the_page_and_its_csv_show_the_cost(client, leadership, priced):
    client.force_login(leadership)
    page = client.get(reverse("dashboard"), {"month": "2025-04"})
    html = page.content.decode()
    assert "Cost lent to others (USD)" in html
    assert "gpu 2.5000 USD" in html
    teams = {row["name"]: row for row in page.context["cost"]["teams"]}
    assert teams["lend-borrow-lender"]["cost"]["lent"] == pytest.approx(11.75)
    assert '<td class="num">11.75</td>' in html
    rows = csv_rows(client.get(reverse("dashboard-csv", args=["cost"]), {"month": "2025-04"}))
    header = rows[0]
    assert header[-4:] == [
        "cost within limit",
        "cost borrowed",
        "cost lent to others",
        "types without a price",
    ]
    assert rows[1][header.index("cost lent to others")] == "USD"
    by_share = {
        row[2]: dict(zip(header, row, strict=True)) for row in rows[2:] if row[0] == "share"
    }
    assert float(by_share["lender"]["cost lent to others"]) == pytest.approx(11.75)
    assert float(by_share["borrower"]["cost borrowed"]) == pytest.approx(11.75)


def test_the_pack_carries_the_cost(priced):
    pack = pack_make(month=APRIL)
    with default_storage.open(pack.csv) as handle:
        archive = zipfile.ZipFile(io.BytesIO(handle.read()))
    text = archive.read("signals-2025-04-cost.csv").decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    lender = next(row for row in rows[2:] if row[0] == "team" and row[3] == "lend-borrow-lender")
    assert float(lender[header.index("cost lent to others")]) == pytest.approx(11.75)
    from pypdf import PdfReader

    with default_storage.open(pack.pdf) as handle:
        pdf = PdfReader(io.BytesIO(handle.read()))
    words = " ".join(" ".join(page.extract_text() for page in pdf.pages).split())
    assert "GPU-hours and cost" in words
    assert "lend-borrow-lender 0.0 0.0 " in words and "11.75" in words
    # The cost columns fit: no text printed on top of other text.
    assert not overlapping_boxes(pdf)


def test_a_price_is_a_policy_write_with_history_and_revert(admin, lend_borrow):
    gpu = InstanceType.objects.get(name="gpu")
    with pytest.raises(PolicyError) as missing:
        instance_type_price_set(actor=admin, instance_type=gpu, price="2.5", reason=" ")
    assert "reason" in missing.value.errors
    for bad, words in [
        ("0", "more than 0"),
        ("-1", "more than 0"),
        ("abc", "expected a number"),
        ("1.23456", "4 digits"),
        ("nan", "expected a number"),
    ]:
        with pytest.raises(PolicyError) as refused:
            instance_type_price_set(actor=admin, instance_type=gpu, price=bad, reason="x")
        assert words in refused.value.errors["price_per_hour"][0], bad
    gpu.refresh_from_db()
    assert gpu.price_per_hour is None and not PolicyChange.objects.filter(target="price").exists()

    instance_type_price_set(actor=admin, instance_type=gpu, price="2.5", reason="list price")
    instance_type_price_set(actor=admin, instance_type=gpu, price="3", reason="new contract")
    change = PolicyChange.objects.filter(target=PolicyChange.Target.PRICE).first()
    assert (change.before["price_per_hour"], change.after["price_per_hour"]) == ("2.5000", "3.0000")
    assert change.reason == "new contract" and change.actor == admin
    policy_change_revert(actor=admin, change=change, reason="back to list")
    gpu.refresh_from_db()
    assert gpu.price_per_hour == Decimal("2.5")
    # Cleared: no price again (not 0).
    instance_type_price_set(actor=admin, instance_type=gpu, price="", reason="no price")
    gpu.refresh_from_db()
    assert gpu.price_per_hour is None


def test_with_review_a_price_waits_for_another_admin(client, settings, admin, lend_borrow):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    gpu = InstanceType.objects.get(name="gpu")
    client.force_login(admin)
    url = f"/api/v1/instance-types/{gpu.pk}/price/"
    bad = client.post(url, {"price_per_hour": "0", "reason": "x"}, content_type="application/json")
    assert bad.status_code == 400 and "price_per_hour" in bad.content.decode()
    response = client.post(
        url, {"price_per_hour": "2.5", "reason": "list price"}, content_type="application/json"
    )
    assert response.status_code == 202
    gpu.refresh_from_db()
    assert gpu.price_per_hour is None
    proposal = PolicyProposal.objects.get(pk=response.json()["id"])
    proposal_approve(actor=UserFactory(username="second", roles=["admins"]), proposal=proposal)
    gpu.refresh_from_db()
    assert gpu.price_per_hour == Decimal("2.5")
    shown = client.get(f"/api/v1/instance-types/{gpu.pk}/").json()
    assert (shown["price_per_hour"], shown["currency"]) == ("2.5000", "USD")
    # The plain editor does not write the price.
    client.patch(
        f"/api/v1/instance-types/{gpu.pk}/",
        {"price_per_hour": "9", "gpu_model": "A10G"},
        content_type="application/json",
    )
    gpu.refresh_from_db()
    assert gpu.price_per_hour == Decimal("2.5") and gpu.gpu_model == "A10G"
