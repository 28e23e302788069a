# Issue 25: releases, frozen benchmark versions.

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0007_training_gold_items_and_audits"),
        ("judging", "0004_spot_check_audit_and_second_grade"),
        ("rubrics", "0002_version_human_changes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Release",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        max_length=40,
                        unique=True,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z0-9][A-Za-z0-9 ._+()-]*$",
                                "A release name starts with a letter or digit and holds only letters, digits, "
                                "spaces and . _ - + ( ), for example v1.0.",
                            )
                        ],
                    ),
                ),
                ("notes", models.TextField(blank=True, max_length=2000)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("content_hash", models.CharField(max_length=71)),
                (
                    "partial_credit",
                    models.FloatField(verbose_name="lambda (credit of partially meets)"),
                ),
                ("mu", models.FloatField(verbose_name="mu (score of contradicts)")),
                ("weight_answer_critical", models.FloatField()),
                ("weight_valuable", models.FloatField()),
                ("weight_context", models.FloatField()),
                ("domains", models.JSONField(default=list)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="ReleaseQuestion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("text", models.TextField()),
                ("entity", models.CharField(max_length=500)),
                ("domain", models.CharField(max_length=100)),
                ("popularity", models.CharField(max_length=8)),
                ("source_id", models.CharField(max_length=200)),
                ("source", models.CharField(blank=True, max_length=100)),
                ("source_split", models.CharField(blank=True, max_length=40)),
                ("source_revision", models.CharField(blank=True, max_length=100)),
                ("licence", models.CharField(blank=True, max_length=100)),
                ("n_checks", models.PositiveIntegerField()),
                ("stage", models.CharField(max_length=16)),
                (
                    "image",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="annotation.image",
                    ),
                ),
                (
                    "question",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="annotation.finalquestion",
                    ),
                ),
                (
                    "release",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="questions",
                        to="judging.release",
                    ),
                ),
                (
                    "version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="rubrics.rubricversion",
                    ),
                ),
            ],
            options={
                "ordering": ["release_id", "source_id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("release", "question"), name="release_question_once"
                    ),
                    models.UniqueConstraint(
                        fields=("release", "source_id"), name="release_source_once"
                    ),
                ],
            },
        ),
    ]
