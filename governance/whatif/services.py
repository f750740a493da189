"""Writes of the what-if comparisons: clone, edit the draft, choose the workload, run,
cancel, save and attach, propose, review, apply.

The draft is a document, never live policy: editing it checks the same rules as the
share editor (the engine's validate_policy on the whole draft, problems mapped to
fields by governance.policy.services), and only `comparison_apply` changes the queue,
through `share_update`, which records the history. Run state changes are conditional
UPDATEs, so a task delivered twice, or a cancel racing the finish, happens once.
"""

from __future__ import annotations

import copy
import datetime as dt
import time
from collections.abc import Mapping

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from core import rules
from core.bounds import check_lengths
from core.celery import task
from core.errors import InvalidInput, WrongState
from engine import ScenarioError
from engine.contracts import contract_problems
from fleet.models import BORROWING_STRATEGIES, InstanceType, JobQueue, QuotaShare, Team
from fleet.selectors import queue_document, share_document
from governance.models import (
    ExceptionRequest,
    KnowledgeArticle,
    PolicyChange,
    WhatIfComparison,
    WhatIfReview,
)
from governance.policy.reviewable import changes_need_review
from governance.policy.services import (
    NON_FIELD,
    ShareData,
    VersionConflict,
    share_data_document,
    share_data_from_document,
    share_update,
    share_validate_in_policy,
)
from governance.policy.workload_classes import MAX_CONTRACT_SECONDS
from governance.whatif import selectors, workloads
from governance.whatif.compare import CONTRACT_FIELDS, compare_policies

Status = WhatIfComparison.Status
Review = WhatIfComparison.Review
PROGRESS_WRITE_SECONDS = 0.5


class WhatIfCancelled(Exception):
    """Raised from the engine's progress callback when an admin cancelled the run."""


# -- reading the policy ----------------------------------------------------------------


def policy_snapshot(*, queue: JobQueue) -> tuple[dict, list[dict]]:
    """The queue's current policy as a document, and per share its id and version."""
    shares = list(queue.shares.select_related("team").prefetch_related("limits__instance_type"))
    policy = {"queue": queue_document(queue), "shares": [share_document(s) for s in shares]}
    refs = [{"id": share.pk, "version": share.version} for share in shares]
    return policy, refs


def gpus_per_instance(*, policy: dict) -> dict[str, int]:
    names = list(policy["queue"]["capacity"])
    return dict(InstanceType.objects.filter(name__in=names).values_list("name", "gpu_count"))


def changed_shares(comparison: WhatIfComparison) -> list[int]:
    """Positions of the shares the draft changes."""
    return [
        index
        for index, (old, new) in enumerate(
            zip(
                comparison.current_policy["shares"],
                comparison.draft_policy["shares"],
                strict=True,
            )
        )
        if old != new
    ]


# -- clone, edit -----------------------------------------------------------------------


@transaction.atomic
def comparison_create(
    *,
    actor,
    queue: JobQueue,
    title: str = "",
    exception_request: ExceptionRequest | None = None,
    now: dt.datetime | None = None,
) -> WhatIfComparison:
    """Clone the queue's current policy into a draft; the workload starts as the jobs
    recorded on the queue in the 30 days up to its last submission (default_period)."""
    rules.require(actor, "whatif.use")
    policy, refs = policy_snapshot(queue=queue)
    if not policy["shares"]:
        raise InvalidInput({"queue": [f"{queue.name} has no shares yet: create one first"]})
    start, end = workloads.default_period(now or timezone.now(), queue=queue)
    workload = workloads.recorded_workload(
        queue=queue, policy=policy, refs=refs, start=start, end=end
    )
    comparison = WhatIfComparison.objects.create(
        queue=queue,
        author=actor,
        title=(title or "").strip()[:200] or f"Draft of {queue.name}",
        current_policy=policy,
        draft_policy=copy.deepcopy(policy),
        share_refs=refs,
        workload_kind=WhatIfComparison.Workload.RECORDED,
        workload_params=workload.params,
        workload_description=workload.description,
        workload_jobs=workload.jobs,
        workload_classes=workload.classes,
        share_mapping=workload.mapping,
    )
    if exception_request is not None:
        comparison.exception_requests.add(exception_request)
    return comparison


