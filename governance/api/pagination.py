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


class PageNumberPagination(pagination.PageNumberPagination):
    django_paginator_class = FirstPageCountingPaginator
