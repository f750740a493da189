"""The queue's policy-as-code page: download, upload to plan, apply, and drift."""

import json
import re

import botocore.session
import pytest
import yaml
from botocore.stub import Stubber
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from fleet.models import QuotaShare
from governance.models import PolicyChange
from governance.policy.services import ShareData, share_update
from governance.policy_code import aws_sync, policy_export

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, admin):
    client.force_login(admin)
    return client


def page_url(queue) -> str:
    return reverse("queue-policy-code", args=[queue.pk])


def upload(client, queue, name: str, content: str, **extra):
    return client.post(
        reverse("queue-policy-plan", args=[queue.pk]),
        {"file": SimpleUploadedFile(name, content.encode()), **extra},
    )


def apply_payload(response) -> str:
    return re.search(r'name="payload" value="([^"]+)"', response.content.decode()).group(1)


def edited(queue) -> str:
    data = yaml.safe_load(policy_export(format="native", queue=queue).content)
    data["queues"][0]["shares"][1]["strategy"] = "LEND"
    del data["queues"][0]["shares"][1]["borrow_limit"]
    return yaml.safe_dump(data, sort_keys=False)


def test_the_queue_page_links_to_its_policy_as_code(admin_client, varied_queue):
    page = admin_client.get(reverse("queue-detail", args=[varied_queue.pk]))
    assert page_url(varied_queue) in page.content.decode()


def test_the_page_offers_every_format_with_what_it_cannot_say(admin_client, varied_queue):
    page = admin_client.get(page_url(varied_queue)).content.decode()
    for format in ("aws-batch", "cloudformation", "kueue", "native"):
        assert reverse("queue-policy-download", args=[varied_queue.pk, format]) in page
    assert "is named &#x27;vision-a&#x27; for AWS" in page
    assert "first-in first-out borrowing" in page
    assert 'enctype="multipart/form-data"' in page


def test_a_download_is_the_export(admin_client, varied_queue):
    response = admin_client.get(reverse("queue-policy-download", args=[varied_queue.pk, "kueue"]))
    export = policy_export(format="kueue", queue=varied_queue)
    assert response.content.decode() == export.content
    assert response["Content-Disposition"] == f'attachment; filename="{export.filename}"'
    missing = admin_client.get(reverse("queue-policy-download", args=[varied_queue.pk, "helm"]))
    assert missing.status_code == 404


def test_readers_download_but_do_not_upload(client, team_lead, outsider, varied_queue):
    client.force_login(team_lead)
    page = client.get(page_url(varied_queue))
    assert page.status_code == 200
    assert "Plan this file" not in page.content.decode()
    assert upload(client, varied_queue, "x.yaml", edited(varied_queue)).status_code == 403
    client.force_login(outsider)
    assert client.get(page_url(varied_queue)).status_code == 403


def test_upload_shows_the_plan_and_apply_records_it(admin_client, admin, varied_queue):
    plan = upload(admin_client, varied_queue, "nlp-lends.yaml", edited(varied_queue))
    assert plan.status_code == 200
    text = plan.content.decode()
    assert "share nlp: changed" in text
    assert "LEND_AND_BORROW" in text and "Apply 1 change" in text
    assert QuotaShare.objects.get(name="nlp").strategy == "LEND_AND_BORROW"

    applied = admin_client.post(
        reverse("queue-policy-apply", args=[varied_queue.pk]),
        {"payload": apply_payload(plan), "reason": "nlp stops borrowing"},
    )
    assert applied.status_code == 302
    assert QuotaShare.objects.get(name="nlp").strategy == "LEND"
    change = PolicyChange.objects.latest("id")
    assert change.reason == "nlp stops borrowing (applied from policy file nlp-lends.yaml)"
    assert change.actor == admin


def test_a_bad_upload_lists_its_problems_and_changes_nothing(admin_client, varied_queue):
    content = policy_export(format="native", queue=varied_queue).content
    bad = content.replace("state: DISABLED", "state: PAUSED")
    count = PolicyChange.objects.count()
    page = upload(admin_client, varied_queue, "bad.yaml", bad)
    text = page.content.decode()
    line = bad.splitlines().index("    state: PAUSED") + 1
    assert f"line {line}: queues[0].shares[4].state: must be one of ENABLED, DISABLED" in text
    assert "bad.yaml was not applied." in text
    assert PolicyChange.objects.count() == count


