"""A job's output on its page (the tail) and as a download, for the executors that run
programs: where each writes it, how much is read, who may read it, and what is refused."""

from __future__ import annotations

import os

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import Job
from scheduler import logs
from scheduler.executors import executor_named
from scheduler.executors.run_area import RunArea
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def job_area(settings, tmp_path):
    settings.JOB_CHECKPOINT_ROOT = tmp_path / "checkpoints"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return settings.JOB_CHECKPOINT_ROOT


@pytest.fixture
def process_queue(aws_queue):
    aws_queue.executor = "process"
    aws_queue.save(update_fields=["executor"])
    return aws_queue


@pytest.fixture
def job(process_queue):
    share = process_queue.shares.get(name="qs1")
    return running(share, attempt=2)


@pytest.fixture
def own_lead(job):
    lead = UserFactory(username="lead-of-qs1", roles=["team_leads"])
    job.share.team.leads.add(lead)
    return lead


@pytest.fixture
def other_lead(process_queue):
    lead = UserFactory(username="lead-of-qs2", roles=["team_leads"])
    process_queue.shares.get(name="qs2").team.leads.add(lead)
    return lead


def running(share, *, attempt: int) -> Job:
    now = timezone.now()
    return JobFactory(
        share=share, state=Job.State.RUNNING, started_at=now, start_seq=1, attempt=attempt
    )


def write_log(job: Job, attempt: int, data: bytes):
    path = RunArea.of(job.pk, attempt).log
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def page(client, job: Job, **query) -> str:
    response = client.get(reverse("job-detail", args=[job.pk]), query)
    assert response.status_code == 200
    return response.content.decode()


def download(client, job: Job, attempt: int):
    return client.get(reverse("job-log-download", args=[job.pk, attempt]))


def test_each_executor_that_runs_programs_says_where_its_output_is(job, aws_queue):
    assert executor_named("process").log_path(job.pk, 3) == RunArea.of(job.pk, 3).log
    # sbatch's --output, which also takes standard error (no --error is given).
    slurm_log = executor_named("slurm").log_path(job.pk, 3)
    assert slurm_log == RunArea.of(job.pk, 3).log
    assert slurm_log.name == "attempt-3.log"
    assert executor_named("simulated").log_path(job.pk, 3) is None
    aws_queue.executor = "simulated"
    aws_queue.save(update_fields=["executor"])
    job.refresh_from_db()
    assert logs.log_attempts(job) == []


