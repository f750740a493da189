"""The API's pages: DRF's page-number pagination, counting only when it must."""

from __future__ import annotations

from django.core.paginator import Paginator
from rest_framework import pagination


class FirstPageCountingPaginator(Paginator):
    """A first page shorter than a whole page is the whole list, and its length is the
    count: no COUNT query, which for a short list (the queues, a share's few jobs) cost
    as much as reading the rows. Any other page counts as Django's Paginator does."""

    def page(self, number):
        if self.orphans or str(number) != "1":
            return super().page(number)
        rows = list(self.object_list[: self.per_page])
        if len(rows) < self.per_page:
            self.__dict__["count"] = len(rows)  # Paginator.count is a cached_property
        return self._get_page(rows, 1, self)


class CountedApart:
    """Rows to page through (a `values()` queryset reading related names) counted by
    another queryset of the same rows that needs none of those joins: the COUNT of a
    `values()` queryset keeps every inner join its columns made, and on a share with
    thousands of jobs that COUNT cost more than the page itself."""

    ordered = True

    def __init__(self, rows, *, counted):
        self.rows = rows
        self.counted = counted

    def count(self) -> int:
        return self.counted.count()

    def __getitem__(self, index):
        return self.rows[index]


class PageNumberPagination(pagination.PageNumberPagination):
    django_paginator_class = FirstPageCountingPaginator
