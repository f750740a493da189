"""A queue's binding to a Slurm cluster, and an instance type's Slurm resources: bad
input gets an error naming the field (no cluster needed)."""

import os
import pwd
import time

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from scheduler.executors.run_area import RunArea
from scheduler.executors.slurm.binding import (
    SlurmBinding,
    instance_type_resources,
    queue_bind_slurm,
    slurm_resources_validate,
)
from scheduler.executors.slurm.client import parse_run_name, run_name, sbatch_arguments

pytestmark = pytest.mark.django_db


def errors(call) -> dict:
    with pytest.raises(ValidationError) as caught:
        call()
    return caught.value.message_dict


def test_a_binding_names_a_cluster_file_and_a_partition(aws_queue, tmp_path):
    assert "slurm_conf" in errors(
        lambda: queue_bind_slurm(queue=aws_queue, conf="", partition="gpu")
    )
    assert errors(
        lambda: queue_bind_slurm(queue=aws_queue, conf="etc/slurm.conf", partition="gpu")
    ) == {"slurm_conf": ["'etc/slurm.conf' is not an absolute path"]}
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    assert "slurm_partition" in errors(
        lambda: queue_bind_slurm(queue=aws_queue, conf=str(conf), partition="gpu;rm -rf")
    )
    assert "slurm_account" in errors(
        lambda: queue_bind_slurm(queue=aws_queue, conf=str(conf), partition="gpu", account="a b")
    )
    aws_queue.refresh_from_db()
    assert (SlurmBinding.of(aws_queue).conf, SlurmBinding.of(aws_queue).partition) == ("", "")


