"""Impact previews: what a proposed policy change does now, computed by the engine.

The engine answers on a snapshot of the queue's live jobs; this module only
builds the proposed policy and turns job ids into job names for people.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from engine import assess_policy_change
from fleet.bridge import (
    BORROW_UNLIMITED,
    queue_snapshot,
    share_spec_from_document,
    stored_borrow_limit,
)
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
    *, queue: JobQueue, data: ShareData, share: QuotaShare | None = None, snapshot=None
) -> list[ImpactLine]:
    """The preview for saving `data` as `share` (or as a new share) in `queue`: on the
    queue's live jobs now, or on `snapshot` ((engine Snapshot, instant): the jobs
    expected at a later instant)."""
    snapshot, now = snapshot if snapshot is not None else queue_snapshot(queue)
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


@dataclass(frozen=True)
class FieldImpact:
    """One changed field of a share and its own effect: `change` says the field and
    its values ("Borrow limit: 200% → 50%"), `lines` what that change alone does, on top
    of the fields listed before it (the engine's sentences, the reclaim bounds)."""

    field: str
    change: str
    lines: tuple[ImpactLine, ...]

    @property
    def text(self) -> str:
        return "; ".join(line.text for line in self.lines)

    @property
    def jobs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(job for line in self.lines for job in line.jobs))

    @property
    def kind(self) -> str:
        return self.lines[0].kind if self.lines else "no_effect"


# A share's fields in the editor's order, and how a preview names them.
SHARE_FIELD_LABELS = {
    "name": "Name",
    "team": "Owning team",
    "strategy": "Strategy",
    "borrow_limit": "Borrow limit",
    "capacity_limits": "Capacity limits",
    "in_share_preemption": "In-share preemption",
    "priority_ceiling": "Priority ceiling",
    "default_workload_class": "Default workload class",
    "state": "State",
}


def share_data_of(share: QuotaShare) -> ShareData:
    """The share as stored, as the editor would submit it unchanged."""
    default = share.default_workload_class
    return ShareData(
        name=share.name,
        team=share.team,
        strategy=share.strategy,
        borrow_limit=share.borrow_limit,
        in_share_preemption=share.in_share_preemption,
        state=share.state,
        capacity_limits={
            limit.instance_type.name: limit.max_instances
            for limit in share.limits.select_related("instance_type")
        },
        priority_ceiling=share.priority_ceiling,
        default_workload_class=default.name if default else None,
    )


def _normalised(data: ShareData) -> ShareData:
    """What saving `data` stores: a borrow limit only with a strategy that takes one."""
    return replace(data, borrow_limit=stored_borrow_limit(data.strategy, data.borrow_limit))


def _field_value(data: ShareData, name: str):
    value = getattr(data, name)
    if name == "team":
        return value.name if value is not None else None
    if name == "capacity_limits":
        return dict(sorted(value.items()))
    return value


def _shown(name: str, value) -> str:
    if value is None:
        return {
            "borrow_limit": "none (the strategy does not borrow)",
            "default_workload_class": "none (no contract)",
        }.get(name, "—")
    if isinstance(value, bool):
        return "on" if value else "off"
    if name == "borrow_limit":
        return "unlimited" if value == BORROW_UNLIMITED else f"{value}%"
    if isinstance(value, dict):
        return ", ".join(f"{key} × {count}" for key, count in value.items()) or "none"
    return str(value)


def share_field_impact(*, queue: JobQueue, data: ShareData, share: QuotaShare) -> list[FieldImpact]:
    """The share editor's preview: one entry per field that `data` changes in `share`,
    each with its own effect. Fields are applied one after another in the editor's
    order, so each entry says what its field adds to the ones before it, and together
    they are the whole change."""
    snapshot, now = queue_snapshot(queue)
    base = contracts.queue_contracts(queue)
    step = _normalised(share_data_of(share))
    target = _normalised(data)
    if target.priority_ceiling is None:
        target = replace(target, priority_ceiling=step.priority_ceiling)
    if target.default_workload_class is KEEP_CLASS:
        target = replace(target, default_workload_class=step.default_workload_class)
    fields = []
    for name, label in SHARE_FIELD_LABELS.items():
        old, new = _field_value(step, name), _field_value(target, name)
        if old == new:
            continue
        after = _normalised(replace(step, **{name: getattr(target, name)}))
        lines = _step_lines(queue, snapshot, now, base, share=share, before=step, after=after)
        change = f"{label}: {_shown(name, old)} → {_shown(name, new)}"
        if step.borrow_limit is not None and after.borrow_limit is None:
            dropped = _shown("borrow_limit", step.borrow_limit)
            change += f" (its borrow limit of {dropped} no longer applies)"
        fields.append(FieldImpact(field=name, change=change, lines=tuple(lines)))
        step = after
    return fields


def _step_lines(queue, snapshot, now, base, *, share, before: ShareData, after: ShareData):
    """What going from `before` to `after` (one field apart) does to the queue's jobs and
    to the lenders' worst-case reclaim time."""
    specs = {}
    for key, data in (("before", before), ("after", after)):
        # Running jobs name the share as it is now; a rename must not hide them.
        specs[key] = replace(share_spec_from_document(share_data_document(data)), name=share.name)
    others = [spec for spec in snapshot.shares if spec.name != share.name]
    order = [spec.name for spec in snapshot.shares]

    def shares(spec):
        return sorted([*others, spec], key=lambda s: order.index(s.name) if s.name in order else 0)

    start = replace(snapshot, shares=tuple(shares(specs["before"])))
    lines = [
        line
        for line in _lines(assess_policy_change(start, shares=shares(specs["after"]), now=now))
        if line.kind != "no_effect"
    ]
    bounds = {
        key: contracts.with_share(
            base,
            spec=specs[key],
            limits=data.capacity_limits,
            default_class=_class_pk(data.default_workload_class),
            new=False,
        )
        for key, data in (("before", before), ("after", after))
    }
    lines += [
        ImpactLine(kind="reclaim_bound", text=text, jobs=())
        for text in contracts.bound_change_lines(bounds["before"], bounds["after"])
    ]
    return lines or [
        ImpactLine(
            kind="no_effect", text="no effect on current jobs or on any share's borrowing", jobs=()
        )
    ]


def _class_pk(name) -> int | None:
    if name in (None, KEEP_CLASS):
        return None
    return WorkloadClass.objects.filter(name=name).values_list("pk", flat=True).first()


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
