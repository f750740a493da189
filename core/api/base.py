"""The one base of the API's viewsets: authentication challenge, input parsing, paging,
typed query parameters."""

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import viewsets
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.generics import get_object_or_404


class FilteredQuery:
    """For a view that declares a `filterset_class` (governance.filters, scheduler.filters):
    its query parameters are parsed with it, and the schema documents them from it."""

    filter_backends = [DjangoFilterBackend]

    def query(self) -> dict:
        """The view's FilterSet's parameters, parsed and bounded (absent ones are None or
        ""), for a selector that filters by itself; a bad one is a 400 naming it."""
        filterset = self.filterset_class(
            self.request.query_params, queryset=self.get_queryset(), request=self.request
        )
        if not filterset.is_valid():
            raise ValidationError(filterset.errors)
        return filterset.form.cleaned_data


class BaseApiViewSet(FilteredQuery, viewsets.GenericViewSet):
    # Ids in paths are digits: anything else is no operation (a JSON 404), not a lookup.
    lookup_value_regex = "[0-9]+"

    def get_authenticate_header(self, request):
        # Anonymous requests get 401 with a challenge clients understand.
        return TokenAuthentication().authenticate_header(request)

    def get_object(self):
        """The object the path names, found by its id alone. DRF's own passes the query
        through the list's filters first, parsing a FilterSet for every read of one
        object; query parameters filter lists, not objects."""
        field = self.lookup_url_kwarg or self.lookup_field
        obj = get_object_or_404(self.get_queryset(), **{self.lookup_field: self.kwargs[field]})
        self.check_object_permissions(self.request, obj)
        return obj

    def paginated(self, queryset, output_class):
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(output_class(page, many=True).data)

    def parse(self, input_class, **kwargs):
        """The validated input, or a 400 in the project's error shape naming the field."""
        serializer = input_class(data=self.request.data, **kwargs)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data
