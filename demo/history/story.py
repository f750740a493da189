"""The demo history's policy story: the timed edits, maintenance windows and exception
requests of each replayed month, as scenario actions (they really act on the replay)
and as the PolicyChange and exception records they leave, with their own instants."""

from __future__ import annotations

import datetime as dt

from fleet.models import InstanceType, JobQueue, QuotaShare, UrgencyDefinition
from governance.models import ExceptionEvent, ExceptionRequest, PolicyChange


class PolicyStory:
    """Builds the timed policy story (scenario actions + the records they leave)."""

    def __init__(
        self, *, queue, instance_type, shares, origin, end, rng, admin, lead, owner, urgencies
    ):
        self.queue, self.shares, self.origin, self.end = queue, shares, origin, end
        # The one instance type of the replayed queue, whose limits the story edits.
        self.instance_type = instance_type
        self.rng, self.admin, self.lead, self.owner = rng, admin, lead, owner
        self.urgencies = urgencies
        self.actions: list[dict] = []
        self.changes: list[tuple[dt.datetime, dict]] = []
        self.requests: list[tuple[dict, list[tuple[dt.datetime, str, str]]]] = []
        self.limits = {
            name: {self.instance_type: limit} for name, limit in self._current_limits().items()
        }
        self.borrow = {name: share.borrow_limit for name, share in shares.items()}
        self.capacity = sum(limits[self.instance_type] for limits in self.limits.values())
        self.busy: dict[str, dt.datetime] = {}

    def _current_limits(self) -> dict[str, int]:
        limits = {}
        for name, share in self.shares.items():
            limit = share.limits.filter(instance_type__name=self.instance_type).first()
            limits[name] = limit.max_instances if limit else 1
        return limits

    def seconds(self, at: dt.datetime) -> int:
        return int((at - self.origin).total_seconds())

    def share_doc(self, name: str) -> dict:
        share = self.shares[name]
        doc = {
            "name": name,
            "team": share.team.name,
            "strategy": share.strategy,
            "in_share_preemption": share.in_share_preemption,
            "state": share.state,
            "capacity_limits": dict(self.limits[name]),
        }
        if share.strategy == QuotaShare.Strategy.LEND_AND_BORROW:
            doc["borrow_limit"] = self.borrow[name]
        return doc

    def edit_share(self, at, name, *, cause, reason, actor, request=None, reverts=None, **change):
        before = self.share_doc(name)
        if "capacity_limits" in change:
            self.limits[name] = dict(change["capacity_limits"])
        if "borrow_limit" in change:
            self.borrow[name] = change["borrow_limit"]
        self.actions.append(
            {"at": self.seconds(at), "type": "update_share", "share": name, **change}
        )
        record = {
            "cause": cause,
            "reason": reason,
            "actor": actor,
            "target": PolicyChange.Target.SHARE,
            "share": self.shares[name],
            "object_repr": str(self.shares[name]),
            "before": before,
            "after": self.share_doc(name),
            "request": request,
            "reverts": reverts,
        }
        self.changes.append((at, record))
        return record

    def set_capacity(self, at, capacity, *, cause, reason, reverts=None):
        before = {"capacity": {self.instance_type: self.capacity}}
        self.capacity = capacity
        self.actions.append(
            {
                "at": self.seconds(at),
                "type": "set_capacity",
                "capacity": {self.instance_type: capacity},
            }
        )
        record = {
            "cause": cause,
            "reason": reason,
            "actor": self.admin,
            "target": PolicyChange.Target.QUEUE,
            "share": None,
            "object_repr": str(self.queue),
            "before": before,
            "after": {"capacity": {self.instance_type: capacity}},
            "request": None,
            "reverts": reverts,
        }
        self.changes.append((at, record))
        return record

    def month(self, start: dt.datetime, stop: dt.datetime) -> None:
        rng = self.rng
        span = (stop - start).total_seconds()

        def moment(lo: float, hi: float) -> dt.datetime:
            at = start + dt.timedelta(seconds=int(span * rng.uniform(lo, hi)))
            return at.replace(minute=rng.choice((0, 15, 30, 45)), second=0)

        borrowers = [n for n, s in self.shares.items() if s.strategy == "LEND_AND_BORROW"]
        # Borrow-limit tightening, reverted a week or two later.
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(borrowers)
            if self.borrow[name] != 100:
                continue
            at = moment(0.0, 0.6)
            back = at + dt.timedelta(days=rng.randint(7, 12))
            if back >= self.end:
                # Today's policy is the seed's: no tightening is left in force.
                continue
            edit = self.edit_share(
                at,
                name,
                cause=PolicyChange.Cause.EDIT,
                reason=f"{name} borrowed most of the idle pool; cap borrowing at half its limit.",
                actor=self.admin,
                borrow_limit=50,
            )
            self.edit_share(
                back,
                name,
                cause=PolicyChange.Cause.REVERT,
                reason="Lenders' wait is back to normal; restore the borrow limit.",
                actor=self.admin,
                reverts=edit,
                borrow_limit=100,
            )
        # A maintenance window: a fifth of the fleet out for six hours.
        at = moment(0.2, 0.8)
        full = self.capacity
        down = self.set_capacity(
            at,
            full * 4 // 5,
            cause=PolicyChange.Cause.EDIT,
            reason="Planned maintenance: a fifth of the nodes drained for a driver upgrade.",
        )
        self.set_capacity(
            at + dt.timedelta(hours=6),
            full,
            cause=PolicyChange.Cause.REVERT,
            reason="Maintenance over; nodes back in service.",
            reverts=down,
        )
        # Exception requests: extra capacity for a deadline, some denied, one revoked.
        if not (self.urgencies and self.lead and self.owner):
            return
        for _ in range(rng.randint(4, 7)):
            urgency = rng.choice(self.urgencies)
            name = rng.choice(borrowers)
            filed = moment(0.0, 0.85)
            window_start = filed + dt.timedelta(hours=rng.randint(2, 20))
            hours = rng.randint(6, max(6, min(urgency.max_window_hours, 72)))
            window_end = window_start + dt.timedelta(hours=hours)
            decided = filed + dt.timedelta(minutes=rng.randint(20, 240))
            extra = rng.randint(4, 16)
            outcome = rng.choices(("approved", "denied", "revoked"), weights=(6, 3, 1))[0]
            if window_end >= self.end or self.busy.get(name, filed) > filed:
                outcome = "denied"
            request = {
                "kind": UrgencyDefinition.Kind.TEMPORARY_CAPACITY,
                "share": self.shares[name],
                "urgency": urgency,
                "justification": f"{urgency.name}: {extra} more GPUs for {name} "
                f"({self.shares[name].team.name}) during the window.",
                "window_start": window_start,
                "window_end": window_end,
                "extra": extra,
                "created_at": filed,
            }
            timeline = [(filed, "FILED", ""), (filed, "SUBMITTED", "")]
            if outcome == "denied":
                timeline.append((decided, "DENIED", "Existing capacity covers it; lend first."))
                request["state"] = ExceptionRequest.State.DENIED
            else:
                timeline.append((decided, "APPROVED", "Deadline confirmed."))
                ends = window_end
                if outcome == "revoked":
                    ends = window_start + dt.timedelta(hours=max(1, hours // 3))
                self.busy[name] = ends
                limit = self.limits[name][self.instance_type]
                self.edit_share(
                    window_start,
                    name,
                    cause=PolicyChange.Cause.EXCEPTION,
                    reason=f"Exception: {extra} extra instances ({urgency.name}).",
                    actor=None,
                    request=request,
                    capacity_limits={self.instance_type: limit + extra},
                )
                self.edit_share(
                    ends,
                    name,
                    cause=PolicyChange.Cause.EXCEPTION,
                    reason="Exception ended: extra instances taken back.",
                    actor=None,
                    request=request,
                    capacity_limits={self.instance_type: limit},
                )
                timeline.append((window_start, "ACTIVATED", ""))
                if outcome == "revoked":
                    timeline.append((ends, "REVOKED", "Deadline moved; capacity no longer needed."))
                    request["state"] = ExceptionRequest.State.REVOKED
                else:
                    timeline.append((ends, "EXPIRED", ""))
                    request["state"] = ExceptionRequest.State.EXPIRED
                request["activated_at"] = window_start
                request["ended_at"] = ends
            request["decided_at"] = decided
            self.requests.append((request, timeline))


def story_records_write(story: PolicyStory, queue: JobQueue) -> tuple[int, int]:
    """The policy changes and exception requests of the story, with their own times."""
    requests = []
    for data, _timeline in story.requests:
        requests.append(
            ExceptionRequest(
                kind=data["kind"],
                team=data["share"].team,
                queue=queue,
                share=data["share"],
                instance_type=InstanceType.objects.get(name=story.instance_type),
                extra_instances=data["extra"],
                urgency=data["urgency"],
                justification=data["justification"],
                window_start=data["window_start"],
                window_end=data["window_end"],
                state=data["state"],
                requested_by=story.lead,
                submitted_at=data["created_at"],
                decided_by=story.owner,
                decided_at=data["decided_at"],
                activated_at=data.get("activated_at"),
                ended_at=data.get("ended_at"),
            )
        )
    ExceptionRequest.objects.bulk_create(requests)
    events = []
    for request, (data, timeline) in zip(requests, story.requests, strict=True):
        data["row"] = request
        for at, kind, note in timeline:
            actor = {"FILED": story.lead, "SUBMITTED": story.lead}.get(
                kind, story.owner if kind in ("APPROVED", "DENIED", "REVOKED") else None
            )
            events.append(ExceptionEvent(request=request, at=at, type=kind, actor=actor, note=note))
    ExceptionEvent.objects.bulk_create(events)
    # created_at is auto_now_add: set the real instants after the insert.
    for request, (data, _) in zip(requests, story.requests, strict=True):
        request.created_at = data["created_at"]
    ExceptionRequest.objects.bulk_update(requests, ["created_at"])

    ordered = sorted(story.changes, key=lambda item: item[0])
    changes = []
    for _at, record in ordered:
        change = PolicyChange(
            actor=record["actor"],
            reason=record["reason"],
            cause=record["cause"],
            target=record["target"],
            queue=queue,
            share=record["share"],
            object_repr=record["object_repr"][:200],
            before=record["before"],
            after=record["after"],
            exception_request=record["request"]["row"] if record["request"] else None,
        )
        record["row"] = change
        changes.append(change)
    PolicyChange.objects.bulk_create(changes)
    for (at, record), change in zip(ordered, changes, strict=True):
        change.created_at = at
        if record["reverts"] is not None:
            change.reverts = record["reverts"]["row"]
    PolicyChange.objects.bulk_update(changes, ["created_at", "reverts"])
    return len(changes), len(requests)
