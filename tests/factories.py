"""factory_boy factories for the domain. Shares get one limit by default; a job
definition (`job_definition`) is registered with its first revision."""

import factory
from django.contrib.auth.models import Group, User
from django.utils import timezone

from fleet.models import (
    CapacityLimit,
    InstanceType,
    Job,
    JobDefinition,
    JobDefinitionRevision,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")

    @factory.post_generation
    def password(self, create, extracted, **kwargs):
        self.set_password(extracted or "pw-for-tests-1")
        if create:
            self.save(update_fields=["password"])

    @factory.post_generation
    def roles(self, create, extracted, **kwargs):
        for name in extracted or ():
            self.groups.add(Group.objects.get_or_create(name=name)[0])


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"team-{n}")


class InstanceTypeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = InstanceType
        django_get_or_create = ("name",)

    name = "ml.g5.xlarge"
    gpu_count = 1
    gpu_model = "NVIDIA A10G"


class JobQueueFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobQueue
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"queue-{n}")


class QueueCapacityFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QueueCapacity

    queue = factory.SubFactory(JobQueueFactory)
    instance_type = factory.SubFactory(InstanceTypeFactory)
    instances = 3


class QuotaShareFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaShare

    queue = factory.SubFactory(JobQueueFactory)
    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"share-{n}")
    strategy = QuotaShare.Strategy.LEND
    position = factory.Sequence(lambda n: n)


class CapacityLimitFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CapacityLimit

    share = factory.SubFactory(QuotaShareFactory)
    instance_type = factory.SubFactory(InstanceTypeFactory)
    max_instances = 1


class UrgencyDefinitionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = UrgencyDefinition
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"urgency-{n}")
    meaning = "A deadline that cannot move."
    priority = 500
    max_window_hours = 48
    allowed_kinds = factory.LazyFunction(lambda: list(UrgencyDefinition.Kind.values))


class JobDefinitionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobDefinition
        django_get_or_create = ("name",)
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"definition-{n}")
    created_at = factory.LazyFunction(timezone.now)

    @factory.post_generation
    def queues(self, create, extracted, **kwargs):
        if extracted:
            self.queues.add(*extracted)


class JobDefinitionRevisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobDefinitionRevision
        django_get_or_create = ("definition", "revision")

    definition = factory.SubFactory(JobDefinitionFactory)
    revision = 1
    queue_names = factory.LazyAttribute(
        lambda revision: sorted(queue.name for queue in revision.definition.queues.all())
    )
    command = factory.LazyFunction(list)
    parameters = factory.LazyFunction(list)
    environment = factory.LazyFunction(dict)
    expected_duration = 3600
    reason = "Registered for a test"
    created_at = factory.LazyFunction(timezone.now)


def job_definition(*queues: JobQueue, name: str = "sample-work", **fields) -> JobDefinitionRevision:
    """Revision 1 of a definition the queues may run (registered once per name).

    Without `command` it models work only, as on a simulated queue.
    """
    definition = JobDefinitionFactory(name=name, queues=queues)
    revision = JobDefinitionRevisionFactory(definition=definition, **fields)
    revision.definition = definition
    return revision


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    share = factory.SubFactory(QuotaShareFactory)
    queue = factory.LazyAttribute(lambda job: job.share.queue)
    name = factory.Sequence(lambda n: f"job-{n}")
    instance_type = factory.SubFactory(InstanceTypeFactory)
    instances = 1
    expected_duration = 3600
    submitted_at = factory.LazyFunction(timezone.now)


def aws_sample_queue(name: str = "aws-sample", *, capacity: int = 3) -> JobQueue:
    """The AWS quota-management sample: three shares of one ml.g5.xlarge each."""
    queue = JobQueueFactory(name=name)
    itype = InstanceTypeFactory()
    QueueCapacityFactory(queue=queue, instance_type=itype, instances=capacity)
    for position, (share_name, strategy, borrow) in enumerate(
        [
            ("qs1", QuotaShare.Strategy.LEND_AND_BORROW, 200),
            ("qs2", QuotaShare.Strategy.LEND, None),
            ("qs3", QuotaShare.Strategy.RESERVE, None),
        ]
    ):
        share = QuotaShareFactory(
            queue=queue,
            team=TeamFactory(name=f"team-{share_name}"),
            name=share_name,
            strategy=strategy,
            borrow_limit=borrow,
            in_share_preemption=share_name == "qs1",
            position=position,
        )
        CapacityLimitFactory(share=share, instance_type=itype, max_instances=1)
    return queue
