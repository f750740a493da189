"""The test cluster itself (scripts/slurm/cluster.sh): two nodes, four GPUs each, and a
job of two nodes runs one task on each."""

import pytest

pytestmark = pytest.mark.slurm


def test_the_cluster_has_two_idle_nodes_of_four_gpus(slurm_cluster):
    rows = slurm_cluster.run("sinfo", "--noheader", "--Node", "--partition=gpu", "--format=%N %G")
    nodes = dict(line.split() for line in rows.splitlines())
    assert nodes == {"node1": "gpu:4", "node2": "gpu:4"}


def test_a_two_node_job_runs_on_both_nodes(slurm_cluster, tmp_path):
    out = tmp_path / "out"
    job_id = slurm_cluster.run(
        "sbatch",
        "--parsable",
        "--partition=gpu",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--gres=gpu:1",
        f"--output={out}",
        "--wrap",
        "srun sh -c 'echo \"$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES\"'",
    ).strip()
    assert slurm_cluster.wait_state(job_id, {"COMPLETED", "FAILED"}) == "COMPLETED"
    assert slurm_cluster.job_field(job_id, "NodeList") == "node[1-2]"
    lines = sorted(out.read_text().split("\n")[:-1])
    # One task per node, each with the one GPU of its node it was given (which of the
    # node's four depends on what else still holds one: a job of an earlier test may be
    # completing).
    assert [line.split()[0] for line in lines] == ["node1", "node2"]
    assert all(line.split()[1] in {"0", "1", "2", "3"} for line in lines), lines
