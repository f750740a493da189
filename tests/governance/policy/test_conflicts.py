"""Two versions of one policy object, field by field (governance.policy.conflicts): the
diff is driven by the editor's form, and the merge saves through it with the version
check, the reason and the history of any other save."""

import pytest
from django import forms
from django.http import QueryDict

from fleet.models import QuotaShare, WorkloadClass
from governance.models import PolicyChange
from governance.policy import conflicts
from governance.policy.forms import CapacityForm, ShareForm, UrgencyForm, WorkloadClassForm
from governance.policy.services import VersionConflict, queue_set_capacity
from tests.factories import UrgencyDefinitionFactory, UserFactory
from tests.governance.policy.views.conftest import share_payload

pytestmark = pytest.mark.django_db


def _qd(data: dict) -> QueryDict:
    result = QueryDict(mutable=True)
    for key, value in data.items():
        result.setlist(key, value if isinstance(value, list) else [value])
    return result


def _share_form_for(share, form_class=ShareForm):
    def form_for(data):
        fresh = QuotaShare.objects.get(pk=share.pk)
        return form_class(data, queue=fresh.queue, share=fresh)

    return form_for


def _save(form, actor):
    assert form.is_valid(), form.errors
    return form.save(actor=actor)


@pytest.fixture
def qs1(aws_queue):
    return QuotaShare.objects.get(queue=aws_queue, name="qs1")


@pytest.fixture
def other(db):
    return UserFactory(username="other-admin", roles=["admins"])


def test_two_ceilings_differ_on_the_priority_ceiling_row(admin, other, qs1):
    loaded = share_payload(qs1, priority_ceiling=qs1.priority_ceiling)
    form_for = _share_form_for(qs1)
    _save(form_for(_qd({**loaded, "priority_ceiling": "150", "reason": "Theirs"})), other)

    mine = form_for(_qd({**loaded, "priority_ceiling": "200", "borrow_limit": "50"}))
    with pytest.raises(VersionConflict):
        _save(mine, admin)

    diffs = {diff.name: diff for diff in conflicts.field_diff(form_for, mine)}
    assert set(diffs) == {"priority_ceiling", "borrow_limit"}
    assert (diffs["priority_ceiling"].label, diffs["priority_ceiling"].theirs) == (
        "Priority ceiling",
        "150",
    )
    assert diffs["priority_ceiling"].mine == "200"
    assert (diffs["borrow_limit"].theirs, diffs["borrow_limit"].mine) == ("200%", "50%")


def test_fields_that_agree_are_not_listed_and_limits_are_one_row(admin, other, qs1):
    loaded = share_payload(qs1, priority_ceiling=qs1.priority_ceiling)
    form_for = _share_form_for(qs1)
    _save(form_for(_qd({**loaded, "in_share_preemption": "", "reason": "Theirs"})), other)
    loaded.pop("in_share_preemption", None)

    mine = form_for(_qd({**loaded, "limit-0-max_instances": "2"}))
    assert mine.is_valid()

    diffs = conflicts.field_diff(form_for, mine)
    assert [(d.label, d.theirs, d.mine) for d in diffs] == [
        ("Capacity limits", "ml.g5.xlarge × 1", "ml.g5.xlarge × 2")
    ]


def test_a_field_added_to_the_form_later_is_compared_without_a_list(admin, qs1):
    class LaterShareForm(ShareForm):
        cost_centre = forms.CharField(label="Cost centre", required=False, initial="CC-1")

    form_for = _share_form_for(qs1, LaterShareForm)
    mine = form_for(_qd({**share_payload(qs1), "cost_centre": "CC-9"}))
    assert mine.is_valid()

    diffs = conflicts.field_diff(form_for, mine)

    assert [(d.name, d.label, d.theirs, d.mine) for d in diffs] == [
        ("cost_centre", "Cost centre", "CC-1", "CC-9")
    ]


def test_every_editor_is_compared_by_its_own_fields(admin):
    urgency = UrgencyDefinitionFactory(name="Paper deadline", priority=100)
    form_for = lambda data: UrgencyForm(data, urgency=type(urgency).objects.get(pk=urgency.pk))  # noqa: E731
    stored = conflicts.form_data(form_for(None))
    mine = form_for(_qd({**{k: v for k, v in stored.items() if v}, "priority": "900"}))
    assert mine.is_valid(), mine.errors

    diffs = conflicts.field_diff(form_for, mine)

    assert [(d.label, d.theirs, d.mine) for d in diffs] == [("Priority it grants", "100", "900")]

    workload_class = WorkloadClass.objects.create(name="training", grace=30)
    class_for = lambda data: WorkloadClassForm(  # noqa: E731
        data, workload_class=WorkloadClass.objects.get(pk=workload_class.pk)
    )
    stored = {k: v for k, v in conflicts.form_data(class_for(None)).items() if v}
    mine = class_for(_qd({**stored, "grace": "60", "description": "long runs"}))
    assert mine.is_valid(), mine.errors
    assert {d.name for d in conflicts.field_diff(class_for, mine)} == {"grace", "description"}