# The review rules, stated once: the services enforce them and the page asks them
# (which buttons it offers) through the same functions.


def review_required() -> bool:
    """POLICY_CHANGES_NEED_REVIEW: a draft applies only after another admin approved it."""
    return changes_need_review()


def comparison_edit_refusal(comparison: WhatIfComparison) -> str | None:
    """Why the draft and its workload cannot change now, or None."""
    if comparison.review_state in (Review.PROPOSED, Review.APPROVED, Review.APPLIED):
        state = comparison.get_review_state_display().lower()
        return f"this draft is {state}: start a new comparison to change it"
    if comparison.is_active:
        return "a run is in progress: cancel it or wait for it to end"
    return None


def comparison_propose_refusal(comparison: WhatIfComparison) -> str | None:
    """Why the draft cannot be proposed for review now (its state), or None."""
    if comparison.review_state not in (Review.NONE, Review.REJECTED):
        return f"this draft is already {comparison.get_review_state_display().lower()}"
    return None


def comparison_review_refusal(comparison: WhatIfComparison) -> str | None:
    """Why the draft cannot be reviewed now (its state), or None."""
    if comparison.review_state != Review.PROPOSED:
        return "this draft is not waiting for a review"
    return None


def comparison_apply_refusal(comparison: WhatIfComparison) -> str | None:
    """Why the draft cannot be applied now (its review state), or None."""
    if comparison.review_state == Review.APPLIED:
        return "this draft was already applied"
    if comparison.review_state == Review.PROPOSED:
        return "this draft waits for another admin's review: it applies once approved"
    if review_required() and comparison.review_state != Review.APPROVED:
        return (
            "policy changes need review: propose this draft and wait for another admin's approval"
        )
    return None


def _require_editable(comparison: WhatIfComparison) -> None:
    why = comparison_edit_refusal(comparison)
    if why:
        raise WrongState(why, field=NON_FIELD)


def draft_share_validate(
    *, comparison: WhatIfComparison, index: int, data: ShareData
) -> dict[str, list[str]]:
    """Every problem with `data` as share `index` of the draft: the share editor's rules,
    checked on the draft instead of the live queue."""
    return share_validate_in_policy(
        queue_doc=comparison.draft_policy["queue"],
        share_docs=comparison.draft_policy["shares"],
        index=index,
        data=data,
    )


def _reset_results(comparison: WhatIfComparison) -> None:
    comparison.status = Status.DRAFT
    comparison.results = None
    comparison.progress = 0
    comparison.progress_label = ""
    comparison.error = ""
    if comparison.review_state == Review.REJECTED:
        comparison.review_state = Review.NONE


@transaction.atomic
def draft_share_update(
    *, actor, comparison: WhatIfComparison, index: int, data: ShareData
) -> WhatIfComparison:
    """Change share `index` of the draft. The live share is not touched."""
    rules.require(actor, "whatif.use")
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    _require_editable(comparison)
    errors = draft_share_validate(comparison=comparison, index=index, data=data)
    if errors:
        raise InvalidInput(errors)
    document = share_data_document(data)
    draft = copy.deepcopy(comparison.draft_policy)
    if draft["shares"][index] == document:
        return comparison
    draft["shares"][index] = document
    comparison.draft_policy = draft
    _reset_results(comparison)
    comparison.save()
    return comparison


# Fields of a draft share an edit may name; an edit leaves the others as they are.
DRAFT_EDIT_FIELDS = ("strategy", "borrow_limit", "in_share_preemption", "state", "capacity_limits")


