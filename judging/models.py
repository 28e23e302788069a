"""Stage 3: the evaluated models' responses, the judges' verdicts, and per-tier verdict counts.

Scores come from SQL over `ResponseTierCount`, and the check report from `CheckVerdictCount` and
`CheckAgreement`, not from loops over `Verdict` rows (../shared/DESIGN.md, Performance).
`judging.verdicts.services.verdict_record` is the only writer of all four, and keeps them in step
in one transaction.

Changed checks. A rubric version's checks are rows of that version: an edited rubric is a new
version with new check rows. A verdict belongs to one check row, and the counts are kept per
(judge, response, rubric version, tier). The leaderboard reads only the counts of each
question's final version (`rubrics.services.final_version`: the latest frozen one), so the
verdicts of a check that was edited or deleted in a later version are never used in scores.
`key` (sha256 of judge, template version, check text and response text) is what lets a
re-run skip the model: a check whose text did not change finds its earlier verdict by key and
records a copy for the new version's row without a call (`verdict_find`).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from .verdicts.scoring import ScoringSettings, SettingsInvalid


class Setting(models.TextChoices):
    MULTIMODAL = "multimodal", "multimodal"
    TEXT_ONLY = "text_only", "text-only"


class VerdictValue(models.TextChoices):
    MEETS = "meets"
    PARTIALLY_MEETS = "partially_meets", "partially meets"
    MISSING = "missing"
    CONTRADICTS = "contradicts"
    FAILED = "failed"  # no verdict could be obtained: counted and shown, never scored


class EvaluatedModel(models.Model):
    name = models.CharField(max_length=100, unique=True)
    provider = models.CharField(max_length=50, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    llm_model = models.ForeignKey(
        "llm.LLMModel", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Response(models.Model):
    model = models.ForeignKey(EvaluatedModel, on_delete=models.PROTECT, related_name="responses")
    question = models.ForeignKey(
        "annotation.FinalQuestion", on_delete=models.PROTECT, related_name="responses"
    )
    setting = models.CharField(max_length=10, choices=Setting.choices)
    text = models.TextField()
    model_version = models.CharField(max_length=200, blank=True)  # as the provider reports it
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "question", "setting"], name="response_per_model_question"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} on {self.question_id} ({self.setting})"


class Judge(models.Model):
    name = models.CharField(max_length=100, unique=True)
    llm_model = models.ForeignKey(
        "llm.LLMModel", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Verdict(models.Model):
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="verdicts")
    response = models.ForeignKey(Response, on_delete=models.PROTECT, related_name="verdicts")
    check_row = models.ForeignKey(
        "rubrics.RubricCheck", on_delete=models.PROTECT, related_name="verdicts"
    )
    verdict = models.CharField(max_length=16, choices=VerdictValue.choices)
    rationale = models.TextField(blank=True)
    template_version = models.CharField(max_length=64, blank=True)
    judge_model_version = models.CharField(max_length=200, blank=True)
    key = models.CharField(max_length=64, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            # One verdict per check row: the same key (same check text) in two versions is two
            # rows, because each version's counts must include it.
            models.UniqueConstraint(
                fields=["judge", "response", "check_row"], name="verdict_per_check"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verdict} by {self.judge_id} on {self.response_id}/{self.check_row_id}"


class ResponseTierCount(models.Model):
    """How many checks of one tier of one rubric version got each verdict from one judge on
    one response. Written only by `verdict_record`, in the verdict's transaction."""

    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="+")
    response = models.ForeignKey(Response, on_delete=models.PROTECT, related_name="tier_counts")
    version = models.ForeignKey("rubrics.RubricVersion", on_delete=models.PROTECT, related_name="+")
    tier = models.CharField(max_length=20)
    meets = models.PositiveIntegerField(default=0)
    partially = models.PositiveIntegerField(default=0)
    missing = models.PositiveIntegerField(default=0)
    contradicts = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "response", "version", "tier"], name="tier_count_unique"
            ),
        ]
        indexes = [models.Index(fields=["judge", "version"], name="tier_count_judge_version")]

    def __str__(self) -> str:
        return f"counts {self.judge_id}/{self.response_id}/{self.version_id}/{self.tier}"


class CheckVerdictCount(models.Model):
    """How many responses of one setting got each verdict from one judge on one check row: the
    check report's difficulty (judging/checks/report.py) without reading the verdicts. Written
    only by `verdict_record`, in the verdict's transaction."""

    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="+")
    check_row = models.ForeignKey(
        "rubrics.RubricCheck", on_delete=models.PROTECT, related_name="verdict_counts"
    )
    setting = models.CharField(max_length=10, choices=Setting.choices)
    meets = models.PositiveIntegerField(default=0)
    partially = models.PositiveIntegerField(default=0)
    missing = models.PositiveIntegerField(default=0)
    contradicts = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "setting", "check_row"], name="check_count_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"counts {self.judge_id}/{self.check_row_id}/{self.setting}"


