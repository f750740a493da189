"""The API's ModelSerializer: its fields are worked out from the model once per class.

DRF's ModelSerializer inspects the model and builds every field again for each
serializer it makes, which cost more than the rest of a short read (a queue list, a
share) put together. The fields it builds depend only on the class (its Meta and its
declared fields), never on the instance, the data or the request, so this builds them
once and hands each serializer a deep copy, as DRF itself does with declared fields.
"""

from __future__ import annotations

import copy

from rest_framework import serializers


class ModelSerializer(serializers.ModelSerializer):
    def get_fields(self):
        built = type(self).__dict__.get("_built_fields")
        if built is None:
            built = super().get_fields()
            # Set on this very class: a subclass has a Meta of its own.
            type(self)._built_fields = built
        return copy.deepcopy(built)