@transaction.atomic
def draft_share_edit(*, actor, comparison: WhatIfComparison, edit: Mapping) -> int:
    """Change the draft share named `edit["name"]` by the fields the edit gives (a
    partial edit, as the API sends it): `new_name` renames it, `team` names its team,
    and a strategy that takes no borrow limit drops the borrow limit unless the edit
    sets one. Returns the share's index in the draft; raises InvalidInput keyed by the
    share's path in the draft document (`shares[1].borrow_limit`)."""
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    names = [share["name"] for share in comparison.draft_policy["shares"]]
    if edit["name"] not in names:
        raise InvalidInput({"shares": [f"no share named '{edit['name']}' in {comparison.queue}"]})
    index = names.index(edit["name"])
    document = dict(comparison.draft_policy["shares"][index])
    document.update({key: edit[key] for key in DRAFT_EDIT_FIELDS if key in edit})
    takes_borrow_limit = edit.get("strategy") in (None, *BORROWING_STRATEGIES)
    if not takes_borrow_limit and "borrow_limit" not in edit:
        document.pop("borrow_limit", None)
    if "new_name" in edit:
        document["name"] = edit["new_name"]
    team = Team.objects.filter(name=edit.get("team", document.get("team"))).first()
    data = share_data_from_document(document, team=team)
    try:
        draft_share_update(actor=actor, comparison=comparison, index=index, data=data)
    except InvalidInput as error:
        raise InvalidInput(
            {f"shares[{index}].{key}": messages for key, messages in error.errors.items()}
        ) from None
    return index


@transaction.atomic
def draft_reset(*, actor, comparison: WhatIfComparison) -> WhatIfComparison:
    """Take the draft back to the policy as cloned."""
    rules.require(actor, "whatif.use")
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    _require_editable(comparison)
    comparison.draft_policy = copy.deepcopy(comparison.current_policy)
    _reset_results(comparison)
    comparison.save()
    return comparison


# -- workload --------------------------------------------------------------------------


def comparison_choose_workload(
    *,
    actor,
    comparison: WhatIfComparison,
    kind: str,
    start_day: dt.date | None = None,
    days: float = workloads.DEFAULT_DAYS,
    scale: float = 1.0,
    upload: bytes | None = None,
    filename: str = "upload.csv",
    mapping: Mapping | None = None,
) -> WhatIfComparison:
    """comparison_set_workload from a page's or the API's choice: a recorded workload's
    period starts at `start_day`'s midnight (UTC) and lasts `days`; a Philly window
    starts on `start_day`."""
    start, end = start_day, None
    if kind == WhatIfComparison.Workload.RECORDED and start_day is not None:
        start = dt.datetime.combine(start_day, dt.time(), tzinfo=dt.UTC)
        end = start + dt.timedelta(days=days)
    return comparison_set_workload(
        actor=actor,
        comparison=comparison,
        kind=kind,
        start=start,
        end=end,
        days=days,
        scale=scale,
        upload=upload,
        filename=filename,
        mapping=mapping,
    )


@transaction.atomic
def comparison_set_workload(
    *,
    actor,
    comparison: WhatIfComparison,
    kind: str,
    start: dt.datetime | dt.date | None = None,
    end: dt.datetime | None = None,
    days: float = workloads.DEFAULT_DAYS,
    scale: float = 1.0,
    upload: bytes | None = None,
    filename: str = "upload.csv",
    mapping: Mapping | None = None,
) -> WhatIfComparison:
    """Choose the workload, its teams mapped to shares by `mapping` ({team: share name,
    "" to leave its jobs out}) over the defaults (workloads.build_mapping). Raises
    workloads.WorkloadError, storing nothing, when it cannot be built (an upload with
    bad rows, an empty window), InvalidInput keyed `mapping.<team>` for a bad mapping."""
    rules.require(actor, "whatif.use")
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    _require_editable(comparison)
    workload = _build_workload(
        comparison,
        kind=kind,
        start=start,
        end=end,
        days=days,
        scale=scale,
        upload=upload,
        filename=filename,
        mapping=mapping,
    )
    _store_workload(comparison, kind, workload)
    return comparison


def _store_workload(comparison: WhatIfComparison, kind: str, workload) -> None:
    comparison.workload_kind = kind
    comparison.workload_params = workload.params
    comparison.workload_description = workload.description
    comparison.workload_jobs = workload.jobs
    comparison.workload_classes = workload.classes
    comparison.share_mapping = workload.mapping
    _reset_results(comparison)
    comparison.save()


