"""DRF adapters for governance.permissions: the rules themselves live there."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from governance import permissions


class PolicyAccess(BasePermission):
    """Anyone with a role reads policies; only those who may edit them write."""

    def has_permission(self, request, view):
        if request.method in SAFE_METHODS:
            return permissions.can_view_policies(request.user)
        return permissions.can_edit_policies(request.user)


class HistoryAccess(BasePermission):
    """History is read by who may view it; a revert is a policy edit."""

    def has_permission(self, request, view):
        if not permissions.can_view_history(request.user):
            return False
        return request.method in SAFE_METHODS or permissions.can_edit_policies(request.user)
