"""Nodes DOWN or DRAINED reduce the capacity a Slurm queue can use: the reconciliation
records what the partition's nodes hold per instance type, the pass uses the lower of
that and the configured capacity (never below what the queue's jobs hold), and the
queue page says so."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.bridge import queue_policy
from fleet.models import InstanceType, JobQueue
from scheduler.executors import executor_for
from scheduler.executors.slurm import binding as slurm_binding
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.client import SlurmNode, expand_hostlist, instances_per_node
from scheduler.services.passes import scheduling_pass
from tests.scheduler.slurm.conftest import fresh, settle, submitted, train

NODE = SlurmNode("node1", "idle", 8, 4000, {"gpu": 4, "gpu:a100": 4}, frozenset({"a100"}), "")


@pytest.mark.parametrize(
    ("resources", "instances"),
    [
        (["--gres=gpu:1"], 4),
        (["--gres=gpu:a100:2"], 2),
        (["--gpus-per-node=4"], 1),
        (["--exclusive", "--constraint=a100"], 1),
        (["--constraint=h100"], 0),
        (["--constraint=h100|a100", "--gres=gpu:1"], 4),
        (["--gres=gpu:1", "--mem=1500M"], 2),
        (["--gres=gpu:1", "--cpus-per-task=3"], 2),
        (["--gres=gpu:1", "--cpus-per-gpu=4"], 2),
        ([], 8),
    ],
)
def test_instances_per_node_follow_the_instance_types_resources(resources, instances):
    assert instances_per_node(resources, NODE) == instances


def test_a_node_out_of_service_holds_nothing_and_a_draining_one_only_what_we_run_there():
    nodes = [
        NODE,
        SlurmNode("node2", "drained", 8, 4000, {"gpu": 4}, frozenset(), "test"),
        SlurmNode("node3", "draining", 8, 4000, {"gpu": 4}, frozenset(), "maint"),
        SlurmNode("node4", "idle*", 8, 4000, {"gpu": 4}, frozenset(), ""),
    ]
    seen = service.nodes_seen(nodes, {"gpu1": ["--gres=gpu:1"]}, {("gpu1", "node3"): 3})
    assert seen["types"]["gpu1"]["total"] == 16
    assert seen["types"]["gpu1"]["usable"] == 4 + 3
    described = [node["described"] for node in seen["nodes"] if not node["usable"]]
    assert described == [
        "node2 drained (test)",
        "node3 draining (maint)",
        "node4 idle, not responding",
    ]
    assert expand_hostlist("node[1-2,05],gpu7") == ["node1", "node2", "node05", "gpu7"]


@pytest.mark.django_db
def _usable(queue) -> dict[str, int]:
    """The capacity a pass uses: the configured one, lowered to what the executor sees."""
    return queue_policy(queue, seen=executor_for(queue).capacity_seen(queue)).queue.capacity


def test_the_pass_uses_the_usable_capacity_never_below_what_its_jobs_hold(submit, queue):
    """The AWS sample (3 × ml.g5.xlarge) on nodes that hold 1 now: the pass's capacity
    is 1; with two jobs running it is 2 (a node taken out never preempts)."""
    for share in ("qs1", "qs2"):
        submit(share, f"runs-{share}")
    queue.executor = "slurm"  # its executor reports nodes (the jobs were submitted before)
    queue.capacity_seen = {"types": {"ml.g5.xlarge": {"total": 3, "usable": 1}}, "nodes": []}
    queue.save()
    assert _usable(queue) == {"ml.g5.xlarge": 1}
    assert queue_policy(queue).queue.capacity == {"ml.g5.xlarge": 3}
    queue.capacity_seen = None
    queue.save()
    assert scheduling_pass(queue_id=queue.pk, now=timezone.now()).started
    queue.capacity_seen = {"types": {"ml.g5.xlarge": {"total": 3, "usable": 1}}, "nodes": []}
    queue.save()
    assert _usable(queue) == {"ml.g5.xlarge": 2}
    queue.capacity_seen = {"types": {"ml.g5.xlarge": {"total": 9, "usable": 9}}, "nodes": []}
    assert _usable(queue) == {"ml.g5.xlarge": 3}  # never above


def queue_page(client, bound) -> str:
    return client.get(reverse("queue-detail", args=[bound.pk])).content.decode()


def scontrol_node(slurm_cluster, node: str, *state: str) -> None:
    slurm_cluster.run("scontrol", "update", f"nodename={node}", *state)


@pytest.mark.slurm
@pytest.mark.django_db
def test_a_drained_node_withholds_its_capacity_until_it_is_resumed(
    slurm_queue, start, slurm_cluster, client, admin
):
    """One instance is a whole node's four GPUs: the partition holds 2, the queue says 3
    (the page warns). node2 drained: the queue can use 1 (qs3 reserves it, its job runs
    there), a second job waits for
    capacity; node2 resumed: it starts, on node2."""
    slurm_binding.instance_type_set_slurm_resources(
        instance_type=InstanceType.objects.get(name="ml.g5.xlarge"), resources=["--gres=gpu:4"]
    )
    client.force_login(admin)
    service.slurm_reconcile()
    seen = JobQueue.objects.get(pk=slurm_queue.pk).capacity_seen
    assert seen["types"]["ml.g5.xlarge"] == {
        "total": 2,
        "usable": 2,
        "per_node": {"node1": 1, "node2": 1},
    }
    assert "the queue&#x27;s capacity is 3, but partition gpu&#x27;s nodes hold 2" in queue_page(
        client, slurm_queue
    )
    scontrol_node(slurm_cluster, "node2", "state=drain", "reason=test")
    try:
        settle(
            lambda: JobQueue.objects.get(pk=slurm_queue.pk).capacity_seen["types"]["ml.g5.xlarge"][
                "usable"
            ]
            == 1,
            what="the reconciliation sees node2 drained",
        )
        page = queue_page(client, slurm_queue)
        assert "1 of 2 ml.g5.xlarge unusable: node2 drained (test)" in page
        first, outcome = start("qs3", "on-node1", train(600, step_seconds=0.2, every=50))
        assert outcome.started == [first.pk]
        submitted(first)
        settle(lambda: (fresh(first).placement or {}).get("nodes") == "node1", what="on node1")
        second, outcome = start("qs2", "waits-for-node2", train(2, step_seconds=0.1, every=1))
        assert outcome.started == []
        waiting = fresh(second)
        assert (waiting.state, waiting.reason) == ("RUNNABLE", "WAITING_FOR_CAPACITY")
        detail = client.get(reverse("job-detail", args=[second.pk])).content.decode()
        assert "no ml.g5.xlarge is free right now" in detail
        assert "(Slurm nodes out of service: 1 of 2 ml.g5.xlarge unusable: node2 drained" in detail
    finally:
        scontrol_node(slurm_cluster, "node2", "state=resume")
    settle(
        lambda: JobQueue.objects.get(pk=slurm_queue.pk).capacity_seen["types"]["ml.g5.xlarge"][
            "usable"
        ]
        == 2,
        what="the reconciliation sees node2 back",
    )
    assert "unusable" not in queue_page(client, slurm_queue)
    outcome = scheduling_pass(queue_id=slurm_queue.pk, now=timezone.now())
    assert outcome.started == [second.pk]
    submitted(second)
    done = settle(lambda: fresh(second).state == "SUCCEEDED" and fresh(second), what="it runs")
    assert done.placement["nodes"] == "node2"


@pytest.mark.django_db
def test_a_job_too_big_only_while_nodes_are_out_waits_and_never_fails_for_it(submit, queue, clock):
    """runnable_time_limit 60 s; the nodes hold 1 of the queue's 3 instances now. A job
    of 2 fits the configured 3: it waits for the nodes, its clock does not run, and it
    starts once they return. A job of 4 is bigger than the queue itself: it fails."""
    from scheduler.selectors import is_too_big, waiting_reason

    waits = submit("qs1", "two", instances=2)
    too_big = submit("qs1", "four", instances=4)
    queue.executor = "slurm"
    queue.runnable_time_limit = 60
    queue.capacity_seen = {
        "types": {"ml.g5.xlarge": {"total": 3, "usable": 1, "per_node": {"n1": 1, "n2": 2}}},
        "nodes": [
            {"name": "n1", "usable": True, "described": "n1 idle"},
            {"name": "n2", "usable": False, "described": "n2 drained (test)"},
        ],
    }
    queue.save()
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    waits.refresh_from_db()
    assert (waits.reason, waits.misconfigured_since) == ("SERVICE_ENVIRONMENT_MAX_RESOURCE", None)
    assert not is_too_big(waits) and is_too_big(too_big)
    assert waiting_reason(waits) == (
        "waiting: it needs 2 ml.g5.xlarge, more than the queue can use while Slurm nodes are "
        "out of service (2 of 3 ml.g5.xlarge unusable: n2 drained (test)); it starts when "
        "they return"
    )
    outcome = scheduling_pass(queue_id=queue.pk, now=clock(120))
    assert outcome.failed == [too_big.pk]
    assert fresh(waits).state == "RUNNABLE"
    queue.capacity_seen = None
    queue.save()
    outcome = scheduling_pass(queue_id=queue.pk, now=clock(130))
    assert outcome.started == [waits.pk]
