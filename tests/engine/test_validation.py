"""Policy and scenario validation: one message per problem, at the field it concerns."""

import pytest

from engine import Problem, ScenarioError, load_scenario, parse_json, validate_policy

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


def _problems(document) -> list[str]:
    with pytest.raises(ScenarioError) as raised:
        load_scenario(document)
    return [str(problem) for problem in raised.value.problems]


def _document(**changes):
    document = {
        "name": "x",
        "queue": QUEUE,
        "shares": [share()],
        "jobs": [
            {"id": "j", "share": "vision", "instance_type": "ml.g5.xlarge", "instances": 1}
            | {"submit_at": 0, "duration": 5}
        ],
    }
    return document | changes


@pytest.mark.parametrize("value", [["vision"], {"vision": 1}], ids=["list", "object"])
def test_references_that_are_not_text_name_their_field(value):
    job = _document()["jobs"][0] | {"share": value, "instance_type": value}
    actions = [
        {"at": 1, "type": "set_priority", "job": value, "priority": 1},
        {"at": 1, "type": "update_share", "share": value, "state": "DISABLED"},
        {"at": 1, "type": value},
    ]
    assert _problems(_document(jobs=[job], actions=actions)) == [
        "jobs[0].share: must be the name of a share",
        "jobs[0].instance_type: must be the name of an instance type",
        "actions[2].type: must be set_priority, update_share, set_capacity or terminate",
    ]
    assert _problems(_document(actions=actions[:2])) == [
        "actions[0].job: must be the id of a job",
        "actions[1].share: must be the name of a share",
    ]
    named = _document(shares=[share(name=value)])
    assert "shares[0].name: must be a non-empty name" in _problems(named)


def test_whole_numbers_are_bounded_where_json_is_exact():
    limit = 2**53 - 1
    assert validate_policy({"capacity": {"ml.g5.xlarge": limit}}, [share()]) == []
    assert messages({"capacity": {"ml.g5.xlarge": limit + 1}}, [share(borrow_limit=limit + 1)]) == [
        f"queue.capacity.ml.g5.xlarge: must be at most {limit}",
        f"shares[0].borrow_limit: must be at most {limit}",
    ]


def test_messages_quote_text_shortened_and_encodable():
    job = _document()["jobs"][0] | {"share": "s" * 500 + "\ud800"}
    (message,) = _problems(_document(jobs=[job]))
    assert message == f"jobs[0].share: share '{'s' * 59}…' does not exist"
    assert _problems(_document(name="a\udc80")) == [
        "name: must be text without lone surrogates (\\ud800-\\udfff)"
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{\n  "name": "caf\xe9"}', "not valid UTF-8: byte 0xe9 at line 2 column 15"),
        (b'{"a": }', "not valid JSON: Expecting value at line 1 column 7"),
        (b'{"a": ' + b"[" * 2000 + b"]" * 2000 + b"}", "nested too deeply, past 100 levels at"),
    ],
)
def test_parse_json_says_what_is_wrong_and_where(data, message):
    with pytest.raises(ScenarioError) as raised:
        parse_json(data)
    (problem,) = raised.value.problems
    assert problem.path == "document" and message in problem.message


def test_parse_json_reads_utf8_with_or_without_bom_and_stands_in_for_huge_integers():
    assert parse_json('{"é": 1}'.encode()) == {"é": 1}
    assert parse_json(b"\xef\xbb\xbf[1]") == [1]
    assert parse_json(b"[" + b"9" * 5000 + b", -" + b"9" * 5000 + b", 12]") == [
        2**53,
        -(2**53),
        12,
    ]