def test_the_tail_is_the_last_hundred_lines_escaped(client, job, own_lead):
    lines = [f"step {n}" for n in range(250)] + ["<script>alert(1)</script> & \x1b[31mred"]
    write_log(job, 2, ("\n".join(lines) + "\n").encode())
    client.force_login(own_lead)
    body = page(client, job)
    tail = logs.job_log_tail(job, 2)
    assert tail.lines[0] == "step 151" and len(tail.lines) == logs.TAIL_LINES
    assert tail.cut and tail.exists
    assert "step 150\n" not in body and "step 151\n" in body and "step 249\n" in body
    # Escaped for HTML, and the terminal's escape shown, not acted on.
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; \u241b[31mred" in body
    assert "<script>alert(1)" not in body
    assert reverse("job-log-download", args=[job.pk, 2]) in body


def test_a_short_file_is_shown_whole_and_a_progress_bar_by_its_last_redraw(job):
    data = b"loading\r 10%\r 50%\r100%\nno newline at the end"
    write_log(job, 2, data)
    tail = logs.job_log_tail(job, 2)
    assert tail.lines == ["100%", "no newline at the end"]
    assert not tail.cut and tail.size == len(data)


def test_a_big_file_is_read_within_the_byte_bound(job):
    line = b"x" * 999 + b"\n"
    path = write_log(job, 2, line * 20_000)  # 20 MB
    reads = []
    original = os.pread

    def counting(fd, size, offset):
        reads.append(size)
        return original(fd, size, offset)

    os.pread = counting
    try:
        tail = logs.job_log_tail(job, 2)
    finally:
        os.pread = original
    assert sum(reads) <= logs.TAIL_BYTES
    assert tail.size == path.stat().st_size == 20_000_000
    # 64 KiB hold 65 whole lines of 1,000 bytes: all shown, the partial first one not.
    assert len(tail.lines) == logs.TAIL_BYTES // 1000
    assert all(shown == "x" * 999 for shown in tail.lines)
    assert tail.cut


def test_one_huge_line_is_cut_to_the_bound_not_lost(job):
    write_log(job, 2, b"y" * (logs.TAIL_BYTES * 3))
    tail = logs.job_log_tail(job, 2)
    assert tail.lines == ["y" * logs.TAIL_BYTES] and tail.cut


def test_the_download_streams_the_whole_file_as_an_attachment(client, job, own_lead):
    data = b"".join(f"line {n}\n".encode() for n in range(100_000))
    write_log(job, 1, b"attempt one\n")
    write_log(job, 2, data)
    client.force_login(own_lead)
    response = download(client, job, 2)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == (f'attachment; filename="job-{job.pk}-attempt-2.log"')
    assert int(response["Content-Length"]) == len(data)
    blocks = list(response.streaming_content)
    assert len(blocks) > 1 and max(map(len, blocks)) <= logs.BLOCK_BYTES
    assert b"".join(blocks) == data
    assert b"".join(download(client, job, 1).streaming_content) == b"attempt one\n"


def test_the_attempt_picker_shows_an_earlier_attempt(client, job, own_lead):
    write_log(job, 1, b"first attempt: preempted at step 40\n")
    write_log(job, 2, b"second attempt: resumed from step 40\n")
    client.force_login(own_lead)
    assert "second attempt" in page(client, job)
    body = page(client, job, attempt="1")
    assert "first attempt: preempted" in body and "second attempt" not in body
    assert '<option value="1" selected>1</option>' in body
    assert '<option value="2">2 (latest)</option>' in body


def test_an_attempt_that_is_not_the_jobs_is_refused_naming_the_field(client, job, own_lead):
    write_log(job, 2, b"current\n")
    client.force_login(own_lead)
    body = page(client, job, attempt="7")
    assert "Attempt: choose an attempt of this job (from 1 to 2)" in body
    assert "current" in body  # the current attempt is shown instead
    response = download(client, job, 7)
    assert response.status_code == 400
    assert b"attempt: choose an attempt of this job (from 1 to 2)" in response.content


def test_a_symlink_in_place_of_the_log_is_not_followed(client, job, own_lead, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the product's secret key\n")
    path = RunArea.of(job.pk, 2).log
    path.parent.mkdir(parents=True)
    path.symlink_to(secret)
    client.force_login(own_lead)
    assert "the product's secret key" not in page(client, job)
    assert "Attempt 2 has no output file" in page(client, job)
    assert download(client, job, 2).status_code == 404


def test_a_symlinked_job_area_is_not_followed(client, job, own_lead, tmp_path, job_area):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "attempt-2.log").write_text("someone else's file\n")
    job_area.mkdir(parents=True)
    (job_area / f"job-{job.pk}").symlink_to(elsewhere)
    client.force_login(own_lead)
    assert "someone else's file" not in page(client, job)
    assert download(client, job, 2).status_code == 404


def test_a_fifo_in_place_of_the_log_does_not_block(client, job, own_lead):
    path = RunArea.of(job.pk, 2).log
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    client.force_login(own_lead)
    assert "Attempt 2 has no output file" in page(client, job)
    assert download(client, job, 2).status_code == 404


def test_another_teams_lead_sees_the_job_but_not_its_output(client, job, other_lead):
    write_log(job, 2, b"the team's private output\n")
    client.force_login(other_lead)
    body = page(client, job)  # the job itself: every lead sees the queue
    assert "the team's private output" not in body
    assert "Download the whole file" not in body
    assert download(client, job, 2).status_code == 403
    headers = {"HX-Request": "true", "HX-Target": "job-log"}
    fragment = client.get(reverse("job-detail", args=[job.pk]), headers=headers)
    assert fragment.status_code == 403


def test_someone_who_may_not_see_jobs_gets_nothing(client, job, leadership):
    write_log(job, 2, b"output\n")
    client.force_login(leadership)
    assert download(client, job, 2).status_code in {403, 404}


def test_an_admin_reads_any_jobs_output_and_the_fragment_refreshes_it(client, job, admin):
    write_log(job, 2, b"first line\n")
    client.force_login(admin)
    headers = {"HX-Request": "true", "HX-Target": "job-log"}
    fragment = client.get(reverse("job-detail", args=[job.pk]), headers=headers)
    assert fragment.status_code == 200
    body = fragment.content.decode()
    assert 'id="job-log"' in body
    assert 'hx-trigger="every 5s"' in body  # a running job's tail keeps coming
    assert "first line" in body and "<h2" not in body


def test_a_slurm_jobs_output_is_read_from_sbatchs_output_file(client, aws_queue, admin):
    aws_queue.executor = "slurm"
    aws_queue.save(update_fields=["executor"])
    job = running(aws_queue.shares.get(name="qs2"), attempt=1)
    path = RunArea.of(job.pk, 1).log
    path.parent.mkdir(parents=True)
    path.write_bytes(b"on node1: CUDA_VISIBLE_DEVICES=0\nTraceback: error stream\n")
    client.force_login(admin)
    body = page(client, job)
    assert "on node1: CUDA_VISIBLE_DEVICES=0" in body and "Traceback: error stream" in body
    assert download(client, job, 1).status_code == 200
