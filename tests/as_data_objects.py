"""The six objects "View as JSON / YAML" is shown on (a queue's share qs1, a job, a job
definition, an exception request and a knowledge article of team qs1), built through the
services, for the page tests and the browser journey of governance.as_data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from governance.exceptions import services as exception_services
from governance.knowledge.services import ArticleData, article_create
from governance.models import ExceptionOwner, ExceptionRequest
from scheduler.services.job_definitions import DefinitionData, definition_register
from tests.factories import JobFactory, UrgencyDefinitionFactory


@dataclass(frozen=True)
class AsDataObjects:
    share: object
    job: object
    definition: object
    request: object
    article: object


def as_data_objects(
    queue,
    *,
    admin,
    lead_a,
    lead_b,
    owner,
    name: str,
    justification: str,
    environment: dict[str, str],
    article_body: str,
) -> AsDataObjects:
    """lead_a leads qs1's team and files its request; lead_b leads qs2's; owner may decide
    the queue's requests. `name` prefixes the urgency, definition and job names."""
    qs1, qs2 = queue.shares.get(name="qs1"), queue.shares.get(name="qs2")
    qs1.team.leads.add(lead_a)
    qs2.team.leads.add(lead_b)
    ExceptionOwner.objects.create(user=owner, queue=queue)
    itype = queue.capacities.get().instance_type
    now = timezone.now()
    request = exception_services.exception_request_create(
        actor=lead_a,
        data=exception_services.RequestData(
            kind=ExceptionRequest.Kind.TEMPORARY_CAPACITY,
            team=qs1.team,
            urgency=UrgencyDefinitionFactory(name=f"{name}-deadline"),
            justification=justification,
            window_start=now + timedelta(hours=1),
            window_end=now + timedelta(hours=4),
            share=qs1,
            instance_type=itype,
            extra_instances=1,
        ),
        submit=True,
    )
    definition = definition_register(
        actor=admin,
        name=f"{name}-definition",
        data=DefinitionData(
            queues=[queue],
            command=["python", "-m", "train", "--steps", "{steps}"],
            parameters=[{"name": "steps", "type": "integer", "min": 1, "max": 100}],
            environment=environment,
        ),
        reason="for the data view",
    )
    job = JobFactory(share=qs1, instance_type=itype, name=f"{name}-job")
    article = article_create(
        actor=lead_a, data=ArticleData(title="Why qs1 borrows", body=article_body)
    )
    return AsDataObjects(
        share=qs1, job=job, definition=definition, request=request, article=article
    )
