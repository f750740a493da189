"""The length bounds of a policy file's text, whatever its format (issue 28, point 1).

A name or description longer than the column or the editor allows is refused at plan
time, at the file's own line and field, before anything is written: the bounds are the
models' (names) and core.bounds' (free text), the ones the forms and the API use, so a
file cannot store what the share editor would refuse. Every format's parser fills the
same specs (governance.policy_code.model), so this one check covers native, AWS Batch,
CloudFormation and Kueue files alike.
"""

from __future__ import annotations

from core.bounds import MAX_TEXT, too_long
from fleet.models import InstanceType, JobQueue, QuotaShare, Team, UrgencyDefinition
from governance.policy_code.model import KEEP, PolicyFile
from governance.policy_code.source import Problems, child


def _limit(model, name: str) -> int:
    return model._meta.get_field(name).max_length


def check_lengths(policy: PolicyFile, problems: Problems) -> None:
    """Add a problem, naming the field, for each text of `policy` over its bound."""

    def check(value, limit: int, path: str) -> None:
        if isinstance(value, str) and (message := too_long(value, limit)):
            problems.add(path, message)

    for index, team in enumerate(policy.teams):
        path = team.path or child("teams", index)
        check(team.name, _limit(Team, "name"), child(path, "name"))
        check(team.description, MAX_TEXT, child(path, "description"))
    for itype in policy.instance_types:
        check(itype.name, _limit(InstanceType, "name"), child(itype.path, "name"))
        check(itype.gpu_model, _limit(InstanceType, "gpu_model"), child(itype.path, "gpu_model"))
    for queue in policy.queues:
        check(queue.name, _limit(JobQueue, "name"), queue.field_path("name"))
        if queue.description is not KEEP:
            check(queue.description, MAX_TEXT, queue.field_path("description"))
        for share in queue.shares:
            check(share.doc.get("name"), _limit(QuotaShare, "name"), share.field_path("name"))
            check(share.doc.get("team"), _limit(Team, "name"), share.field_path("team"))
    for urgency in policy.urgencies or []:
        check(
            urgency.doc.get("name"),
            _limit(UrgencyDefinition, "name"),
            urgency.fields.get("name", urgency.path),
        )
        for key in ("meaning", "examples"):
            check(urgency.doc.get(key), MAX_TEXT, urgency.fields.get(key, urgency.path))
        for index, team in enumerate(urgency.doc.get("invokers") or []):
            check(
                team,
                _limit(Team, "name"),
                child(urgency.fields.get("invokers", urgency.path), index),
            )
    for workload_class in policy.workload_classes or []:
        # Its name is checked by the class editor's own rules (workload_class_validate).
        check(
            workload_class.doc.get("description"),
            MAX_TEXT,
            workload_class.field_path("description"),
        )