def _build_workload(
    comparison: WhatIfComparison,
    *,
    kind: str,
    start=None,
    end=None,
    days: float = workloads.DEFAULT_DAYS,
    scale: float = 1.0,
    upload: bytes | None = None,
    rows=None,
    filename: str = "upload.csv",
    mapping: Mapping | None = None,
):
    policy = comparison.current_policy
    gpus = gpus_per_instance(policy=policy)
    Kind = WhatIfComparison.Workload
    if kind == Kind.RECORDED:
        default_start, default_end = workloads.default_period(
            timezone.now(), queue=comparison.queue
        )
        workload = workloads.recorded_workload(
            queue=comparison.queue,
            policy=policy,
            refs=comparison.share_refs,
            start=start or default_start,
            end=end or default_end,
            mapping=mapping,
        )
    elif kind == Kind.PHILLY:
        workload = workloads.philly_workload(
            policy=policy,
            gpus_per_instance=gpus,
            start=start or workloads.PHILLY_DEFAULT_START,
            days=days,
            scale=scale,
            share_classes=share_default_classes(comparison),
            mapping=mapping,
        )
    elif kind == Kind.UPLOAD:
        if not upload and rows is None:
            raise workloads.WorkloadError(["choose a CSV file to upload"])
        workload = workloads.upload_workload(
            raw=upload,
            rows=rows,
            filename=filename,
            policy=policy,
            gpus_per_instance=gpus,
            scale=scale,
            share_classes=share_default_classes(comparison),
            mapping=mapping,
        )
    else:
        raise workloads.WorkloadError([f"unknown workload kind {kind!r}"])
    return workload


@transaction.atomic
def comparison_set_mapping(
    *, actor, comparison: WhatIfComparison, mapping: Mapping
) -> WhatIfComparison:
    """Send each team's jobs to the share `mapping` names ({team: share name of the
    cloned policy, "" or None to leave them out}; teams it does not name keep their
    share): the same workload is built again from its source (the trace window, the
    recorded period, the upload's kept rows) and earlier results are dropped. Raises
    InvalidInput keyed `mapping.<team>` (an unknown team or share), storing nothing."""
    rules.require(actor, "whatif.use")
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    _require_editable(comparison)
    stored = comparison.share_mapping or {}
    if not stored.get("teams"):
        raise InvalidInput({"mapping": ["choose a workload first: this one has no teams"]})
    teams = workloads.mapped_shares(stored)
    chosen = {entry["team"]: entry["share"] for entry in stored["teams"] if entry["chosen"]}
    # Check the new choices by themselves first, so an error names the team sent.
    names = [share["name"] for share in comparison.current_policy["shares"]]
    chosen.update(workloads.mapping_check(mapping, teams=teams, share_names=names))
    chosen = {team: share or "" for team, share in chosen.items()}
    params = comparison.workload_params or {}
    Kind = WhatIfComparison.Workload
    kind = comparison.workload_kind
    if kind == Kind.RECORDED:
        arguments = {
            "start": dt.datetime.fromisoformat(params["start"]),
            "end": dt.datetime.fromisoformat(params["end"]),
        }
    elif kind == Kind.PHILLY:
        arguments = {
            "start": dt.date.fromisoformat(params["start"]),
            "days": params["days"],
            "scale": params["scale"],
        }
    else:
        arguments = {
            "rows": workloads.rows_of(stored.get("rows", [])),
            "filename": params.get("filename", "upload.csv"),
            "scale": params.get("scale", 1.0),
        }
    workload = _build_workload(comparison, kind=kind, mapping=chosen, **arguments)
    _store_workload(comparison, kind, workload)
    return comparison


# -- run, cancel, execute --------------------------------------------------------------


CONTRACT_RUNS = ("current", "draft")
# The what-if's help text says this; compare.with_contracts applies it.
PRECEDENCE = (
    "A job of a class and of a share that both have an override gets the class's "
    "fields, then the share's over them: where both set a field, the share's value wins."
)


