"""The directory page's reads: the mappings and the accounts that sign in through the
directory."""

from __future__ import annotations

from django.db.models import QuerySet

from governance.directory.models import DirectoryAccount, GroupMapping


def mapping_list() -> QuerySet[GroupMapping]:
    return GroupMapping.objects.select_related("team", "queue", "created_by")


def account_list(*, limit: int = 200) -> list[DirectoryAccount]:
    return list(DirectoryAccount.objects.select_related("user").order_by("-checked_at")[:limit])
