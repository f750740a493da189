"""Helpers for the policy page tests: logged-in clients and form payloads."""

import pytest
from django.test import Client


@pytest.fixture
def client_as():
    """A test client logged in as `user` (None: anonymous)."""

    def make(user):
        client = Client()
        if user is not None:
            client.force_login(user)
        return client

    return make


@pytest.fixture
def admin_client(client_as, admin):
    return client_as(admin)


def share_payload(share, *, limits=None, reason="Rebalance for the quarter", **fields) -> dict:
    """The share editor's POST for `share` as it is, with `fields` and `limits` changed."""
    data = {
        "name": share.name,
        "team": str(share.team_id),
        "strategy": share.strategy,
        "borrow_limit": "" if share.borrow_limit is None else str(share.borrow_limit),
        "state": share.state,
        "version": str(share.version),
        "reason": reason,
    }
    if share.in_share_preemption:
        data["in_share_preemption"] = "on"
    if limits is None:
        limits = {lim.instance_type.name: lim.max_instances for lim in share.limits.all()}
    for index, (type_name, instances) in enumerate(limits.items()):
        data[f"limit-{index}-instance_type"] = type_name
        data[f"limit-{index}-max_instances"] = str(instances)
    for key, value in fields.items():
        if key == "in_share_preemption":
            if value:
                data[key] = "on"
            else:
                data.pop(key, None)
        else:
            data[key] = "" if value is None else str(value)
    return data


@pytest.fixture
def share_post():
    return share_payload
