"""DRF permission classes that ask core.rules, the one table.

Each class names the table's action for each operation in `rule_actions` (a view's
own `rule_actions` comes first): keys are viewset actions ("list", "revert"), else
"read" / "write" for the safe and the other methods. A refusal answers 403 with the
table's sentence; anonymous clients get 401.
"""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from core import rules


class TableAccess(BasePermission):
    rule_actions: dict[str, str] = {}

    def has_permission(self, request, view):
        actions = getattr(view, "rule_actions", None) or self.rule_actions
        name = getattr(view, "action", None)
        action = actions.get(name) or actions["read" if request.method in SAFE_METHODS else "write"]
        why = rules.refusal(request.user, action)
        if why is not None:
            self.message = why
            return False
        return True


class PolicyAccess(TableAccess):
    """Policy readers read; admins write."""

    rule_actions = {"read": "policy.view", "write": "policy.edit"}


class HistoryAccess(TableAccess):
    """History readers read; a revert is a policy edit."""

    rule_actions = {"read": "history.view", "write": "policy.edit"}


class WhatIfAccess(TableAccess):
    rule_actions = {"read": "whatif.use", "write": "whatif.use"}