class CheckAgreement(models.Model):
    """Over every judge, on one check row in one setting: the responses that two or more
    judges graded (failed verdicts are no verdict here), and those on which they gave
    different verdicts; the check report's disagreement. Written only by `verdict_record`,
    which locks the row while it compares the judges' verdicts."""

    check_row = models.ForeignKey(
        "rubrics.RubricCheck", on_delete=models.PROTECT, related_name="agreements"
    )
    setting = models.CharField(max_length=10, choices=Setting.choices)
    shared = models.PositiveIntegerField(default=0)
    differing = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["check_row", "setting"], name="check_agreement_unique"),
        ]

    def __str__(self) -> str:
        return f"agreement {self.check_row_id}/{self.setting}"


COUNT_FIELD = {
    VerdictValue.MEETS: "meets",
    VerdictValue.PARTIALLY_MEETS: "partially",
    VerdictValue.MISSING: "missing",
    VerdictValue.CONTRADICTS: "contradicts",
    VerdictValue.FAILED: "failed",
}


class ScoringConfig(models.Model):
    """The benchmark's scoring settings (section 4 of the rubric method): lambda, mu and the
    tier weights. One row (pk 1), edited by admins; every leaderboard and table reads it through
    `judging.verdicts.services.scoring_settings`. Without the row, the method's defaults apply."""

    partial_credit = models.FloatField("lambda (credit of partially meets)", default=0.5)
    mu = models.FloatField("mu (score of contradicts)", default=-2.0)
    weight_answer_critical = models.FloatField(default=0.6)
    weight_valuable = models.FloatField(default=0.3)
    weight_context = models.FloatField(default=0.1)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "scoring settings"
        verbose_name_plural = "scoring settings"

    def __str__(self) -> str:
        return (
            f"lambda {self.partial_credit}, mu {self.mu}, weights "
            f"{self.weight_answer_critical}/{self.weight_valuable}/{self.weight_context}"
        )

    def as_settings(self) -> ScoringSettings:
        """Raises SettingsInvalid (every problem named) for values the method forbids."""
        return ScoringSettings(
            lambda_=self.partial_credit,
            mu=self.mu,
            weights=(self.weight_answer_critical, self.weight_valuable, self.weight_context),
        )

    def clean(self) -> None:
        try:
            self.as_settings()
        except SettingsInvalid as exc:
            raise ValidationError(str(exc)) from exc


class SpotCheck(models.Model):
    """A (response, check) pair drawn for a person to grade with the same four verdicts: one on
    which judges disagree (`disagreement`: good for finding problems, biased as an estimate),
    or one of the random audit (`audit`: a uniform sample stratified by tier and domain, what
    corrected scores rest on), or both when the audit drew a pair already drawn. Graders never
    see the judges' verdicts (the page does not send them), nor the first grade of a pair that
    `double` asks a second person to grade (the human-human ceiling)."""

    response = models.ForeignKey(Response, on_delete=models.PROTECT, related_name="spot_checks")
    check_row = models.ForeignKey(
        "rubrics.RubricCheck", on_delete=models.PROTECT, related_name="spot_checks"
    )
    drawn_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    drawn_at = models.DateTimeField(default=timezone.now)
    # One grader at a time: a lease, like review claims.
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_until = models.DateTimeField(null=True, blank=True)
    verdict = models.CharField(
        max_length=16,
        blank=True,
        choices=[(v, label) for v, label in VerdictValue.choices if v != VerdictValue.FAILED],
    )
    note = models.TextField(blank=True)
    graded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    graded_at = models.DateTimeField(null=True, blank=True)
    disagreement = models.BooleanField(default=True)  # drawn among the judges' disagreements
    audit = models.BooleanField(default=False)  # in the random audit sample
    double = models.BooleanField(default=False)  # a second person grades it too, independently
    second_verdict = models.CharField(
        max_length=16,
        blank=True,
        choices=[(v, label) for v, label in VerdictValue.choices if v != VerdictValue.FAILED],
    )
    second_graded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    second_graded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["response", "check_row"], name="spot_check_once"),
            models.CheckConstraint(
                condition=(
                    models.Q(second_graded_at__isnull=True, second_verdict="")
                    | models.Q(
                        double=True,
                        graded_at__isnull=False,
                        second_graded_at__isnull=False,
                        second_graded_by__isnull=False,
                    )
                    & ~models.Q(second_verdict="")
                ),
                name="spot_check_second_grade_whole",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(graded_at__isnull=True, verdict="")
                    | models.Q(graded_at__isnull=False, graded_by__isnull=False)
                    & ~models.Q(verdict="")
                ),
                name="spot_check_graded_whole",
            ),
        ]

    def __str__(self) -> str:
        return f"spot check {self.pk} ({self.verdict or 'ungraded'})"


