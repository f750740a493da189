"""The rules table sits below the apps whose data some of its scopes read: those scopes
are registered when their apps are ready (fleet.teams, governance.exceptions.scopes)."""

from core import rules


def test_every_scope_the_rules_name_is_registered():
    assert rules.unknown_scopes() == set()
    assert {"led_team", "team_member", "owner_scope", "record_visible"} <= rules.SCOPES.keys()


def test_a_rule_naming_a_scope_nobody_registered_is_found(monkeypatch):
    rule = rules.Rule((rules.Grant(rules.ADMINS, "nobody_registered_this"),), "never")
    monkeypatch.setitem(rules.RULES, "test.unregistered", rule)
    assert rules.unknown_scopes() == {"nobody_registered_this"}
