"""Bound the free-text fields (issue 28, point 1): state only.

A TextField's max_length and MaxLengthValidator are not database constraints, so this
migration changes no column: rows longer than the bound stay as they are and stay
readable; forms, the API and the services refuse only new writes over it.
"""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0012_instancetype_price_per_hour"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="jobdefinition",
                    name="description",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="jobdefinition",
                    name="retire_reason",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="jobdefinitionrevision",
                    name="reason",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="jobqueue",
                    name="description",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="team",
                    name="description",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="urgencydefinition",
                    name="examples",
                    field=models.TextField(
                        blank=True,
                        help_text="Situations that qualify.",
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="urgencydefinition",
                    name="meaning",
                    field=models.TextField(
                        help_text="What this urgency means, in plain words.",
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="workloadclass",
                    name="description",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
