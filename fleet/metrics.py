"""The fleet's figures in Prometheus's exposition format, for `/metrics`.

One collector reads everything at scrape time in a fixed number of queries, whatever the
number of queues and shares: the queues with their capacity, shares and limits (the
`queue_list` prefetch), the running use of all of them (`running_usage`), the waiting
jobs, the preemptions (two aggregates over the PREEMPTED events) and the recent reclaim
waits. The per-share figures are those of `queue_usage` (the queue page's), so the page
and a scrape never disagree.

Per share and instance type (labels queue, share, instance_type):

- gauges of now: its limit, its borrow limit in instances (`+Inf` when unlimited, with
  `quota_share_borrow_unlimited` 1; 0 when it cannot borrow), in use within its limit,
  borrowed, lent out and lendable now (`UsageBar.lent` / `.lendable`), waiting jobs;
- counters since the events began: preemptions by the share whose job caused them (the
  PREEMPTED event's `by`) and by the share whose job suffered them, with label `cause`
  (reclaim, priority, capacity_change; a capacity change has no causing job); both are
  counted on the victim's instance type;
- time to reclaim: gauges `quota_share_reclaim_wait_seconds{stat="p50"|"p90"|"max"}`
  (nearest rank, engine.stats) of the reclaim waits (the STARTED events'
  `detail.reclaim_wait`) that ended in the last METRICS_RECLAIM_WINDOW_HOURS, with
  `quota_share_reclaim_episodes` their number. Gauges over a window, not a summary:
  Prometheus cannot aggregate a summary's quantiles, and a window the product chooses
  keeps a scrape's cost bounded.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db.models import Count
from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from engine.stats import nearest_rank
from fleet.models import Job, JobEvent
from fleet.selectors import queue_list, queue_usage, running_usage

SHARE_LABELS = ("queue", "share", "instance_type")
CAUSE_LABELS = (*SHARE_LABELS, "cause")
RECLAIM_STATS = (("p50", 50), ("p90", 90), ("max", 100))


def _gauge(name: str, documentation: str, labels=SHARE_LABELS) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=labels)


ShareKey = tuple[int, str]  # (share id, instance type name)


def _waiting() -> dict[ShareKey, int]:
    rows = (
        Job.objects.filter(state=Job.State.RUNNABLE)
        .values("share_id", "instance_type__name")
        .annotate(jobs=Count("id"))
    )
    return {(row["share_id"], row["instance_type__name"]): row["jobs"] for row in rows}


def _preemptions(side: str) -> dict[tuple[int, str, str], int]:
    """PREEMPTED events counted by the share of `side` ("job", the victim, or "by", the
    job that caused it), on the victim's instance type, and the cause. Grouped by ids,
    not names: the join to the names of every job costs more than the count
    (`jobevent_preempted_idx` serves the filter)."""
    events = JobEvent.objects.filter(type=JobEvent.Type.PREEMPTED)
    if side == "by":
        events = events.filter(by__isnull=False)
    rows = events.values(f"{side}__share_id", "job__instance_type__name", "cause").annotate(
        events=Count("id")
    )
    return {
        (row[f"{side}__share_id"], row["job__instance_type__name"], row["cause"]): row["events"]
        for row in rows
    }


def _reclaim_waits(since: dt.datetime) -> dict[ShareKey, list[int]]:
    rows = JobEvent.objects.filter(
        type=JobEvent.Type.STARTED, at__gte=since, detail__has_key="reclaim_wait"
    ).values_list("job__share_id", "job__instance_type__name", "detail__reclaim_wait")
    waits: dict[ShareKey, list[int]] = {}
    for share_id, type_name, wait in rows:
        waits.setdefault((share_id, type_name), []).append(int(wait))
    return waits


class FleetCollector:
    """A prometheus_client collector of the fleet's state, read afresh on each collect."""

    def __init__(self, *, now: dt.datetime | None = None) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        queues = list(queue_list())
        # Share id -> (queue name, share name): the events are counted by share id.
        names = {
            share.pk: (queue.name, share.name) for queue in queues for share in queue.shares.all()
        }
        yield from self._shares(queues, names)
        yield from self._preemption_counters(names)
        yield from self._reclaim(names)

    def _shares(self, queues: list, names: dict[int, tuple[str, str]]) -> Iterator[Metric]:
        capacity = _gauge(
            "quota_queue_capacity_instances",
            "Instances of the type the queue holds.",
            ("queue", "instance_type"),
        )
        free = _gauge(
            "quota_queue_free_instances",
            "Instances of the type no job of the queue holds now.",
            ("queue", "instance_type"),
        )
        gauges = {
            "limit": _gauge("quota_share_limit_instances", "The share's capacity limit."),
            "borrow_limit": _gauge(
                "quota_share_borrow_limit_instances",
                "The most the share may borrow beyond its limit: +Inf when its borrow limit "
                "is unlimited, 0 when it cannot borrow.",
            ),
            "borrow_unlimited": _gauge(
                "quota_share_borrow_unlimited", "1 when the share's borrow limit is unlimited."
            ),
            "within": _gauge(
                "quota_share_in_use_within_limit_instances",
                "Instances its running (and stopping) jobs hold within its limit.",
            ),
            "borrowed": _gauge(
                "quota_share_borrowed_instances",
                "Instances its jobs hold beyond its limit, borrowed from lenders.",
            ),
            "lent": _gauge(
                "quota_share_lent_out_instances",
                "Instances of its idle limit that borrowers hold now (the lenders' pool "
                "shared out in proportion to their idle limits).",
            ),
            "lendable": _gauge(
                "quota_share_lendable_instances",
                "Instances of its idle limit a borrower could take now.",
            ),
            "waiting": _gauge("quota_share_waiting_jobs", "Jobs of the share waiting to start."),
        }
        used = running_usage(queues)
        waiting = _waiting()
        for queue in queues:
            usage = queue_usage(queue, used=used[queue.pk])
            for type_name in sorted(usage.capacity):
                capacity.add_metric([queue.name, type_name], usage.capacity[type_name])
                free.add_metric([queue.name, type_name], usage.free[type_name])
            for row in usage.shares:
                for bar in row.bars:
                    labels = [queue.name, row.share.name, bar.instance_type]
                    waiting_jobs = waiting.pop((row.share.pk, bar.instance_type), 0)
                    figures = {
                        "limit": bar.limit,
                        "borrow_limit": math.inf if bar.borrow_cap is None else bar.borrow_cap,
                        "borrow_unlimited": int(bar.borrow_cap is None),
                        "within": bar.within,
                        "borrowed": bar.borrowed,
                        "lent": bar.lent,
                        "lendable": bar.lendable,
                        "waiting": waiting_jobs,
                    }
                    for key, value in figures.items():
                        gauges[key].add_metric(labels, value)
        # Jobs waiting for a type their share has no limit of (they wait for ever, or to
        # borrow): still waiting jobs.
        for (share_id, type_name), jobs in sorted(waiting.items()):
            gauges["waiting"].add_metric([*names[share_id], type_name], jobs)
        yield capacity
        yield free
        yield from gauges.values()

    def _preemption_counters(self, names: dict[int, tuple[str, str]]) -> Iterator[Metric]:
        for side, name, documentation in (
            (
                "by",
                "quota_share_preemptions_caused",
                "Jobs preempted to make room for a job of the share.",
            ),
            ("job", "quota_share_preemptions_suffered", "Jobs of the share that were preempted."),
        ):
            counter = CounterMetricFamily(name, documentation, labels=CAUSE_LABELS)
            counts = _preemptions(side)
            for share_id, type_name, cause in sorted(
                counts, key=lambda key: (names[key[0]], key[1:])
            ):
                counter.add_metric(
                    [*names[share_id], type_name, cause], counts[share_id, type_name, cause]
                )
            yield counter

    def _reclaim(self, names: dict[int, tuple[str, str]]) -> Iterator[Metric]:
        hours = settings.METRICS_RECLAIM_WINDOW_HOURS
        now = self.now or timezone.now()
        waits = _reclaim_waits(now - dt.timedelta(hours=hours))
        window = f"the reclaim episodes that ended in the last {hours:g} hours"
        stats = _gauge(
            "quota_share_reclaim_wait_seconds",
            f"Time to reclaim of {window}: how long a job of the share waited, once it "
            "could start only by taking back lent capacity (nearest-rank p50, p90, max).",
            (*SHARE_LABELS, "stat"),
        )
        episodes = _gauge("quota_share_reclaim_episodes", f"The number of {window}.")
        for (share_id, type_name), values in sorted(
            waits.items(), key=lambda item: (names[item[0][0]], item[0][1])
        ):
            labels = [*names[share_id], type_name]
            values.sort()
            for stat, percent in RECLAIM_STATS:
                stats.add_metric([*labels, stat], nearest_rank(values, percent))
            episodes.add_metric(labels, len(values))
        yield stats
        yield episodes


def metrics_exposition(
    *, accept: str = "", now: dt.datetime | None = None, extra: Iterable[Collector] = ()
) -> tuple[bytes, str]:
    """The whole scrape and its content type, in the format the scraper's Accept header
    asks for (Prometheus's text format by default, or OpenMetrics), from a registry of
    its own: no state is kept between scrapes. `extra`: collectors of the layers above
    (the scheduler's background work), after the fleet's."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(now=now))
    for collector in extra:
        registry.register(collector)
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type
