"""The operation the migrations that moved the fleet's models use (fleet/migrations/0001,
governance/migrations/0010-0011, scheduler/migrations/0007).

They change only Django's record of the models (the tables stay as they are). Django
re-renders a model and all that relate to it after each change of a relation, and these
migrations change dozens of relations of the most related models: on a new database
that alone took seconds of every `migrate`. This operation drops the rendered models
before its changes, so they are rendered once, when next needed, instead of once per
change. What the changes are, and the database (untouched), are exactly those of
SeparateDatabaseAndState.
"""

from django.db import migrations


class ModelStateOnly(migrations.SeparateDatabaseAndState):
    def __init__(self, state_operations):
        super().__init__(database_operations=[], state_operations=state_operations)

    def deconstruct(self):
        return self.__class__.__qualname__, [], {"state_operations": self.state_operations}

    def state_forwards(self, app_label, state):
        # ProjectState.apps is a cached property: without it, each change below only
        # edits the model states, and the next reader renders them all once.
        state.__dict__.pop("apps", None)
        super().state_forwards(app_label, state)
