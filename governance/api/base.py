"""The one base of the API's viewsets: authentication challenge, input parsing, paging."""

from rest_framework import viewsets
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import ValidationError


class BaseApiViewSet(viewsets.GenericViewSet):
    def get_authenticate_header(self, request):
        # Anonymous requests get 401 with a challenge clients understand.
        return TokenAuthentication().authenticate_header(request)

    def paginated(self, queryset, output_class):
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(output_class(page, many=True).data)

    def parse(self, input_class, **kwargs):
        """The validated input, or a 400 in the project's error shape naming the field."""
        serializer = input_class(data=self.request.data, **kwargs)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def int_param(self, name: str) -> int | None:
        value = self.request.query_params.get(name)
        if value in (None, ""):
            return None
        try:
            return int(value)
        except ValueError:
            raise ValidationError({name: ["must be a whole number (an id)"]}) from None
