"""`manage.py bench_slurm` on the real test cluster, with tiny numbers: it runs every
part, its invariants hold on what really ran, and it leaves nothing behind."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from fleet.models import InstanceType, Job, JobQueue

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def test_bench_slurm_runs_checks_the_invariants_and_cleans_up(slurm_cluster, slurm_settings):
    # The jobs' files where their account (nobody, as root) may reach them.
    root = slurm_settings.JOB_CHECKPOINT_ROOT
    out = io.StringIO()
    call_command(
        "bench_slurm",
        conf=slurm_cluster.conf,
        starts=6,
        reclaims=2,
        held=10,
        grace=1,
        stdout=out,
    )
    text = out.getvalue()
    print(text)
    assert "starts: 6 of 6 ran" in text and "(0 did not succeed)" in text
    assert re.search(r"reclaims: 2 victims .* \(n=2\)", text)
    assert "runs without node or CUDA_VISIBLE_DEVICES: 0;" in text
    assert "two runs on one GPU at once: 0;" in text
    assert "a node over its 4 GPUs: 0;" in text
    stray = re.search(r"the product had stopped: ([\d.]+) s \(one tick: ([\d.]+) s\)", text)
    assert float(stray[1]) <= float(stray[2])
    assert re.search(r"reconciliation: 10 held Slurm jobs known .*it changed 0\)", text)
    prefix = re.search(r"Slurm jobs named (\S+)-\*", text)[1]
    left = slurm_cluster.run("squeue", "--noheader", "--states=PENDING,RUNNING", "--format=%j")
    assert not [name for name in left.split() if name.startswith(prefix + "-")]
    assert not JobQueue.objects.filter(name__startswith="bench-slurm-").exists()
    assert not Job.objects.exists() and not InstanceType.objects.filter(name__startswith="bench.")
    assert not list(root.glob("bench-slurm-*"))
