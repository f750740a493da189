"""The fleet's models came from the governance and scheduler apps without moving data.

A database holding rows of every moved model (and rows of the apps that point at them)
in the schema of before the move is migrated forward, then back, then forward again;
each time every row is there, with its relations, read through that state's models.

The fleet's migrations depend on nothing above the fleet, so on a new database they run
first and the fleet's first migration creates the tables (fleet.migration_state): a
database built that way has the schema of one built in the old order, where governance's
and the scheduler's migrations created them.
"""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import SeparateDatabaseAndState

BEFORE = [
    ("governance", "0009_monthlyrollup_version"),
    ("scheduler", "0006_job_share_newest"),
    # fleet's own later migrations change the moved tables (new columns): back to
    # before the app existed, so the tables are as they were before the move.
    ("fleet", None),
]
# Right after the move (fleet's first migration comes with them); later migrations of
# the fleet are not needed to read the rows.
AFTER = [
    ("governance", "0011_fleet_models_moved"),
    ("scheduler", "0007_fleet_models_moved"),
]
MOVE = [*AFTER, ("fleet", "0001_models_from_governance_and_scheduler")]
# Where each moved model lives before and after.
MOVED = {
    "Team": "governance",
    "InstanceType": "governance",
    "JobQueue": "governance",
    "QueueCapacity": "governance",
    "QuotaShare": "governance",
    "CapacityLimit": "governance",
    "UrgencyDefinition": "governance",
    "JobDefinition": "scheduler",
    "JobDefinitionRevision": "scheduler",
    "Job": "scheduler",
    "JobEvent": "scheduler",
}
MOMENT = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)


def migrate(targets=None):
    """Migrate to `targets` (None: every leaf node); the models of the state reached."""
    executor = MigrationExecutor(connection)
    state = executor.migrate(targets or executor.loader.graph.leaf_nodes())
    if targets is None:
        # The state a long forward plan leaves can hold models rendered before a later
        # operation changed a model they point at (their reverse accessors missing):
        # the whole project's state, rendered afresh.
        return executor.loader.project_state().apps
    return state.apps


def moved(apps, name, *, after):
    return apps.get_model("fleet" if after else MOVED[name], name)


def fill(apps):
    """One row of each moved model, related as in life, and the rows that point at them."""
    user = apps.get_model("auth", "User").objects.create(username="migrating-lead")
    get = lambda name: moved(apps, name, after=False)  # noqa: E731
    team = get("Team").objects.create(name="vision")
    team.members.add(user)
    team.leads.add(user)
    gpu = get("InstanceType").objects.create(name="ml.g5.xlarge", gpu_count=1, gpu_model="A10G")
    queue = get("JobQueue").objects.create(name="moving", executor="simulated")
    get("QueueCapacity").objects.create(queue=queue, instance_type=gpu, instances=4)
    share = get("QuotaShare").objects.create(
        queue=queue, team=team, name="vision-share", strategy="LEND_AND_BORROW", borrow_limit=50
    )
    get("CapacityLimit").objects.create(share=share, instance_type=gpu, max_instances=2)
    urgency = get("UrgencyDefinition").objects.create(
        name="deadline", meaning="a paper deadline", priority=700, max_window_hours=48
    )
    urgency.invokers.add(team)
    definition = get("JobDefinition").objects.create(name="train", created_at=MOMENT)
    definition.queues.add(queue)
    revision = get("JobDefinitionRevision").objects.create(
        definition=definition, revision=1, command=["python", "train.py"], created_at=MOMENT
    )
    job = get("Job").objects.create(
        queue=queue,
        share=share,
        name="resnet",
        instance_type=gpu,
        expected_duration=3600,
        submitted_at=MOMENT,
        definition_revision=revision,
        urgency=urgency,
        submitted_by=user,
    )
    get("JobEvent").objects.create(job=job, at=MOMENT, type="SUBMITTED", actor=user)
    apps.get_model("governance", "PolicyChange").objects.create(
        reason="moving day", target="share", queue=queue, share=share, object_repr="vision-share"
    )
    request = apps.get_model("governance", "ExceptionRequest").objects.create(
        kind="PRIORITY_RAISE",
        team=team,
        queue=queue,
        share=share,
        urgency=urgency,
        justification="the deadline",
        window_start=MOMENT,
        window_end=MOMENT + dt.timedelta(hours=4),
        requested_by=user,
    )
    request.jobs.add(job)
    apps.get_model("scheduler", "JobDecision").objects.create(
        job=job, kind="CLOSED", decided_by=user, decided_at=MOMENT
    )
    apps.get_model("scheduler", "QueuePassState").objects.create(
        queue=queue, policy_key="k", judged_at=MOMENT
    )