def test_the_capacity_rows_are_one_field_named_capacity(admin, aws_queue):
    queue_set_capacity(
        actor=admin, queue=aws_queue, capacity={"ml.g5.xlarge": 4}, reason="x", expected_version=1
    )
    form_for = lambda data: CapacityForm(data, queue=type(aws_queue).objects.get(pk=aws_queue.pk))  # noqa: E731
    mine = form_for(
        _qd(
            {
                "version": "1",
                "capacity-0-instance_type": "ml.g5.xlarge",
                "capacity-0-max_instances": "6",
            }
        )
    )
    assert mine.is_valid()

    [diff] = conflicts.field_diff(form_for, mine)

    assert (diff.name, diff.theirs, diff.mine) == (
        "capacity",
        "ml.g5.xlarge × 4",
        "ml.g5.xlarge × 6",
    )


def test_the_merge_takes_theirs_field_by_field_and_saves_a_new_version(admin, other, qs1):
    loaded = share_payload(qs1, priority_ceiling=qs1.priority_ceiling)
    form_for = _share_form_for(qs1)
    _save(form_for(_qd({**loaded, "priority_ceiling": "150", "reason": "Theirs"})), other)
    submitted = _qd({**loaded, "priority_ceiling": "200", "borrow_limit": "50", "reason": "Merge"})

    data = conflicts.merged_data(
        submitted, form_for(None), take_theirs=["priority_ceiling"], version=2
    )
    write = _save(form_for(data), admin)

    qs1.refresh_from_db()
    assert (qs1.version, qs1.priority_ceiling, qs1.borrow_limit) == (3, 150, 50)
    assert write.entry.reason == "Merge" and write.entry.actor == admin
    assert write.entry.before["borrow_limit"] == 200
    assert PolicyChange.objects.filter(share=qs1).count() == 2


def test_taking_all_theirs_saves_nothing_new(admin, other, qs1):
    loaded = share_payload(qs1, priority_ceiling=qs1.priority_ceiling)
    form_for = _share_form_for(qs1)
    _save(form_for(_qd({**loaded, "priority_ceiling": "150", "reason": "Theirs"})), other)
    submitted = _qd({**loaded, "priority_ceiling": "200", "limit-0-max_instances": "3"})
    stored = form_for(None)

    data = conflicts.merged_data(
        submitted, stored, take_theirs=conflicts.part_names(stored), version=2
    )
    write = _save(form_for(data), admin)

    assert write.entry is None
    qs1.refresh_from_db()
    assert (qs1.version, qs1.priority_ceiling, qs1.limits.get().max_instances) == (2, 150, 1)


def test_a_third_save_before_the_merge_is_a_conflict_again(admin, other, qs1):
    loaded = share_payload(qs1, priority_ceiling=qs1.priority_ceiling)
    form_for = _share_form_for(qs1)
    _save(form_for(_qd({**loaded, "priority_ceiling": "150", "reason": "Theirs"})), other)
    submitted = _qd({**loaded, "priority_ceiling": "200", "reason": "Merge"})
    data = conflicts.merged_data(submitted, form_for(None), take_theirs=[], version=2)
    third = _qd({**share_payload(QuotaShare.objects.get(pk=qs1.pk)), "priority_ceiling": "300"})
    _save(form_for(third), other)

    with pytest.raises(VersionConflict):
        _save(form_for(data), admin)

    qs1.refresh_from_db()
    assert (qs1.version, qs1.priority_ceiling) == (3, 300)


def test_choices_default_to_mine_and_take_all_wins():
    post = _qd({"merge-name": "theirs", "merge-state": "mine"})
    assert conflicts.choices(post, ["name", "state", "team"]) == {
        "name": "theirs",
        "state": "mine",
        "team": "mine",
    }
    post["merge_all"] = "theirs"
    assert set(conflicts.choices(post, ["name", "state"]).values()) == {"theirs"}
    kept = conflicts.submission(_qd({"name": "x", "merge-name": "theirs", "merge": "save"}))
    assert dict(kept) == {"name": ["x"]}
