"""Bound the free-text fields (issue 28, point 1): state only.

A TextField's max_length and MaxLengthValidator are not database constraints, so this
migration changes no column: rows longer than the bound stay as they are and stay
readable; forms, the API and the services refuse only new writes over it.
"""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0020_directory_oidc_subject"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="articlerevision",
                    name="body",
                    field=models.TextField(
                        max_length=100000,
                        validators=[django.core.validators.MaxLengthValidator(100000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="articlerevision",
                    name="reason",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="exceptionevent",
                    name="note",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="exceptionrequest",
                    name="decision_note",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="exceptionrequest",
                    name="justification",
                    field=models.TextField(
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="knowledgearticle",
                    name="body",
                    field=models.TextField(
                        help_text="Markdown.",
                        max_length=100000,
                        validators=[django.core.validators.MaxLengthValidator(100000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="policychange",
                    name="reason",
                    field=models.TextField(
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="policyproposal",
                    name="reason",
                    field=models.TextField(
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="policyproposal",
                    name="review_note",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="whatifcomparison",
                    name="note",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="whatifcomparison",
                    name="workload_description",
                    field=models.TextField(
                        blank=True,
                        max_length=10000,
                        validators=[django.core.validators.MaxLengthValidator(10000)],
                    ),
                ),
                migrations.AlterField(
                    model_name="whatifreview",
                    name="note",
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