def test_a_tampered_plan_is_refused(admin_client, varied_queue):
    plan = upload(admin_client, varied_queue, "nlp-lends.yaml", edited(varied_queue))
    payload = apply_payload(plan)
    response = admin_client.post(
        reverse("queue-policy-apply", args=[varied_queue.pk]),
        {"payload": payload[:-3] + "abc", "reason": ""},
    )
    assert "this plan cannot be read: upload the file again" in response.content.decode()
    assert QuotaShare.objects.get(name="nlp").strategy == "LEND_AND_BORROW"


def test_a_change_made_meanwhile_shows_the_new_plan_instead(admin_client, admin, varied_queue):
    plan = upload(admin_client, varied_queue, "nlp-lends.yaml", edited(varied_queue))
    held = varied_queue.shares.get(name="held")
    share_update(
        actor=admin,
        share=held,
        data=ShareData(
            name="held", team=held.team, strategy="LEND", capacity_limits={"ml.trn1.32xlarge": 1}
        ),
        reason="Meanwhile",
        expected_version=held.version,
    )
    count = PolicyChange.objects.count()
    response = admin_client.post(
        reverse("queue-policy-apply", args=[varied_queue.pk]),
        {"payload": apply_payload(plan), "reason": "Lend nlp"},
    )
    text = response.content.decode()
    assert "The policy changed while you reviewed the plan" in text
    assert "share held: changed" in text  # the file still says RESERVE
    assert PolicyChange.objects.count() == count


def test_the_page_shows_drift_with_aws_batch(admin_client, varied_queue, settings, monkeypatch):
    arn = "arn:aws:batch:eu-west-1:123456789012:job-queue/research"
    settings.AWS_BATCH_SYNC = True
    settings.AWS_BATCH_QUEUE_ARNS = {"research fleet": arn}
    client = botocore.session.get_session().create_client(
        "batch", region_name="eu-west-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    requests = json.loads(policy_export(format="aws-batch", queue=varied_queue).content)[
        "quotaShares"
    ]
    stubber = Stubber(client)
    share_arn = "arn:aws:batch:eu-west-1:123456789012:quota-share/research/"
    stubber.add_response(
        "list_quota_shares",
        {
            "quotaShares": [
                {"quotaShareName": r["quotaShareName"], "quotaShareArn": share_arn + str(i)}
                for i, r in enumerate(requests)
            ]
        },
    )
    for index, request in enumerate(requests):
        answer = {
            key: request[key]
            for key in (
                "quotaShareName",
                "capacityLimits",
                "resourceSharingConfiguration",
                "preemptionConfiguration",
                "state",
            )
        }
        if request["quotaShareName"] == "nlp":
            answer["state"] = "DISABLED"
        stubber.add_response(
            "describe_quota_share", {**answer, "quotaShareArn": share_arn + str(index)}
        )
    monkeypatch.setattr(aws_sync, "batch_client", lambda _arn: client)
    with stubber:
        page = admin_client.get(page_url(varied_queue) + "?drift=1").content.decode()
    assert "Drift with AWS Batch" in page
    assert re.search(
        r"<th scope=\"row\">nlp</th><td>state</td><td>ENABLED</td><td>DISABLED</td>", page
    )


def test_applying_needs_a_reason_and_keeps_the_plan(admin_client, varied_queue):
    plan = upload(admin_client, varied_queue, "nlp-lends.yaml", edited(varied_queue))
    count = PolicyChange.objects.count()
    for reason in ("", "   "):
        response = admin_client.post(
            reverse("queue-policy-apply", args=[varied_queue.pk]),
            {"payload": apply_payload(plan), "reason": reason},
        )
        text = response.content.decode()
        assert response.status_code == 200
        assert response.context["apply_form"].errors["reason"] == ["say why this change is made"]
        assert 'id="id_reason_error"' in text
        assert "share nlp" in text  # the same plan, to apply once a reason is given
        assert PolicyChange.objects.count() == count
    assert QuotaShare.objects.get(name="nlp").strategy == "LEND_AND_BORROW"
    applied = admin_client.post(
        reverse("queue-policy-apply", args=[varied_queue.pk]),
        {"payload": apply_payload(response), "reason": "nlp lends its idle capacity"},
    )
    assert applied.status_code == 302
    assert QuotaShare.objects.get(name="nlp").strategy == "LEND"
