"""The borrow-limit constraint names the strategies that take a borrow limit as the
engine's table says (engine.strategies), not one by name: the same rows pass."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0002_executor_choices_from_the_registry"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="quotashare",
            name="quotashare_borrow_limit_only_lend_and_borrow",
        ),
        migrations.AddConstraint(
            model_name="quotashare",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("strategy__in", ("LEND_AND_BORROW",)), ("borrow_limit__gte", -1)),
                    models.Q(
                        models.Q(("strategy__in", ("LEND_AND_BORROW",)), _negated=True),
                        ("borrow_limit__isnull", True),
                    ),
                    _connector="OR",
                ),
                name="quotashare_borrow_limit_only_lend_and_borrow",
            ),
        ),
    ]