def share_default_classes(comparison: WhatIfComparison) -> dict[str, str]:
    """Share name (as cloned) -> the name of the live share's default workload class,
    for the shares that have one: the class of a trace job (workloads.py)."""
    names = {
        ref["id"]: share["name"]
        for ref, share in zip(
            comparison.share_refs, comparison.current_policy["shares"], strict=True
        )
    }
    rows = QuotaShare.objects.filter(
        pk__in=names, default_workload_class__isnull=False
    ).values_list("pk", "default_workload_class__name")
    return {names[pk]: name for pk, name in rows}


def contracts_clean(
    *,
    comparison: WhatIfComparison,
    contracts: Mapping,
    class_contracts: Mapping | None = None,
) -> tuple[dict, dict]:
    """`contracts` ({run: {share name: {field: value}}}) and `class_contracts` ({run:
    {workload class name: {field: value}}}) checked against spec v2's V1 (whole seconds,
    at most MAX_CONTRACT_SECONDS, the bound of the class editor), the comparison's
    shares and the known classes (selectors.workload_class_names); problems keyed by
    `contracts.<run>.<share>.<field>` and `class_contracts.<run>.<class>.<field>`.
    Blank values (None, "") are dropped: no override. Empty results replay as
    recorded."""
    errors: dict[str, list[str]] = {}
    shares = {share["name"] for share in comparison.current_policy["shares"]}
    cleaned = _overrides_clean(
        "contracts",
        contracts,
        errors,
        known=shares,
        unknown=lambda name: f"no share named {name!r} in this comparison",
        what="share",
    )
    classes = selectors.workload_class_names(comparison)
    cleaned_classes = _overrides_clean(
        "class_contracts",
        class_contracts or {},
        errors,
        known=set(classes),
        unknown=lambda name: (
            f"no workload class named {name!r} (classes: {', '.join(classes) or 'none yet'})"
        ),
        what="workload class",
    )
    if errors:
        raise InvalidInput(errors)
    return cleaned, cleaned_classes


def _overrides_clean(prefix, overrides, errors, *, known, unknown, what) -> dict:
    """The overrides of one kind (`what`: by share or by class) of contracts_clean."""
    if not isinstance(overrides, Mapping):
        errors[prefix] = [f"give {{run: {{{what}: {{field: seconds}}}}}}"]
        return {}
    cleaned: dict[str, dict] = {}
    for run, by_name in overrides.items():
        if run not in CONTRACT_RUNS:
            errors[f"{prefix}.{run}"] = ["the runs are 'current' and 'draft'"]
            continue
        if not isinstance(by_name, Mapping):
            errors[f"{prefix}.{run}"] = [f"give {{{what}: {{field: seconds}}}}"]
            continue
        for name, contract in by_name.items():
            key = f"{prefix}.{run}.{name}"
            if name not in known:
                errors[key] = [unknown(name)]
                continue
            if not isinstance(contract, Mapping):
                errors[key] = ["give {field: seconds}"]
                continue
            fields = _contract_fields(key, contract, errors)
            if fields:
                cleaned.setdefault(run, {})[name] = fields
    return cleaned


def _contract_fields(key: str, contract: Mapping, errors: dict) -> dict:
    """The fields an override sets (a blank one sets none), its problems in `errors` at
    `key`.<field>: the one range check of a contract (engine.contracts), a week at most."""
    given = {name: None if value == "" else value for name, value in contract.items()}
    for name, problem in contract_problems(given, maximum=MAX_CONTRACT_SECONDS).items():
        suffix = " (a week)" if name in CONTRACT_FIELDS else ""
        errors[f"{key}.{name}"] = [problem + suffix]
    return {
        name: value
        for name, value in given.items()
        if value is not None and name in CONTRACT_FIELDS and f"{key}.{name}" not in errors
    }


