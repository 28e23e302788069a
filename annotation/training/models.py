"""Annotator training and auditing: gold items, trainees' standing, audits of resolved reviews
and of completed rubric rounds (imported into `models`, so they are the app's models).

A gold item is a `Candidate` with the status "gold" and an expert's decision beside it: it is
drawn, shown and submitted exactly as any candidate, but its reviews are `GoldReview` rows, so
they never fill one of a real candidate's two review slots, and a gold candidate is never open,
disputed or accepted, so it never reaches adjudication, the guard or promotion.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

SHARE = [MinValueValidator(0.0), MaxValueValidator(1.0)]


class QualityConfig(models.Model):
    """The team's rates, one row edited by admins in /admin/ (absent: the defaults here)."""

    gold_rate = models.FloatField(
        default=0.1,
        validators=SHARE,
        help_text="share of an annotator's next candidates that are gold items (0 to 1)",
    )
    training_pass_share = models.FloatField(
        default=0.8,
        validators=SHARE,
        help_text="share of the training items a trainee must decide as the expert did",
    )
    review_audit_rate = models.FloatField(
        default=0.05,
        validators=SHARE,
        help_text="share of each annotator's resolved reviews drawn for an adjudicator's audit",
    )
    round_audit_rate = models.FloatField(
        default=0.1,
        validators=SHARE,
        help_text="share of each reviser's completed rubric rounds drawn for another's audit",
    )

    class Meta:
        verbose_name = "training and audit settings"
        verbose_name_plural = "training and audit settings"

    def __str__(self) -> str:
        return "training and audit settings"

    @classmethod
    def current(cls) -> QualityConfig:
        return cls.objects.filter(pk=1).first() or cls(pk=1)


class GoldItem(models.Model):
    """The expert's answer for a gold candidate. Training items make up the training set."""

    candidate = models.OneToOneField(
        "annotation.Candidate", on_delete=models.PROTECT, related_name="gold"
    )
    decision = models.CharField(
        max_length=8, choices=[(v, v) for v in ("accept", "revise", "discard")]
    )
    revised_text = models.TextField(blank=True)
    reasons = models.JSONField(default=list, blank=True)
    note = models.TextField(help_text="shown to the annotator after they submit the item")
    training = models.BooleanField(default=False, help_text="part of the training set")
    active = models.BooleanField(default=True, help_text="still drawn into queues")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"gold item {self.pk} ({self.decision})"


class TrainingState(models.Model):
    """Where one annotator stands in training. A reset starts a new attempt: the gold reviews
    of earlier attempts stay, but only the current attempt's count."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="training_state"
    )
    attempt = models.PositiveIntegerField(default=1)
    passed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    changed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"training of {self.user_id} (attempt {self.attempt})"


class GoldReview(models.Model):
    """An annotator's answer to a gold item, with whether it took the expert's decision."""

    gold = models.ForeignKey(GoldItem, on_delete=models.PROTECT, related_name="gold_reviews")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="gold_reviews"
    )
    attempt = models.PositiveIntegerField(default=1)  # the training attempt it was given in
    decision = models.CharField(max_length=8)
    revised_text = models.TextField(blank=True)
    reasons = models.JSONField(default=list, blank=True)
    comment = models.TextField(blank=True)
    seconds = models.PositiveIntegerField(null=True, blank=True)
    agrees = models.BooleanField()
    submission_key = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["gold", "annotator", "attempt"], name="gold_review_once_per_attempt"
            ),
        ]
        indexes = [models.Index(fields=["annotator", "created_at"])]

    def __str__(self) -> str:
        return f"gold review {self.pk}: {self.decision} on {self.gold_id}"


class AuditVerdict(models.TextChoices):
    AGREE = "agree", "agree"
    OVERTURN = "overturn", "overturn"
    ACCEPT = "accept", "accept"
    FLAG = "flag", "flag"


class _Audit(models.Model):
    """What every audit holds: when it was drawn, and who gave which verdict, why and when
    (pending while the verdict is empty)."""

    drawn_at = models.DateTimeField(default=timezone.now)
    auditor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    verdict = models.CharField(max_length=8, blank=True)
    note = models.TextField(blank=True)
    audited_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["id"]


class ReviewAudit(_Audit):
    """A resolved review drawn for an adjudicator's audit; pending until a verdict is given."""

    review = models.OneToOneField(
        "annotation.Review", on_delete=models.PROTECT, related_name="audit"
    )
    annotator = models.ForeignKey(  # the audited person (the review's annotator)
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )

    class Meta(_Audit.Meta):
        constraints = [
            models.CheckConstraint(
                condition=models.Q(verdict="") | models.Q(verdict__in=["agree", "overturn"]),
                name="review_audit_verdict",
            ),
            models.CheckConstraint(
                condition=~models.Q(auditor=models.F("annotator")), name="review_audit_not_own"
            ),
        ]

    def __str__(self) -> str:
        return f"audit of review {self.review_id}: {self.verdict or 'pending'}"


class RoundAudit(_Audit):
    """A completed human rubric round drawn for a second reviser's audit."""

    version = models.OneToOneField(
        "rubrics.RubricVersion", on_delete=models.PROTECT, related_name="audit"
    )
    reviser = models.ForeignKey(  # who completed the round
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )

    class Meta(_Audit.Meta):
        constraints = [
            models.CheckConstraint(
                condition=models.Q(verdict="") | models.Q(verdict__in=["accept", "flag"]),
                name="round_audit_verdict",
            ),
            models.CheckConstraint(
                condition=~models.Q(auditor=models.F("reviser")), name="round_audit_not_own"
            ),
        ]

    def __str__(self) -> str:
        return f"audit of rubric round {self.version_id}: {self.verdict or 'pending'}"