def check(apps, *, after):
    """Every row is there and every relation, in both directions, finds its row."""
    get = lambda name: moved(apps, name, after=after)  # noqa: E731
    assert {name: get(name).objects.count() for name in MOVED} == dict.fromkeys(MOVED, 1)
    job = get("Job").objects.get()
    assert job.name == "resnet"
    assert (job.queue.name, job.share.name, job.share.team.name) == (
        "moving",
        "vision-share",
        "vision",
    )
    assert (job.instance_type.name, job.urgency.name) == ("ml.g5.xlarge", "deadline")
    assert job.definition_revision.definition.name == "train"
    assert list(job.definition_revision.definition.queues.values_list("name", flat=True)) == [
        "moving"
    ]
    assert job.submitted_by.username == "migrating-lead"
    assert list(job.events.values_list("type", flat=True)) == ["SUBMITTED"]
    team = get("Team").objects.get()
    assert list(team.members.values_list("username", flat=True)) == ["migrating-lead"]
    assert list(team.leads.values_list("username", flat=True)) == ["migrating-lead"]
    assert list(get("UrgencyDefinition").objects.get().invokers.all()) == [team]
    share = get("QuotaShare").objects.get()
    assert (share.strategy, share.borrow_limit) == ("LEND_AND_BORROW", 50)
    assert share.limits.get().max_instances == 2
    assert share.queue.capacities.get().instances == 4
    change = apps.get_model("governance", "PolicyChange").objects.get()
    assert (change.queue_id, change.share_id) == (share.queue_id, share.pk)
    request = apps.get_model("governance", "ExceptionRequest").objects.get()
    assert list(request.jobs.all()) == [job]
    assert request.urgency.name == "deadline"
    assert apps.get_model("scheduler", "JobDecision").objects.get().job == job
    assert apps.get_model("scheduler", "QueuePassState").objects.get().queue == share.queue


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_every_row_survives_the_move_forward_and_back():
    try:
        fill(migrate(BEFORE))
        check(migrate(AFTER), after=True)
        check(migrate(BEFORE), after=False)
    finally:
        # The other tests need the whole schema: every leaf node, whatever happened.
        latest = migrate()
    check(latest, after=True)


def test_the_move_changes_no_table():
    """State only: the migrations that move the models declare no change of a table (the
    fleet's first creates its tables only where they are missing: a new database)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for key in [*MOVE, ("governance", "0010_fleet_models_referenced")]:
        operations = loader.disk_migrations[key].operations
        assert len(operations) == 1 and isinstance(operations[0], SeparateDatabaseAndState), key
        assert operations[0].database_operations == [], key
        assert operations[0].state_operations, key


def schema() -> dict[str, tuple[list, list]]:
    """Every table's columns and constraints, as the database describes them; the names
    Django generates for constraints and indexes differ between an operation that adds
    a column and one that creates the table, so constraints are compared without them."""
    described = {}
    introspection = connection.introspection
    with connection.cursor() as cursor:
        for table in introspection.table_names(cursor):
            columns = sorted(
                (column.name, str(column.type_code), column.null_ok)
                for column in introspection.get_table_description(cursor, table)
            )
            constraints = sorted(
                repr({key: value for key, value in constraint.items() if key != "name"})
                for constraint in introspection.get_constraints(cursor, table).values()
            )
            described[table] = (columns, constraints)
    return described


@pytest.mark.django_db(transaction=True)
def test_a_new_database_gets_the_schema_the_old_order_gave():
    new_order = schema()  # the test database: the fleet's migrations ran first
    try:
        # Back to no table of the three apps, then the old order: governance's and the
        # scheduler's migrations create the tables, and the fleet takes them over.
        migrate([("governance", None), ("scheduler", None), ("fleet", None)])
        assert not {"governance_jobqueue", "scheduler_job"} & set(schema())
        migrate(BEFORE)
        old_order = schema()
    finally:
        migrate()
    assert {"governance_jobqueue", "scheduler_job"} <= set(old_order)
    assert schema() == new_order