@transaction.atomic
def comparison_set_contracts(
    *,
    actor,
    comparison: WhatIfComparison,
    contracts: Mapping,
    class_contracts: Mapping | None = None,
) -> WhatIfComparison:
    """Replay both runs under these interruption contracts (contracts_clean), per share
    and per workload class (None leaves the class overrides as they are): e.g. the
    current policy with grace 0 against the draft with grace 120 s on the borrowers, or
    on the class `batch`. Earlier results are dropped: they were measured under other
    contracts."""
    rules.require(actor, "whatif.use")
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    _require_editable(comparison)
    if class_contracts is None:
        class_contracts = comparison.class_contracts or {}
    cleaned, cleaned_classes = contracts_clean(
        comparison=comparison, contracts=contracts, class_contracts=class_contracts
    )
    if (cleaned, cleaned_classes) == (comparison.contracts, comparison.class_contracts):
        return comparison
    comparison.contracts = cleaned
    comparison.class_contracts = cleaned_classes
    _reset_results(comparison)
    comparison.save()
    return comparison


def _with_one(overrides: Mapping | None, run: str, name: str, contract: Mapping) -> dict:
    """`overrides` ({run: {name: contract}}) with `name`'s contract in `run` set, or
    removed when `contract` is empty."""
    overrides = copy.deepcopy(dict(overrides or {}))
    by_name = overrides.setdefault(run, {})
    if contract:
        by_name[name] = dict(contract)
    else:
        by_name.pop(name, None)
    return {key: value for key, value in overrides.items() if value}


def comparison_set_share_contract(
    *, actor, comparison: WhatIfComparison, run: str, share: str, contract: Mapping
) -> WhatIfComparison:
    """Set (or, with no field, remove) one share's contract in one run, keeping the
    others (comparison_set_contracts checks the whole)."""
    return comparison_set_contracts(
        actor=actor,
        comparison=comparison,
        contracts=_with_one(comparison.contracts, run, share, contract),
    )


def comparison_set_class_contract(
    *, actor, comparison: WhatIfComparison, run: str, workload_class: str, contract: Mapping
) -> WhatIfComparison:
    """Set (or, with no field, remove) one workload class's contract in one run, keeping
    the others; the replayed jobs of that class get it (PRECEDENCE)."""
    return comparison_set_contracts(
        actor=actor,
        comparison=comparison,
        contracts=comparison.contracts or {},
        class_contracts=_with_one(comparison.class_contracts, run, workload_class, contract),
    )


def comparison_run(*, actor, comparison: WhatIfComparison) -> WhatIfComparison:
    """Queue a run of both policies (the task is enqueued after commit)."""
    rules.require(actor, "whatif.use")
    if not comparison.workload_jobs:
        left = workloads.left_out(comparison.share_mapping or {})
        if left:
            raise InvalidInput(
                {
                    "mapping": [
                        "no job of this workload goes to a share: name a share for "
                        + ", ".join(team for team, _jobs in left[:5])
                        + (f" and {len(left) - 5} more teams" if len(left) > 5 else "")
                    ]
                }
            )
        raise InvalidInput({"workload": ["the workload has no jobs: choose another period"]})
    with transaction.atomic():
        claimed = (
            WhatIfComparison.objects.filter(pk=comparison.pk)
            .exclude(status__in=WhatIfComparison.ACTIVE)
            .update(
                status=Status.QUEUED,
                progress=0,
                progress_label="Waiting for a worker",
                cancel_requested=False,
                error="",
                results=None,
                started_at=None,
                finished_at=None,
                updated_at=timezone.now(),
            )
        )
        if claimed:
            transaction.on_commit(lambda: task("governance.whatif.run").delay(comparison.pk))
    comparison.refresh_from_db()
    return comparison


def comparison_cancel(*, actor, comparison: WhatIfComparison) -> WhatIfComparison:
    """A queued run ends at once; a running one at its next progress report."""
    rules.require(actor, "whatif.use")
    now = timezone.now()
    WhatIfComparison.objects.filter(pk=comparison.pk, status=Status.QUEUED).update(
        status=Status.CANCELLED, progress_label="Cancelled", finished_at=now, updated_at=now
    )
    WhatIfComparison.objects.filter(pk=comparison.pk, status=Status.RUNNING).update(
        cancel_requested=True, progress_label="Cancelling…", updated_at=now
    )
    comparison.refresh_from_db()
    return comparison


