"""The trade-off of workload classes: how long, at worst, a lender waits to get its
capacity back (spec V13, engine.contracts.policy_reclaim_bound), per share and
instance type, for the share editor, the class editor and the impact preview.

"The classes that may borrow" a share's capacity, from the data the product has: for
each other enabled share of the queue whose strategy borrows and whose borrow limit
lets it borrow the type (the engine decides that part), the contracts its jobs would
copy if submitted now (scheduler.services.jobs.contract_fields):
- its default class (jobs whose definition names no class, and jobs submitted without
  a definition, copy it; no default class is the empty contract), and
- the class of the latest revision of every job definition not retired that its queue
  may run (a definition is allowed per queue, so any share of the queue may submit it).
Jobs already submitted keep the contract they copied; this is the policy's figure, not
the live one (engine.contracts.reclaim_bound reads those).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from core.formatting import duration
from engine.contracts import Contract, policy_reclaim_bound
from engine.types import ShareSpec
from fleet.bridge import policy_shares, share_spec
from fleet.models import JobDefinitionRevision, JobQueue, QuotaShare, WorkloadClass

NO_CONTRACT = Contract()


def contract_of(workload_class: WorkloadClass | Mapping) -> Contract:
    """A class (or its document) as the engine's Contract."""

    def get(name):
        if isinstance(workload_class, Mapping):
            return workload_class.get(name)
        return getattr(workload_class, name)

    return Contract(
        min_runtime_reclaim=get("min_runtime_reclaim") or 0,
        min_runtime_preempt=get("min_runtime_preempt") or 0,
        grace=get("grace") or 0,
        checkpoint_on_notice=get("checkpoint_on_notice"),
    )


@dataclass(frozen=True)
class QueueContracts:
    """What a queue's policy says about contracts: its shares (entitlement order), each
    share's default class (by share name; None: none), the classes named by the latest
    revisions of the definitions it runs, and each class's contract (by class id)."""

    shares: tuple[ShareSpec, ...]
    limits: Mapping[str, tuple[str, ...]]
    defaults: Mapping[str, int | None]
    definition_classes: frozenset[int]
    classes: Mapping[int, Contract]

    def borrower_contracts(self) -> dict[str, list[Contract]]:
        """Share name -> the contracts its jobs may carry."""
        shared = [self.classes[pk] for pk in sorted(self.definition_classes) if pk in self.classes]
        result = {}
        for spec in self.shares:
            default = self.defaults.get(spec.name)
            own = self.classes.get(default, NO_CONTRACT) if default is not None else NO_CONTRACT
            result[spec.name] = [own, *shared]
        return result


def _definition_classes(queue: JobQueue) -> frozenset[int]:
    """The classes of the latest revisions of the queue's definitions not retired."""
    latest: dict[int, int | None] = {}
    rows = (
        JobDefinitionRevision.objects.filter(
            definition__queues=queue, definition__retired_at__isnull=True
        )
        .order_by("definition_id", "-revision")
        .values_list("definition_id", "workload_class_id")
    )
    for definition_id, class_id in rows:
        latest.setdefault(definition_id, class_id)
    return frozenset(pk for pk in latest.values() if pk is not None)


def queue_contracts(queue: JobQueue) -> QueueContracts:
    shares = policy_shares(queue)
    return QueueContracts(
        shares=tuple(share_spec(share) for share in shares),
        limits={
            share.name: tuple(sorted(limit.instance_type.name for limit in share.limits.all()))
            for share in shares
        },
        defaults={share.name: share.default_workload_class_id for share in shares},
        definition_classes=_definition_classes(queue),
        classes={wc.pk: contract_of(wc) for wc in WorkloadClass.objects.all()},
    )


@dataclass(frozen=True)
class ReclaimBound:
    """A lender's worst-case wait to get `instance_type` back (seconds)."""

    share: str
    instance_type: str
    seconds: int

    @property
    def words(self) -> str:
        if self.seconds == 0:
            return "at once: nothing that may borrow it has a minimum runtime or a grace"
        return f"within {duration(self.seconds)} ({self.seconds} s) at worst"


def reclaim_bounds(contracts: QueueContracts) -> list[ReclaimBound]:
    """Every share's worst case per instance type it has a limit of, in entitlement
    order then type name."""
    borrowers = contracts.borrower_contracts()
    return [
        ReclaimBound(
            spec.name,
            type_name,
            policy_reclaim_bound(contracts.shares, spec.name, type_name, borrowers),
        )
        for spec in contracts.shares
        for type_name in contracts.limits.get(spec.name, ())
    ]


def share_reclaim_bounds(share: QuotaShare) -> list[ReclaimBound]:
    """The share editor's figure: the share's own bounds, per instance type."""
    return [b for b in reclaim_bounds(queue_contracts(share.queue)) if b.share == share.name]


def bound_change_lines(before: QueueContracts, after: QueueContracts) -> list[str]:
    """What a change does to the bounds, one sentence per share and type that moves."""
    old = {(b.share, b.instance_type): b.seconds for b in reclaim_bounds(before)}
    lines = []
    for bound in reclaim_bounds(after):
        was = old.get((bound.share, bound.instance_type))
        if was is None or was == bound.seconds:
            continue
        lines.append(
            f"{bound.share}'s worst-case time to get its {bound.instance_type} back: "
            f"{duration(was)} ({was} s) → {duration(bound.seconds)} ({bound.seconds} s)"
        )
    return lines


def with_share(
    contracts: QueueContracts,
    *,
    spec: ShareSpec,
    limits: Iterable[str],
    default_class: int | None,
    new: bool,
) -> QueueContracts:
    """`contracts` with one share replaced (named as it is now) or added."""
    shares = list(contracts.shares)
    if new:
        shares.append(spec)
    else:
        shares = [spec if s.name == spec.name else s for s in shares]
    return replace(
        contracts,
        shares=tuple(shares),
        limits={**contracts.limits, spec.name: tuple(sorted(limits))},
        defaults={**contracts.defaults, spec.name: default_class},
    )


def with_class(contracts: QueueContracts, *, pk: int, contract: Contract) -> QueueContracts:
    return replace(contracts, classes={**contracts.classes, pk: contract})


def queues_using(workload_class: WorkloadClass) -> list[JobQueue]:
    """The queues whose shares' jobs may carry the class (by default or definition)."""
    ids = set(workload_class.default_of_shares.values_list("queue_id", flat=True))
    ids |= set(
        workload_class.definition_revisions.filter(definition__retired_at__isnull=True)
        .values_list("definition__queues", flat=True)
        .distinct()
    )
    ids.discard(None)
    return list(JobQueue.objects.filter(pk__in=ids).order_by("name"))


def class_reclaim_bounds(workload_class: WorkloadClass) -> list[tuple[JobQueue, ReclaimBound]]:
    """The class editor's figure: the bounds of every share of the queues that use it."""
    return [
        (queue, bound)
        for queue in queues_using(workload_class)
        for bound in reclaim_bounds(queue_contracts(queue))
    ]


def class_change_lines(workload_class: WorkloadClass, data: Mapping) -> list[str]:
    """The impact preview of changing a class's contract to `data`'s, over its queues."""
    lines = []
    for queue in queues_using(workload_class):
        before = queue_contracts(queue)
        after = with_class(before, pk=workload_class.pk, contract=contract_of(data))
        lines += [f"{queue.name}: {line}" for line in bound_change_lines(before, after)]
    return lines
