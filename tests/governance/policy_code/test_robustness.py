"""Whatever a file holds, reading and planning it either works or names its problems:
generated documents in each format's shape, with any value in any place."""

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.policy_code import policy_file_read
from governance.policy_code.plan import policy_plan
from governance.policy_code.source import PolicyFileError

pytestmark = pytest.mark.django_db

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=12),
    st.sampled_from(["ml.g5.xlarge", "LEND", "RESERVE", "LEND_AND_BORROW", "ENABLED", "-1"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def maybe(value, strategy):
    return st.one_of(st.just(value), strategy)


share = st.fixed_dictionaries(
    {
        "name": maybe("s", values),
        "team": maybe("t", values),
        "strategy": maybe("LEND_AND_BORROW", values),
        "borrow_limit": maybe(50, values),
        "capacity_limits": maybe({"ml.g5.xlarge": 1}, values),
    },
    optional={"state": values, "in_share_preemption": values, "priority_ceiling": values},
)
native_documents = st.fixed_dictionaries(
    {
        "version": maybe(1, values),
        "instance_types": maybe([{"name": "ml.g5.xlarge", "gpus": 1}], values),
        "teams": maybe([{"name": "t"}], values),
        "queues": st.lists(
            st.fixed_dictionaries(
                {
                    "name": maybe("q", values),
                    "capacity": maybe({"ml.g5.xlarge": 2}, values),
                    "shares": st.one_of(st.lists(share, max_size=3), values),
                },
                optional={"default_preemption_retries": values, "executor": values},
            ),
            max_size=2,
        ),
    },
    optional={"urgency_definitions": values},
)
aws_documents = st.fixed_dictionaries(
    {
        "jobQueue": maybe("q", values),
        "quotaShares": st.one_of(
            values,
            st.lists(
                st.fixed_dictionaries(
                    {
                        "quotaShareName": maybe("s", values),
                        "capacityLimits": maybe(
                            [{"maxCapacity": 1, "capacityUnit": "ml.g5.xlarge"}], values
                        ),
                        "resourceSharingConfiguration": maybe({"strategy": "LEND"}, values),
                        "preemptionConfiguration": maybe({"inSharePreemption": "ENABLED"}, values),
                    },
                    optional={"tags": maybe({"team": "t"}, values), "state": values},
                ),
                max_size=3,
            ),
        ),
    }
)
kueue_documents = st.lists(
    st.fixed_dictionaries(
        {
            "apiVersion": maybe("kueue.x-k8s.io/v1beta1", values),
            "kind": st.sampled_from(["ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue"]),
            "metadata": maybe(
                {"name": "q-s", "annotations": {"quota-governance.io/team": "t"}}, values
            ),
            "spec": maybe(
                {
                    "cohort": "q",
                    "resourceGroups": [
                        {
                            "coveredResources": ["nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": "ml.g5.xlarge",
                                    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}],
                                }
                            ],
                        }
                    ],
                },
                values,
            ),
        }
    ),
    min_size=1,
    max_size=3,
)

SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)


def read_and_plan(text: str, format: str) -> None:
    try:
        policy_plan(policy=policy_file_read(raw=text, source="generated", format=format))
    except PolicyFileError as error:
        assert error.problems
        assert all(problem.field for problem in error.problems)


@SETTINGS
@given(native_documents)
def test_any_native_document_is_read_or_refused_by_field(document):
    read_and_plan(yaml.safe_dump(document), "native")


@SETTINGS
@given(aws_documents)
def test_any_aws_batch_document_is_read_or_refused_by_field(document):
    read_and_plan(json.dumps(document), "aws-batch")


@SETTINGS
@given(kueue_documents)
def test_any_kueue_document_is_read_or_refused_by_field(documents):
    read_and_plan(yaml.safe_dump_all(documents), "kueue")


@SETTINGS
@given(st.text(max_size=200))
def test_any_text_is_read_or_refused(text):
    for format in ("native", "aws-batch", "kueue", None):
        try:
            policy_file_read(raw=text, source="generated", format=format)
        except PolicyFileError as error:
            assert error.problems
