"""The daemons of the cluster the `slurm_cluster` fixture uses (SLURM_CONF's): where its
test directory and port are, read from its slurm.conf, so a test that stops or pauses a
daemon brings back that cluster (the one CI's .ci/run starts, or a helper's own)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from django.conf import settings


def test_dir(conf: str) -> Path:
    """SLURM_TEST_DIR of the cluster: cluster.sh writes etc/slurm.conf under it."""
    return Path(conf).parent.parent


def test_port(conf: str) -> str:
    for line in Path(conf).read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "SlurmctldPort":
            return value.strip()
    raise AssertionError(f"{conf} names no SlurmctldPort")


def pid(conf: str, daemon: str) -> int:
    """The pid of `munged`, `slurmctld` or `slurmd-node1`, from cluster.sh's pid files."""
    directory = test_dir(conf)
    path = directory / ("munge/run/munged.pid" if daemon == "munged" else f"run/{daemon}.pid")
    return int(path.read_text().strip())


def cluster_start(conf: str) -> None:
    """`cluster.sh start` for this cluster: starts what is not running, waits for idle."""
    subprocess.run(
        [str(Path(settings.BASE_DIR) / "scripts/slurm/cluster.sh"), "start"],
        env={
            **os.environ,
            "SLURM_TEST_DIR": str(test_dir(conf)),
            "SLURM_TEST_PORT": test_port(conf),
            "SLURM_CONF": conf,
        },
        capture_output=True,
        timeout=90,
        check=True,
    )
