"""Impact previews: what a proposed policy change does now, computed by the engine.

The engine answers on a snapshot of the queue's live jobs; this module only
builds the proposed policy and turns job ids into job names for people.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from engine import assess_policy_change
from fleet.bridge import queue_snapshot, share_spec_from_document
from fleet.models import Job, JobQueue, QuotaShare, WorkloadClass
from governance.policy import contracts
from governance.policy.services import KEEP_CLASS, ShareData, share_data_document


@dataclass(frozen=True)
class ImpactLine:
    kind: str
    text: str
    jobs: tuple[str, ...]


def _lines(impacts) -> list[ImpactLine]:
    ids = {int(job) for impact in impacts for job in impact.jobs if str(job).isdigit()}
    names = dict(Job.objects.filter(pk__in=ids).values_list("pk", "name")) if ids else {}
    return [
        ImpactLine(
            kind=impact.kind,
            text=impact.text,
            jobs=tuple(
                names.get(int(j), str(j)) if str(j).isdigit() else str(j) for j in impact.jobs
            ),
        )
        for impact in impacts
    ]


def share_change_impact(
    *, queue: JobQueue, data: ShareData, share: QuotaShare | None = None
) -> list[ImpactLine]:
    """The preview for saving `data` as `share` (or as a new share) in `queue`."""
    snapshot, now = queue_snapshot(queue)
    proposed = share_spec_from_document(share_data_document(data))
    shares = list(snapshot.shares)
    if share is None:
        shares.append(proposed)
    else:
        # Running jobs name the share as it is now; a rename must not hide them.
        proposed = replace(proposed, name=share.name)
        shares = [proposed if spec.name == share.name else spec for spec in shares]
    lines = _lines(assess_policy_change(snapshot, shares=shares, now=now))
    return lines + _bound_lines(queue=queue, data=data, spec=proposed, share=share)


def _bound_lines(
    *, queue: JobQueue, data: ShareData, spec, share: QuotaShare | None
) -> list[ImpactLine]:
    """What the change does to the lenders' worst-case time to get capacity back (a
    share's strategy, limits, borrow limit or default class all move it)."""
    if data.default_workload_class is KEEP_CLASS:
        default = share.default_workload_class_id if share is not None else None
    elif data.default_workload_class is None:
        default = None
    else:
        default = (
            WorkloadClass.objects.filter(name=data.default_workload_class)
            .values_list("pk", flat=True)
            .first()
        )
    before = contracts.queue_contracts(queue)
    after = contracts.with_share(
        before, spec=spec, limits=data.capacity_limits, default_class=default, new=share is None
    )
    return [
        ImpactLine(kind="reclaim_bound", text=text, jobs=())
        for text in contracts.bound_change_lines(before, after)
    ]


def workload_class_change_impact(*, workload_class: WorkloadClass, data) -> list[ImpactLine]:
    """The class editor's preview: what changing the class's contract does to the
    worst-case reclaim time of the shares whose borrowers may carry it."""
    return [
        ImpactLine(kind="reclaim_bound", text=text, jobs=())
        for text in contracts.class_change_lines(workload_class, data)
    ]


def capacity_change_impact(*, queue: JobQueue, capacity: Mapping[str, int]) -> list[ImpactLine]:
    snapshot, now = queue_snapshot(queue)
    return _lines(assess_policy_change(snapshot, capacity=dict(capacity), now=now))


def policy_impact(
    *, queue: JobQueue, share_docs: list[dict], capacity: Mapping[str, int] | None = None
) -> list[ImpactLine]:
    """The preview for replacing the queue's whole policy at once (a policy file's plan):
    `share_docs` are every share as it will be, by name, in entitlement order."""
    snapshot, now = queue_snapshot(queue)
    shares = [share_spec_from_document(doc) for doc in share_docs]
    return _lines(
        assess_policy_change(
            snapshot, shares=shares, capacity=None if capacity is None else dict(capacity), now=now
        )
    )


def policy_bound_impact(
    *,
    queue: JobQueue,
    share_docs: list[dict] | None = None,
    classes: Mapping[str, Mapping] | None = None,
) -> list[ImpactLine]:
    """What a whole change does to the lenders' worst-case time to get capacity back in
    `queue` (a policy file's plan): its shares replaced by `share_docs` (every share as
    it will be, with its `default_workload_class` by name; None: as they are) and the
    workload classes by `classes` (name -> document of every class there will be; None:
    as they are)."""
    before = contracts.queue_contracts(queue)
    ids = dict(WorkloadClass.objects.values_list("name", "pk"))
    # A class the change creates has no id yet: a negative number stands for it.
    new = sorted(set(classes or {}) - set(ids))
    ids.update({name: -number for number, name in enumerate(new, start=1)})
    after = before
    if classes is not None:
        after = replace(
            after, classes={ids[name]: contracts.contract_of(doc) for name, doc in classes.items()}
        )
    if share_docs is not None:
        after = replace(
            after,
            shares=tuple(share_spec_from_document(doc) for doc in share_docs),
            limits={doc["name"]: tuple(sorted(doc["capacity_limits"])) for doc in share_docs},
            defaults={
                doc["name"]: ids.get(doc.get("default_workload_class")) for doc in share_docs
            },
        )
    return [
        ImpactLine(kind="reclaim_bound", text=text, jobs=())
        for text in contracts.bound_change_lines(before, after)
    ]