def unreachable_conf(tmp_path) -> str:
    """A cluster whose controller nobody runs: Slurm's client alone waits ~9 s for it."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=gone\nSlurmctldHost=localhost\nSlurmctldPort=1\n")
    return str(conf)


def test_an_unreachable_cluster_refuses_the_binding_fast_and_says_why(
    settings, aws_queue, tmp_path
):
    settings.SLURM_BIND_TIMEOUT = 1
    version = aws_queue.version
    started = time.monotonic()

    problems = errors(
        lambda: queue_bind_slurm(queue=aws_queue, conf=unreachable_conf(tmp_path), partition="gpu")
    )

    assert time.monotonic() - started < 3
    [message] = problems["slurm_conf"]
    assert "did not answer" in message and "partition 'gpu' could not be checked" in message
    aws_queue.refresh_from_db()
    assert (SlurmBinding.of(aws_queue).conf, aws_queue.version) == ("", version)


def test_the_command_reaches_the_same_checks(settings, aws_queue, tmp_path):
    settings.SLURM_BIND_TIMEOUT = 1
    with pytest.raises(CommandError) as caught:
        call_command(
            "slurm_bind", "queue", aws_queue.name, "--conf", unreachable_conf(tmp_path),
            "--partition", "gpu",
        )  # fmt: skip
    assert caught.value.returncode == 2
    assert str(caught.value).startswith("slurm_conf: the cluster of ")
    with pytest.raises(CommandError, match=r"^slurm_resources: --wrap is not a resource option"):
        call_command("slurm_bind", "instance-type", "ml.g5.xlarge", "--", "--wrap=id")
    aws_queue.refresh_from_db()
    assert SlurmBinding.of(aws_queue).conf == ""


def test_resources_are_resource_options_only():
    assert slurm_resources_validate(["--gres=gpu:a100:1", "--exclusive"]) == [
        "--gres=gpu:a100:1",
        "--exclusive",
    ]
    for bad in (["--wrap=id"], ["--output=/etc/passwd"], ["--export=ALL"], ["--nodes=4"]):
        assert "slurm_resources" in errors(lambda bad=bad: slurm_resources_validate(bad))
    assert "slurm_resources" in errors(lambda: slurm_resources_validate(["--gres=gpu:1 --wrap"]))
    assert "slurm_resources" in errors(lambda: slurm_resources_validate("--gres=gpu:1"))


def test_the_batch_script_is_the_fixed_launcher_and_the_program_is_not_in_sbatch_arguments(
    settings, tmp_path
):
    settings.JOB_CHECKPOINT_ROOT = tmp_path
    files = RunArea.of(7, 2)
    argv = sbatch_arguments(
        name=run_name(7, 2),
        partition="gpu",
        account="",
        instances=2,
        resources=["--gres=gpu:1"],
        files=files,
    )
    assert argv[-2].endswith("scheduler/executors/slurm/launch.py")
    assert argv[-1] == str(files.spec)
    assert "--nodes=2" in argv and "--no-requeue" in argv and "--gres=gpu:1" in argv
    assert parse_run_name(run_name(7, 2)) == (7, 2)
    assert parse_run_name("someone-else-7-2") is None


def test_the_slurm_bind_command_binds_and_refuses_naming_the_field(aws_queue, tmp_path):
    from django.core.management import CommandError, call_command

    from fleet.models import InstanceType

    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    with pytest.raises(CommandError, match="slurm_partition"):
        call_command(
            "slurm_bind", "queue", aws_queue.name, "--conf", str(conf), "--partition", "a b"
        )
    aws_queue.refresh_from_db()
    assert SlurmBinding.of(aws_queue).conf == ""  # nothing changed
    with pytest.raises(CommandError, match="queue: no queue named 'nope'"):
        call_command("slurm_bind", "queue", "nope", "--conf", str(conf), "--partition", "gpu")
    # A binding that passes is saved once the cluster says its partition exists:
    # tests/scheduler/slurm/test_binding.py, on the real cluster.

    with pytest.raises(CommandError, match="slurm_resources: --wrap is not a resource option"):
        call_command("slurm_bind", "instance-type", "ml.g5.xlarge", "--", "--wrap=rm")
    call_command("slurm_bind", "instance-type", "ml.g5.xlarge", "--", "--gres=gpu:1")
    assert instance_type_resources(InstanceType.objects.get(name="ml.g5.xlarge")) == [
        "--gres=gpu:1"
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="what a root submitter does (CI runs as root)")
def test_a_root_submitter_runs_jobs_as_slurm_job_user_or_refuses(settings, tmp_path):
    """As the process executor's runner: never as root unless SLURM_ALLOW_ROOT."""
    from scheduler.executors.run_area import JobAccount, RunArea
    from scheduler.executors.slurm.client import SlurmError, job_account, prepare_area

    settings.SLURM_JOB_USER, settings.SLURM_ALLOW_ROOT = "", False
    with pytest.raises(SlurmError, match="SLURM_JOB_USER is not set") as caught:
        job_account()
    assert caught.value.refused
    settings.SLURM_JOB_USER = "root"
    with pytest.raises(SlurmError, match="is root; name an unprivileged account"):
        job_account()
    settings.SLURM_JOB_USER = "no-such-account-here"
    with pytest.raises(SlurmError, match="no such account"):
        job_account()
    settings.SLURM_JOB_USER = "nobody"
    nobody = pwd.getpwnam("nobody")
    account = job_account()
    assert account == JobAccount(uid=nobody.pw_uid, gid=nobody.pw_gid, name="nobody")
    settings.JOB_CHECKPOINT_ROOT = tmp_path / "checkpoints"
    files = RunArea.of(7, 1)
    prepare_area(files, account)
    argv = sbatch_arguments(
        name="gpuq-7-1",
        partition="gpu",
        account="",
        instances=1,
        resources=[],
        files=files,
        user=account,
    )
    assert f"--uid={nobody.pw_uid}" in argv and f"--gid={nobody.pw_gid}" in argv
    # The job's own directories and its output file are its account's, the area is not.
    assert {path.stat().st_uid for path in (files.checkpoint, files.workdir, files.log)} == {
        nobody.pw_uid
    }
    assert files.area.stat().st_uid == 0
    settings.SLURM_JOB_USER, settings.SLURM_ALLOW_ROOT = "", True
    assert job_account() == JobAccount()
