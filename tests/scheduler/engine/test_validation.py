"""Policy and scenario validation: one message per problem, at the field it concerns."""

import pytest

from scheduler.engine import Problem, ScenarioError, load_scenario, validate_policy

QUEUE = {"capacity": {"ml.g5.xlarge": 4}}


def share(**fields):
    return {
        "name": "vision",
        "capacity_limits": {"ml.g5.xlarge": 2},
        "strategy": "LEND_AND_BORROW",
        **fields,
    }


def messages(queue, shares):
    return [str(problem) for problem in validate_policy(queue, shares)]


def test_a_valid_policy_has_no_problems():
    assert validate_policy(QUEUE, [share(borrow_limit=50, in_share_preemption=True)]) == []


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"strategy": "RESERVE", "borrow_limit": 100}, "only allowed with LEND_AND_BORROW"),
        ({"strategy": "SHARE"}, "must be RESERVE, LEND or LEND_AND_BORROW"),
        ({"borrow_limit": -2}, "must be -1 (unlimited) or a percent of at least 0"),
        ({"state": "PAUSED"}, "must be ENABLED or DISABLED"),
        ({"in_share_preemption": 1}, "must be true or false"),
        ({"name": ""}, "must be a non-empty name"),
        ({"colour": "red"}, "unknown field"),
    ],
)
def test_share_field_problems(fields, expected):
    problems = validate_policy(QUEUE, [share(**fields)])
    assert [problem.message for problem in problems] == [expected]
    assert problems[0].path.startswith("shares[0].")


def test_limit_problems_name_the_instance_type():
    limits = {"ml.g5.xlarge": 0, "p4d": 1}
    assert messages(QUEUE, [share(capacity_limits=limits)]) == [
        "shares[0].capacity_limits.ml.g5.xlarge: must be at least 1",
        "shares[0].capacity_limits.p4d: instance type 'p4d' is not in the queue",
    ]


def test_counts_and_duplicates():
    assert messages(QUEUE, []) == ["shares: at least 1 share per queue"]
    many = [share(name=f"s{i}") for i in range(21)]
    assert messages(QUEUE, many) == ["shares: at most 20 shares per queue"]
    assert messages(QUEUE, [share(), share()]) == ["shares[1].name: duplicate share name 'vision'"]
    six = {f"t{i}": 1 for i in range(6)}
    assert "queue.capacity: must list 1 to 5 instance types" in messages({"capacity": six}, [])


def test_queue_problems():
    assert messages({"capacity": {"ml.g5.xlarge": 0}}, [share()]) == [
        "queue.capacity.ml.g5.xlarge: must be at least 1"
    ]
    assert messages({}, [share()])[0] == "queue.capacity: is required"


def test_problem_reads_path_then_message():
    assert str(Problem("shares[2].borrow_limit", "must be at least 1")) == (
        "shares[2].borrow_limit: must be at least 1"
    )


def document(**overrides):
    doc = {
        "name": "t",
        "queue": dict(QUEUE),
        "shares": [share()],
        "jobs": [
            {
                "id": "j1",
                "share": "vision",
                "instance_type": "ml.g5.xlarge",
                "instances": 1,
                "submit_at": 10,
                "duration": 60,
            }
        ],
    }
    doc.update(overrides)
    return doc


def test_load_scenario_applies_defaults():
    scenario = load_scenario(document(queue={**QUEUE, "default_preemption_retries": 2}))
    job = scenario.jobs[0]
    assert (job.priority, job.restart_overhead, job.preemption_retries) == (0, 0, 2)
    assert scenario.shares[0].enabled and scenario.shares[0].borrow_limit == -1


@pytest.mark.parametrize(
    ("job_fields", "expected"),
    [
        ({"share": "nlp"}, "jobs[0].share: share 'nlp' does not exist"),
        ({"priority": 10000}, "jobs[0].priority: must be between 0 and 9999"),
        ({"instances": 0}, "jobs[0].instances: must be at least 1"),
        ({"duration": 1.5}, "jobs[0].duration: must be a whole number"),
        ({"protected_until": -1}, "jobs[0].protected_until: must be at least 0"),
    ],
)
def test_job_problems(job_fields, expected):
    doc = document()
    doc["jobs"][0].update(job_fields)
    with pytest.raises(ScenarioError) as raised:
        load_scenario(doc)
    assert str(raised.value) == expected


def test_duplicate_job_ids():
    doc = document()
    doc["jobs"].append(dict(doc["jobs"][0]))
    with pytest.raises(ScenarioError, match=r"jobs\[1\].id: duplicate job id 'j1'"):
        load_scenario(doc)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (
            {"at": 5, "type": "update_share", "share": "vision", "capacity_limits": {"p4d": 1}},
            "actions[0].capacity_limits.p4d: instance type 'p4d' is not in the queue",
        ),
        (
            {"at": 5, "type": "update_share", "share": "vision", "name": "x"},
            "actions[0].name: unknown field",
        ),
        (
            {"at": 5, "type": "set_capacity", "capacity": {"p4d": 1}},
            "actions[0].capacity: drops instance type 'ml.g5.xlarge', which share 'vision' "
            "still has a limit for",
        ),
        (
            {"at": 10, "type": "terminate", "job": "j1"},
            "actions[0].at: job 'j1' is only submitted at t=10; terminate it after that",
        ),
        (
            {"at": 5, "type": "set_priority", "job": "nope", "priority": 1},
            "actions[0].job: job 'nope' does not exist",
        ),
        (
            {"at": 5, "type": "pause"},
            "actions[0].type: must be set_priority, update_share, set_capacity or terminate",
        ),
    ],
)
def test_action_problems(action, expected):
    with pytest.raises(ScenarioError) as raised:
        load_scenario(document(actions=[action]))
    assert str(raised.value) == expected


def test_an_update_dropping_borrowing_drops_the_borrow_limit():
    action = {"at": 5, "type": "update_share", "share": "vision", "strategy": "LEND"}
    scenario = load_scenario(document(shares=[share(borrow_limit=50)], actions=[action]))
    assert scenario.actions[0].share.borrow_limit == -1


def test_actions_are_ordered_by_time_then_listed_order():
    actions = [
        {"at": 9, "type": "set_priority", "job": "j1", "priority": 1},
        {"at": 3, "type": "set_priority", "job": "j1", "priority": 2},
        {"at": 9, "type": "set_priority", "job": "j1", "priority": 3},
    ]
    scenario = load_scenario(document(actions=actions))
    assert [action.priority for action in scenario.actions] == [2, 1, 3]


def test_annotations_are_ignored_but_typos_are_not():
    load_scenario(document(expect={"exit": 0}, source="x"))
    with pytest.raises(ScenarioError, match="^jobz: unknown field$"):
        load_scenario(document(jobz=[]))
