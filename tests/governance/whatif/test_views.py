"""The what-if pages: admins only, the journey's steps through the views, the polled
progress fragment, and readable upload errors."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from fleet.models import QuotaShare
from governance.models import WhatIfComparison
from governance.whatif import services
from tests.governance.whatif.conftest import run_now

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-1"


def pages(comparison) -> list[tuple[str, str]]:
    pk = comparison.pk
    return [
        ("get", reverse("whatif-list")),
        ("post", reverse("whatif-create")),
        ("get", reverse("whatif-detail", args=[pk])),
        ("get", reverse("whatif-progress", args=[pk])),
        ("get", reverse("whatif-share-edit", args=[pk, 0])),
        ("post", reverse("whatif-workload", args=[pk])),
        ("post", reverse("whatif-mapping", args=[pk])),
        ("post", reverse("whatif-run", args=[pk])),
        ("post", reverse("whatif-cancel", args=[pk])),
        ("post", reverse("whatif-save", args=[pk])),
        ("post", reverse("whatif-propose", args=[pk])),
        ("post", reverse("whatif-review", args=[pk])),
        ("post", reverse("whatif-apply", args=[pk])),
        ("post", reverse("whatif-reset", args=[pk])),
    ]


@pytest.mark.parametrize("role", ["team_lead", "exception_owner", "leadership", "outsider"])
def test_only_admins_may_open_what_if(client, request, comparison, role):
    user = request.getfixturevalue(role)
    client.force_login(user)
    for method, url in pages(comparison):
        assert getattr(client, method)(url).status_code == 403, url


def test_anonymous_visitors_are_sent_to_login(client, comparison):
    for method, url in pages(comparison):
        response = getattr(client, method)(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login"))


def test_admin_clones_edits_runs_and_applies(client, admin, aws_queue, comparison):
    client.force_login(admin)
    response = client.get(reverse("whatif-list") + f"?queue={aws_queue.pk}")
    assert response.status_code == 200
    response = client.post(reverse("whatif-create"), {"queue": aws_queue.pk, "title": "qs2 bursts"})
    created = WhatIfComparison.objects.get(title="qs2 bursts")
    assert response["Location"] == reverse("whatif-detail", args=[created.pk])
    detail = client.get(response["Location"])
    assert b"Edit qs2 in the draft" in detail.content

    edit_url = reverse("whatif-share-edit", args=[created.pk, 1])
    form = client.get(edit_url)
    assert form.status_code == 200
    assert b'value="LEND" id="id_strategy_1" checked' in form.content  # the draft's value
    team = QuotaShare.objects.get(name="qs2").team
    post = {
        "name": "qs2",
        "team": team.pk,
        "strategy": "LEND_AND_BORROW",
        "borrow_limit": "",
        "state": "ENABLED",
        "limit-0-instance_type": "ml.g5.xlarge",
        "limit-0-max_instances": "1",
    }
    assert client.post(edit_url, post).status_code == 302
    created.refresh_from_db()
    assert created.draft_policy["shares"][1]["strategy"] == "LEND_AND_BORROW"
    assert QuotaShare.objects.get(name="qs2").strategy == "LEND"

    assert client.post(reverse("whatif-run", args=[created.pk])).status_code == 302
    created.refresh_from_db()
    assert created.status == WhatIfComparison.Status.QUEUED
    page = client.get(reverse("whatif-detail", args=[created.pk]))
    assert b'<progress max="100" value="0"' in page.content
    assert b'hx-trigger="every 1s"' in page.content
    assert b"Cancel the run" in page.content

    services.comparison_execute(comparison_id=created.pk)
    fragment = client.get(
        reverse("whatif-progress", args=[created.pk]), headers={"HX-Request": "true"}
    )
    assert fragment.headers["HX-Refresh"] == "true"
    page = client.get(reverse("whatif-detail", args=[created.pk]))
    assert b"What changes with the draft" in page.content
    assert b'data-figure-id="figure-turnaround"' in page.content
    assert b'id="figure-utilisation"' in page.content
    # A content hash in the name once collectstatic has run in this checkout.
    assert re.search(rb"vendor/plotly\.min(\.[0-9a-f]+)?\.js", page.content)

    response = client.post(
        reverse("whatif-apply", args=[created.pk]), {"reason": "qs2 needs bursts"}
    )
    assert response.status_code == 302
    assert QuotaShare.objects.get(name="qs2").strategy == "LEND_AND_BORROW"


def test_draft_share_errors_show_next_to_fields(client, admin, comparison):
    client.force_login(admin)
    team = QuotaShare.objects.get(name="qs2").team
    response = client.post(
        reverse("whatif-share-edit", args=[comparison.pk, 1]),
        {
            "name": "qs2",
            "team": team.pk,
            "strategy": "LEND",
            "borrow_limit": "50",
            "state": "ENABLED",
            "limit-0-instance_type": "ml.g5.xlarge",
            "limit-0-max_instances": "1",
        },
    )
    assert response.status_code == 400
    assert b"only allowed with LEND_AND_BORROW" in response.content


def test_a_bad_upload_lists_its_lines_and_keeps_the_old_workload(client, admin, comparison):
    client.force_login(admin)
    from django.core.files.uploadedfile import SimpleUploadedFile

    bad = SimpleUploadedFile(
        "trace.csv",
        b"timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,x,1,1,qs1\n",
        content_type="text/csv",
    )
    response = client.post(
        reverse("whatif-workload", args=[comparison.pk]),
        {"kind": "UPLOAD", "days": "30", "scale": "1", "upload": bad},
    )
    assert response.status_code == 400
    assert b"line 2: duration must be a number of seconds above 0" in response.content
    comparison.refresh_from_db()
    assert comparison.workload_kind == WhatIfComparison.Workload.RECORDED
    assert len(comparison.workload_jobs) == 7


def test_cancel_from_the_page(client, admin, comparison):
    client.force_login(admin)
    services.comparison_run(actor=comparison.author, comparison=comparison)
    response = client.post(
        reverse("whatif-cancel", args=[comparison.pk]), headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    assert b"The run was cancelled" in response.content


def test_the_author_cannot_approve_their_own_draft(client, admin, comparison, settings):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    client.force_login(admin)
    comparison.draft_policy["shares"][1]["strategy"] = "LEND_AND_BORROW"
    comparison.draft_policy["shares"][1]["borrow_limit"] = -1
    comparison.save()
    run_now(comparison)
    client.post(reverse("whatif-propose", args=[comparison.pk]))
    page = client.get(reverse("whatif-detail", args=[comparison.pk]))
    assert b"Record the review" not in page.content
    assert b"Apply the draft" not in page.content
    client.post(reverse("whatif-review", args=[comparison.pk]), {"decision": "approve"})
    comparison.refresh_from_db()
    assert comparison.review_state == WhatIfComparison.Review.PROPOSED


def test_nav_shows_what_if_for_admins(client, admin):
    client.force_login(admin)
    response = client.get(reverse("whatif-list"))
    assert b">\n                    What-if" in response.content or b"What-if" in response.content


def test_list_page_query_count_is_constant(client, admin, aws_queue, django_assert_max_num_queries):
    client.force_login(admin)
    for _ in range(5):
        services.comparison_create(actor=admin, queue=aws_queue)
    with django_assert_max_num_queries(12):
        assert client.get(reverse("whatif-list")).status_code == 200


def test_a_share_the_draft_does_not_have_is_404(client, admin, comparison):
    client.force_login(admin)
    assert client.get(reverse("whatif-share-edit", args=[comparison.pk, 7])).status_code == 404


def test_the_page_shows_the_mapping_before_the_run_and_edits_it(client, admin, comparison):
    """Each recorded share is a row with its jobs, a share select and its default; the
    admin sends qs3's jobs to qs1 and leaves qs2's out, and the page says so."""
    client.force_login(admin)
    url = reverse("whatif-detail", args=[comparison.pk])
    page = client.get(url).content.decode()
    assert '<caption id="mapping-caption">Recorded share to share</caption>' in page
    assert re.search(r'<th scope="row">qs2</th>\s*<td class="num">4</td>', page)
    assert 'for="id_team_0">Share for qs2</label>' in page
    assert "mapping-left-out" not in page

    posted = {"team_0": "", "team_1": "qs1", "team_2": "qs1"}  # qs2 (4 jobs), qs1, qs3
    response = client.post(reverse("whatif-mapping", args=[comparison.pk]), posted)
    assert response.status_code == 302
    comparison.refresh_from_db()
    assert [job["share"] for job in comparison.workload_jobs] == ["qs1"] * 3
    page = client.get(url).content.decode()
    assert "Mapping saved. Workload: 3 jobs recorded on aws-sample" in page
    assert "Left out of the replay: 4 jobs of 1 team mapped to no share</strong>: qs2 (4 jobs)" in (
        page
    )

    response = client.post(reverse("whatif-mapping", args=[comparison.pk]), {"team_1": "qs9"})
    assert response.status_code == 400
    assert "no share named &#x27;qs9&#x27; in the cloned policy" in response.content.decode()


def test_the_result_leads_with_the_verdict_and_the_charts_the_tables_behind_a_disclosure(
    client, admin, comparison
):
    client.force_login(admin)
    run_now(comparison)
    page = client.get(reverse("whatif-detail", args=[comparison.pk])).content.decode()
    # The result comes first on the page, before the steps that made it.
    assert page.index('id="results-title"') < page.index('id="draft-title"')
    results = page[page.index('id="results-title"') : page.index('id="draft-title"')]
    verdict = results.index("whatif__sentences")
    charts = [
        results.index(f'data-figure-id="figure-{name}"') for name in ("turnaround", "utilisation")
    ]
    disclosure = results.index('<details class="whatif__data whatif__tables"')
    tables = [results.index(caption) for caption in ("overall-caption", "metrics-1-caption")]
    assert verdict < min(charts) and max(charts) < disclosure < min(tables)
    assert results.count("<details") == 1  # one disclosure holds every table
    assert "<summary>All the figures: the whole queue, each share" in results
