"""Stage 3: the evaluated models' responses, the judges' verdicts, and per-tier verdict counts.

Scores come from SQL over `ResponseTierCount`, not from loops over `Verdict` rows
(../shared/DESIGN.md, Performance). `judging.services.verdict_record` is the only writer of
both, and keeps them in step in one transaction.

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

from django.db import models
from django.utils import timezone


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


COUNT_FIELD = {
    VerdictValue.MEETS: "meets",
    VerdictValue.PARTIALLY_MEETS: "partially",
    VerdictValue.MISSING: "missing",
    VerdictValue.CONTRADICTS: "contradicts",
    VerdictValue.FAILED: "failed",
}
