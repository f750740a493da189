"""Capacity from the cluster: what jobs the product did not start hold on the bound
partition's nodes is not the product's to use. The reconciliation reads their
allocations (`scontrol -d show job`: GPUs, CPUs and memory per node), the pass uses the
smaller of the configured and the usable capacity, and the queue page and the API name
those jobs (Slurm id, user, GPUs, since when). The partition's state counts too (a
partition not up gives nothing: tests/scheduler/slurm/test_starting.py)."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import CapacityLimit, Job, JobQueue, QueueCapacity
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.client import (
    NodeAllocation,
    SlurmNode,
    parse_allocation,
    parse_run_name,
)
from scheduler.services.passes import scheduling_pass
from tests.scheduler.slurm.conftest import fresh, settle, train

# One line of `scontrol -d --oneliner show job` (Slurm 22.05, the test cluster), and a
# job of two nodes with typed GPUs.
ONE_NODE = (
    "JobId=1 JobName=outside UserId=alice(1001) GroupId=alice(1001) JobState=RUNNING "
    "Reason=None StartTime=2026-12-07T23:27:16 Partition=gpu NodeList=node1 NumNodes=1 "
    "NumCPUs=1 TRES=cpu=1,mem=500M,node=1,billing=1 JOB_GRES=gpu:3   Nodes=node1 "
    "CPU_IDs=0 Mem=500 GRES=gpu:3(IDX:0-2) MinCPUsNode=1 TresPerNode=gres:gpu:3"
)
TWO_NODES = (
    "JobId=7 JobName=big UserId=bob(1002) JobState=COMPLETING StartTime=2026-12-07T10:00:00 "
    "NumNodes=2 Nodes=node1 CPU_IDs=0-3 Mem=1000 GRES=gpu:a100:2(IDX:0,2),mps:0 "
    "Nodes=node[2-3] CPU_IDs=4-5 Mem=0 GRES=gpu:a100:1(IDX:3)"
)


def node(name: str, gres: dict[str, int], state: str = "idle", partition: str = "up"):
    return SlurmNode(name, state, 8, 4000, gres, frozenset(), "", partition)


def test_an_allocation_is_read_per_node_with_its_gpu_indexes():
    one = parse_allocation(ONE_NODE)
    assert (one.job_id, one.name, one.user, one.state) == ("1", "outside", "alice", "RUNNING")
    assert one.per_node == {"node1": NodeAllocation(1, 500, {"gpu": 3}, "0-2")}
    assert one.gpus == 3
    two = parse_allocation(TWO_NODES)
    assert two.per_node["node1"] == NodeAllocation(
        4, 1000, {"gpu": 2, "gpu:a100": 2, "mps": 0}, "0,2"
    )
    assert (
        two.per_node["node2"]
        == two.per_node["node3"]
        == NodeAllocation(2, 0, {"gpu": 1, "gpu:a100": 1}, "3")
    )
    assert two.gpus == 4
    assert parse_allocation("No jobs in the system") is None


def test_what_others_hold_is_subtracted_per_node_and_listed():
    """node1 (4 GPUs) has 3 held by alice's job: 1 left; node2 (4) is free; node3 is
    drained. An exclusive type fits nowhere anyone else uses."""
    nodes = [
        node("node1", {"gpu": 4}),
        node("node2", {"gpu": 4}),
        node("node3", {"gpu": 4}, state="drained"),
    ]
    outside = [parse_allocation(ONE_NODE)]
    resources = {"one": ["--gres=gpu:1"], "whole": ["--gres=gpu:4", "--exclusive"]}
    seen = service.nodes_seen(nodes, resources, {}, outside)
    assert seen["types"]["one"] == {
        "total": 12,
        "usable": 1 + 4,
        "per_node": {"node1": 4, "node2": 4, "node3": 4},
        "held_outside": 3,
    }
    assert seen["types"]["whole"]["usable"] == 1
    assert seen["outside"] == [
        {
            "job_id": "1",
            "user": "alice",
            "name": "outside",
            "gpus": 3,
            "nodes": ["node1"],
            "since": "2026-12-07T23:27:16+00:00",
        }
    ]
    assert seen["outside_more"] == 0
    # Typed GPUs: a job holding 2 a100 of node1's 4 leaves 2 to a type asking a100.
    typed = [node("node1", {"gpu": 4, "gpu:a100": 4})]
    held = service.nodes_seen(
        typed, {"a": ["--gres=gpu:a100:1"]}, {}, [parse_allocation(TWO_NODES)]
    )
    assert held["types"]["a"]["usable"] == 2


def test_a_partition_that_is_not_up_gives_nothing():
    nodes = [node("node1", {"gpu": 4}, partition="down"), node("node2", {"gpu": 4}, "down")]
    seen = service.nodes_seen(nodes, {"one": ["--gres=gpu:1"]}, {})
    assert seen["types"]["one"]["usable"] == 0
    assert seen["types"]["one"]["total"] == 8
    assert seen["partition_state"] == "down"


def test_at_most_fifty_jobs_of_others_are_listed_the_rest_counted():
    many = [
        parse_allocation(ONE_NODE.replace("JobId=1 ", f"JobId={i} ").replace("gpu:3", "gpu:0"))
        for i in range(1, 61)
    ]
    seen = service.nodes_seen([node("node1", {"gpu": 4})], {"one": ["--gres=gpu:1"]}, {}, many)
    assert len(seen["outside"]) == service.OUTSIDE_LISTED == 50
    assert seen["outside_more"] == 10


@pytest.fixture
def eight(slurm_queue):
    """The queue holds 8 instances of one GPU each (the cluster's two nodes of 4), all
    qs1's to use."""
    QueueCapacity.objects.filter(queue=slurm_queue).update(instances=8)
    limits = CapacityLimit.objects.filter(share__queue=slurm_queue)
    limits.filter(share__name="qs1").update(max_instances=8)
    limits.exclude(share__name="qs1").delete()  # qs3 reserves nothing
    return slurm_queue


def ours_in_slurm(slurm_cluster, prefix: str) -> dict[str, str]:
    """Slurm's state of each job of the test's prefix (sampled from squeue)."""
    out = slurm_cluster.run("squeue", "--noheader", "--states=all", "--format=%i %j %T")
    states = {}
    for line in out.splitlines():
        job_id, name, state = line.split()
        if name.startswith(prefix + "-"):
            states[job_id] = state
    return states


def usable(queue) -> int:
    return JobQueue.objects.get(pk=queue.pk).capacity_seen["types"]["ml.g5.xlarge"]["usable"]


@pytest.mark.slurm
@pytest.mark.django_db
def test_gpus_held_by_an_outside_job_are_not_started_on(
    eight, start, slurm_cluster, slurm_settings, client, admin
):
    """An `sbatch --gres=gpu:3` of someone else holds 3 GPUs: usable 8 -> 5, of 8 jobs
    only 5 start (the other 3 wait RUNNABLE, never in Slurm's queue), no job of ours is
    ever PENDING in Slurm past a reconciliation; the queue's API and page name the
    outside job; once it is cancelled the capacity is 8 again and the 3 start."""
    client.force_login(admin)
    began = time.monotonic()
    service.slurm_reconcile()
    assert usable(eight) == 8
    outside = slurm_cluster.run(
        "sbatch",
        "--parsable",
        "--partition=gpu",
        "--gres=gpu:3",
        "--job-name=someone-else",
        "--output=/dev/null",
        "--wrap=sleep 300",
    ).strip()
    try:
        slurm_cluster.wait_state(outside, {"RUNNING"})
        assert parse_run_name("someone-else") is None
        settle(lambda: usable(eight) == 5, what="the outside job's 3 GPUs are subtracted")
        seen = JobQueue.objects.get(pk=eight.pk).capacity_seen
        assert seen["types"]["ml.g5.xlarge"]["held_outside"] == 3
        held_by = [job for job in seen["outside"] if job["job_id"] == outside]
        user = slurm_cluster.job_field(outside, "UserId").split("(")[0]
        assert held_by and (held_by[0]["user"], held_by[0]["gpus"]) == (user, 3)

        api = client.get(f"/api/v1/queues/{eight.pk}/").json()["capacity_seen"]
        assert api["types"]["ml.g5.xlarge"] == {"total": 8, "usable": 5, "held_outside": 3}
        assert [(j["job_id"], j["user"], j["gpus"]) for j in api["outside"]] == [(outside, user, 3)]
        page = client.get(reverse("queue-detail", args=[eight.pk])).content.decode()
        assert "Held outside the product:" in page
        assert f"Slurm job {outside} of {user}: 3 GPUs on " in page

        jobs = []
        for index in range(8):
            job, _ = start("qs1", f"fill-{index}", train(600, step_seconds=0.5, every=100))
            jobs.append(job)
        running = [job for job in jobs if fresh(job).state == "RUNNING"]
        assert len(running) == 5
        waiting = [fresh(job) for job in jobs if fresh(job).state != "RUNNING"]
        assert [job.state for job in waiting] == ["RUNNABLE"] * 3
        assert waiting[0].reason == "WAITING_FOR_CAPACITY"  # the others wait behind it
        assert not any(job.placement for job in waiting)  # never submitted to Slurm
        # The reconciliation submits the 5 (no Celery here); sample Slurm every 0.2 s.
        pending_since: dict[str, float] = {}
        longest = 0.0
        deadline = time.monotonic() + 20
        last = time.monotonic()
        while time.monotonic() < deadline:
            if time.monotonic() - last >= 1:
                service.slurm_reconcile()
                last = time.monotonic()
            states = ours_in_slurm(slurm_cluster, slurm_settings.SLURM_JOB_PREFIX)
            for slurm_id, state in states.items():
                if state == "PENDING":
                    pending_since.setdefault(slurm_id, time.monotonic())
                    longest = max(longest, time.monotonic() - pending_since[slurm_id])
            if len(states) == 5 and set(states.values()) == {"RUNNING"}:
                break
            time.sleep(0.2)
        assert list(states.values()) == ["RUNNING"] * 5, states
        # Slurm runs what it is given: a job of ours pending for longer than a
        # reconciliation (1 s) and Slurm's scheduling of it would be Slurm choosing.
        assert longest < 3, f"a job of ours was PENDING in Slurm {longest:.1f} s"
        for _ in range(5):  # never more than the 3 + 5 GPUs the nodes have, sampled
            states = ours_in_slurm(slurm_cluster, slurm_settings.SLURM_JOB_PREFIX)
            assert list(states.values()).count("RUNNING") == 5
            assert "PENDING" not in states.values()
            time.sleep(0.2)
    finally:
        slurm_cluster.run("scancel", outside)
    settle(lambda: usable(eight) == 8, what="the capacity is 8 again")
    assert (
        "Held outside the product"
        not in client.get(reverse("queue-detail", args=[eight.pk])).content.decode()
    )
    outcome = scheduling_pass(queue_id=eight.pk, now=timezone.now())
    assert sorted(outcome.started) == sorted(job.pk for job in waiting)
    took = time.monotonic() - began
    print(f"\noutside capacity test: {took:.1f} s, longest PENDING {longest:.1f} s")
    assert all(job.attempt == 1 for job in Job.objects.filter(queue=eight, state="RUNNING"))