# ---------------------------------------------------------------------------------------------
# Releases (issue 25): a frozen benchmark version. judging/releases/ creates and reads them.

RELEASE_NAME_MAX = 40
RELEASE_NOTES_MAX = 2000
# Letters, digits, spaces and . _ - + ( ): "v1.0", "v1.1-rc", "v1.0 (demo)". No slash, so a
# name is one piece of a URL.
RELEASE_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9 ._+()-]*$"


class ReleaseFrozen(Exception):
    """A release, or a question of one, was asked to change or go: releases never change."""


class FrozenQuerySet(models.QuerySet):
    """Rows that are written once: `update()` and `delete()` refuse (the admin and any code
    path that would change a release go through these or through `save()`/`delete()`)."""

    def update(self, **kwargs):
        raise ReleaseFrozen("a release never changes; cut a new one instead")

    def delete(self):
        raise ReleaseFrozen("a release is never deleted")


class Release(models.Model):
    """A frozen version of the benchmark, cut by an admin from the state of the moment
    (judging.releases.services.create_release): its questions (ReleaseQuestion rows), the
    scoring parameters and the domain list, with a content hash over all of it. Never changes:
    `save()` of a saved release, `delete()` and the queryset's `update()`/`delete()` raise
    ReleaseFrozen, and the rubric versions, questions and images it holds cannot be deleted
    (PROTECT)."""

    name = models.CharField(
        max_length=RELEASE_NAME_MAX,
        unique=True,
        validators=[
            RegexValidator(
                RELEASE_NAME_RE,
                "A release name starts with a letter or digit and holds only letters, digits, "
                "spaces and . _ - + ( ), for example v1.0.",
            )
        ],
    )
    notes = models.TextField(blank=True, max_length=RELEASE_NOTES_MAX)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # "sha256:<64 hex>" of the canonical JSON of the frozen record (releases/services.py says
    # what it covers).
    content_hash = models.CharField(max_length=71)
    # The scoring parameters in force when it was cut (ScoringConfig's fields).
    partial_credit = models.FloatField("lambda (credit of partially meets)")
    mu = models.FloatField("mu (score of contradicts)")
    weight_answer_critical = models.FloatField()
    weight_valuable = models.FloatField()
    weight_context = models.FloatField()
    domains = models.JSONField(default=list)  # sorted domain names of its questions

    objects = FrozenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:  # created only by create_release, with no pk given
            raise ReleaseFrozen(f"release {self.name} never changes; cut a new one instead")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ReleaseFrozen(f"release {self.name} is never deleted")

    def scoring_settings(self) -> ScoringSettings:
        return ScoringSettings(
            lambda_=self.partial_credit,
            mu=self.mu,
            weights=(self.weight_answer_critical, self.weight_valuable, self.weight_context),
        )


class ReleaseQuestion(models.Model):
    """One question of a release, frozen: the final question, its text, entity, domain and
    popularity as they were, its rubric version (a frozen one), and its image with the source
    id, the dataset it came from and its licence. Written once, with its release."""

    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="questions")
    question = models.ForeignKey(
        "annotation.FinalQuestion", on_delete=models.PROTECT, related_name="+"
    )
    version = models.ForeignKey("rubrics.RubricVersion", on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    entity = models.CharField(max_length=500)
    domain = models.CharField(max_length=100)
    popularity = models.CharField(max_length=8)
    image = models.ForeignKey("annotation.Image", on_delete=models.PROTECT, related_name="+")
    source_id = models.CharField(max_length=200)
    # Where the image came from (an import batch's dataset, split, revision and licence; empty
    # for images uploaded without one).
    source = models.CharField(max_length=100, blank=True)
    source_split = models.CharField(max_length=40, blank=True)
    source_revision = models.CharField(max_length=100, blank=True)
    licence = models.CharField(max_length=100, blank=True)
    n_checks = models.PositiveIntegerField()  # live checks of the version
    stage = models.CharField(max_length=16)  # the version's stage

    objects = FrozenQuerySet.as_manager()

    class Meta:
        ordering = ["release_id", "source_id"]
        constraints = [
            models.UniqueConstraint(fields=["release", "question"], name="release_question_once"),
            models.UniqueConstraint(fields=["release", "source_id"], name="release_source_once"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} in release {self.release_id}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ReleaseFrozen("a question of a release never changes")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ReleaseFrozen("a question of a release is never deleted")