class _ProgressWriter:
    """The engine's progress callback: stops the run when cancelled, and writes the
    progress to the row at most every PROGRESS_WRITE_SECONDS (and at phase ends)."""

    def __init__(self, pk: int):
        self.pk = pk
        self.written = 0.0

    def __call__(self, fraction: float, label: str) -> None:
        rows = WhatIfComparison.objects.filter(pk=self.pk, status=Status.RUNNING)
        if rows.filter(cancel_requested=True).exists():
            raise WhatIfCancelled
        clock = time.monotonic()
        if clock - self.written >= PROGRESS_WRITE_SECONDS or fraction in (0.0, 0.5, 1.0):
            self.written = clock
            rows.update(progress=min(100, int(fraction * 100)), progress_label=label[:200])


def comparison_execute(*, comparison_id: int) -> str:
    """Run a queued comparison (the Celery task's body). Returns the final status; a
    comparison that is not queued (already run, cancelled, claimed) is left alone."""
    now = timezone.now()
    claimed = WhatIfComparison.objects.filter(pk=comparison_id, status=Status.QUEUED).update(
        status=Status.RUNNING, started_at=now, progress=0, progress_label="Starting", updated_at=now
    )
    if not claimed:
        status = (
            WhatIfComparison.objects.filter(pk=comparison_id)
            .values_list("status", flat=True)
            .first()
        )
        return status or "missing"
    comparison = WhatIfComparison.objects.get(pk=comparison_id)
    rows = WhatIfComparison.objects.filter(pk=comparison_id, status=Status.RUNNING)
    try:
        results = compare_policies(
            current=comparison.current_policy,
            draft=comparison.draft_policy,
            jobs=comparison.workload_jobs,
            gpus_per_instance=gpus_per_instance(policy=comparison.current_policy),
            progress=_ProgressWriter(comparison_id),
            contracts=comparison.contracts or None,
            class_contracts=comparison.class_contracts or None,
            job_classes=comparison.workload_classes or {},
        )
    except WhatIfCancelled:
        rows.update(
            status=Status.CANCELLED,
            progress_label="Cancelled",
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
        return Status.CANCELLED
    except ScenarioError as error:
        rows.update(
            status=Status.FAILED,
            error=f"The workload does not fit this policy: {error}",
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
        return Status.FAILED
    left = workloads.left_out(comparison.share_mapping or {})
    results["left_out"] = {
        "teams": [{"team": team, "jobs": jobs} for team, jobs in left],
        "jobs": sum(jobs for _team, jobs in left),
    }
    rows.update(
        status=Status.DONE,
        results=results,
        progress=100,
        progress_label="Done",
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    )
    return Status.DONE


# -- save, attach, review, apply -------------------------------------------------------


@transaction.atomic
def comparison_save(
    *,
    actor,
    comparison: WhatIfComparison,
    title: str,
    note: str,
    articles: list[KnowledgeArticle] | None = None,
    exception_requests: list[ExceptionRequest] | None = None,
) -> WhatIfComparison:
    """Keep the comparison as evidence, with a note, attached to articles or requests."""
    rules.require(actor, "whatif.use")
    title = (title or "").strip()
    if not title:
        raise InvalidInput({"title": ["give the comparison a title"]})
    check_lengths({"note": (note or "").strip()}, ["note"])
    comparison.title = title[:200]
    comparison.note = (note or "").strip()
    comparison.saved = True
    comparison.save(update_fields=["title", "note", "saved", "updated_at"])
    if articles:
        comparison.articles.add(*articles)
    if exception_requests:
        comparison.exception_requests.add(*exception_requests)
    return comparison


def _require_evidence(comparison: WhatIfComparison) -> None:
    if not changed_shares(comparison):
        raise InvalidInput({NON_FIELD: ["the draft is the same as the current policy"]})
    if comparison.status != Status.DONE:
        raise InvalidInput(
            {NON_FIELD: ["run the comparison first: reviewers and history need its results"]}
        )


@transaction.atomic
def comparison_propose(*, actor, comparison: WhatIfComparison, note: str = "") -> WhatIfComparison:
    rules.require(actor, "whatif.use")
    check_lengths({"note": note}, ["note"])
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    why = comparison_propose_refusal(comparison)
    if why:
        raise WrongState(why, field=NON_FIELD)
    _require_evidence(comparison)
    comparison.review_state = Review.PROPOSED
    comparison.reviewer = None
    comparison.reviewed_at = None
    comparison.save(update_fields=["review_state", "reviewer", "reviewed_at", "updated_at"])
    WhatIfReview.objects.create(
        comparison=comparison, action=WhatIfReview.Action.PROPOSED, actor=actor, note=note
    )
    return comparison


@transaction.atomic
def comparison_review(
    *, actor, comparison: WhatIfComparison, approve: bool, note: str = ""
) -> WhatIfComparison:
    """Another admin (never the author) approves the draft or sends it back."""
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    rules.require(actor, "whatif.review", comparison)
    why = comparison_review_refusal(comparison)
    if why:
        raise WrongState(why, field=NON_FIELD)
    if not approve and not (note or "").strip():
        raise InvalidInput({"note": ["say what should change before it can be approved"]})
    check_lengths({"note": (note or "").strip()}, ["note"])
    comparison.review_state = Review.APPROVED if approve else Review.REJECTED
    comparison.reviewer = actor
    comparison.reviewed_at = timezone.now()
    comparison.save(update_fields=["review_state", "reviewer", "reviewed_at", "updated_at"])
    WhatIfReview.objects.create(
        comparison=comparison,
        action=WhatIfReview.Action.APPROVED if approve else WhatIfReview.Action.REJECTED,
        actor=actor,
        note=(note or "").strip(),
    )
    return comparison


def comparison_url(comparison: WhatIfComparison) -> str:
    return reverse("whatif-detail", args=[comparison.pk])


@transaction.atomic
def comparison_apply(*, actor, comparison: WhatIfComparison, reason: str) -> list[PolicyChange]:
    """Apply the draft through share_update: one history entry per changed share, each
    with the reason and a link to this comparison. All or nothing."""
    rules.require(actor, "whatif.use")
    comparison = WhatIfComparison.objects.select_for_update().get(pk=comparison.pk)
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput({"reason": ["say why this change is made"]})
    check_lengths({"reason": reason}, ["reason"])
    why = comparison_apply_refusal(comparison)
    if why:
        raise WrongState(why, field=NON_FIELD)
    _require_evidence(comparison)
    linked = f"{reason} (what-if comparison #{comparison.pk}: {comparison_url(comparison)})"
    changes: list[PolicyChange] = []
    for index in changed_shares(comparison):
        ref = comparison.share_refs[index]
        share = QuotaShare.objects.select_related("team", "queue").filter(pk=ref["id"]).first()
        if share is None:
            raise InvalidInput(
                {
                    NON_FIELD: [
                        f"share {comparison.current_policy['shares'][index]['name']} no "
                        "longer exists: start a new comparison"
                    ]
                }
            )
        try:
            write = share_update(
                actor=actor,
                share=share,
                data=share_data_from_document(comparison.draft_policy["shares"][index]),
                reason=linked,
                expected_version=ref["version"],
                approved=comparison if comparison.review_state == Review.APPROVED else None,
            )
        except VersionConflict as conflict:
            raise InvalidInput(
                {
                    NON_FIELD: [
                        f"{share.name} was changed by someone else since this draft was "
                        f"cloned (now version {conflict.current_version}): start a new "
                        "comparison from the current policy"
                    ]
                }
            ) from conflict
        if write.entry is not None:
            changes.append(write.entry)
    comparison.applied_changes.add(*changes)
    comparison.review_state = Review.APPLIED
    comparison.applied_by = actor
    comparison.applied_at = timezone.now()
    comparison.save(update_fields=["review_state", "applied_by", "applied_at", "updated_at"])
    WhatIfReview.objects.create(
        comparison=comparison, action=WhatIfReview.Action.APPLIED, actor=actor, note=reason
    )
    return changes
