"""Stage 2: one rubric per final question, as a chain of versions.

A version keeps its meta-rubric (with its snippets) and its compiled checks as rows. LLM and
imported versions are written once. A human version starts as a copy of its parent's checks and
takes the reviser's edits until the round is completed, when it is frozen; every edit is also
kept as a `CheckEdit` row (who, when, before, after), so nothing is lost and any two versions
can be compared.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class Stage(models.TextChoices):
    LLM_DRAFT = "llm_draft", "LLM draft"
    LLM_REFINED_1 = "llm_refined_1", "LLM refinement 1"
    HUMAN_1 = "human_1", "human round 1"
    LLM_REFINED_2 = "llm_refined_2", "LLM refinement 2"
    HUMAN_2 = "human_2", "human round 2 (final)"
    IMPORTED = "imported", "imported"


STAGE_ORDER = [
    Stage.IMPORTED,
    Stage.LLM_DRAFT,
    Stage.LLM_REFINED_1,
    Stage.HUMAN_1,
    Stage.LLM_REFINED_2,
    Stage.HUMAN_2,
]
HUMAN_STAGES = (Stage.HUMAN_1, Stage.HUMAN_2)
# The human round that a version of this stage waits for (none: an LLM job comes first, or done).
HUMAN_ROUND_AFTER: dict[str, str] = {
    Stage.IMPORTED: Stage.HUMAN_1,
    Stage.LLM_REFINED_1: Stage.HUMAN_1,
    Stage.LLM_REFINED_2: Stage.HUMAN_2,
}


# What a rubric waits for, by its versions (RubricQuerySet.with_waits): the LLM refinement
# rounds, the human rounds, or nothing more (final).
WAITS = ("refine1", "human1", "refine2", "human2", "final")


class RubricQuerySet(models.QuerySet):
    """The one place that says, in SQL, which version of a rubric is final and what a rubric
    waits for: the job launchers, the pipeline page and the leaderboard all read it here."""

    def live(self) -> RubricQuerySet:
        """Rubrics of questions that are not dropped."""
        return self.filter(question__dropped_at__isnull=True)

    def with_waits(self) -> RubricQuerySet:
        """Annotates `latest_stage` (the newest version's stage), `open_draft` (a human round in
        progress), `final_stage` (the stage of the final version, the latest frozen one) and
        `waits_for`, one of WAITS or "" (no version yet)."""
        versions = RubricVersion.objects.filter(rubric=models.OuterRef("pk")).order_by("-id")
        return self.annotate(
            latest_stage=models.Subquery(versions.values("stage")[:1]),
            open_draft=models.Exists(versions.filter(frozen_at__isnull=True)),
            final_stage=models.Subquery(
                versions.filter(frozen_at__isnull=False).values("stage")[:1]
            ),
        ).annotate(
            waits_for=models.Case(
                # The draft is the latest: refinement 1 takes it (a draft is always frozen).
                models.When(latest_stage=Stage.LLM_DRAFT, then=models.Value("refine1")),
                # A human round in progress waits for its reviser.
                models.When(
                    open_draft=True, latest_stage=Stage.HUMAN_1, then=models.Value("human1")
                ),
                models.When(open_draft=True, then=models.Value("human2")),
                models.When(
                    final_stage__in=[Stage.LLM_REFINED_1, Stage.IMPORTED],
                    then=models.Value("human1"),
                ),
                models.When(final_stage=Stage.HUMAN_1, then=models.Value("refine2")),
                models.When(final_stage=Stage.LLM_REFINED_2, then=models.Value("human2")),
                models.When(final_stage=Stage.HUMAN_2, then=models.Value("final")),
                default=models.Value(""),
                output_field=models.CharField(),
            )
        )

    def waiting_for(self, step: str) -> RubricQuerySet:
        """The rubrics whose next step is `step` (one of WAITS)."""
        if step not in WAITS:
            raise ValueError(f"unknown step {step!r}; expected one of {', '.join(WAITS)}")
        return self.with_waits().filter(waits_for=step)


class Rubric(models.Model):
    question = models.OneToOneField(
        "annotation.FinalQuestion", on_delete=models.PROTECT, related_name="rubric"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = RubricQuerySet.as_manager()

    def __str__(self) -> str:
        return f"rubric of question {self.question_id}"


class RubricVersionQuerySet(models.QuerySet):
    def latest_per_rubric(self) -> RubricVersionQuerySet:
        newer = RubricVersion.objects.filter(
            rubric=models.OuterRef("rubric"), pk__gt=models.OuterRef("pk")
        )
        return self.filter(~models.Exists(newer))

    def final(self) -> RubricVersionQuerySet:
        """Each rubric's final version: what the benchmark uses now, the latest frozen one (a
        human round in progress is not part of it until it is complete)."""
        newer = RubricVersion.objects.filter(
            rubric=models.OuterRef("rubric"), frozen_at__isnull=False, pk__gt=models.OuterRef("pk")
        )
        return self.filter(frozen_at__isnull=False).filter(~models.Exists(newer))

    def final_of(self, rubric: Any) -> RubricVersionQuerySet:
        """The frozen versions of `rubric` (a Rubric, an id or an OuterRef), newest first:
        `.first()` is its final version, `.values("id")[:1]` a subquery of it."""
        return self.filter(rubric=rubric, frozen_at__isnull=False).order_by("-id")


class RubricVersion(models.Model):
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="versions")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    meta_rubric = models.JSONField()
    made_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    made_by_model = models.CharField(max_length=200, blank=True)  # an LLM, or "import"
    created_at = models.DateTimeField(default=timezone.now)
    frozen_at = models.DateTimeField(null=True, blank=True)
    # Optimistic locking: every edit moves it on by one; a save made against an older value
    # is refused.
    revision = models.PositiveIntegerField(default=0)
    # A refinement that follows a human round: what it did with each change of that round
    # (rubrics/human_changes.py, outcomes: carried into which item and checks, or dropped and
    # why). None for every other version.
    human_changes = models.JSONField(null=True, blank=True)

    objects = RubricVersionQuerySet.as_manager()

    class Meta:
        ordering = ["rubric_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["rubric", "stage"], name="one_version_per_stage"),
        ]

    def __str__(self) -> str:
        return f"{self.rubric} {self.stage}"

    @property
    def is_human(self) -> bool:
        return self.stage in HUMAN_STAGES


class Origin(models.TextChoices):
    COMPILED = "compiled", "compiled from the meta-rubric"
    EDITED = "edited", "edited by hand"
    ADDED = "added", "added by hand"


class RubricCheck(models.Model):
    version = models.ForeignKey(RubricVersion, on_delete=models.PROTECT, related_name="checks")
    position = models.PositiveIntegerField()
    check_id = models.CharField(max_length=100)  # the compiler's id, or H<n> when added by hand
    kind = models.CharField(max_length=20)
    tier = models.CharField(max_length=20)
    secondary = models.BooleanField(default=False)
    source = models.CharField(max_length=100, blank=True)  # meta item or meta-insight id
    rule = models.CharField(max_length=40, blank=True)  # the compiler rule that made it
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.COMPILED)
    text = models.TextField()
    snippets = models.JSONField(default=list)
    threshold = models.PositiveIntegerField(null=True, blank=True)
    options = models.JSONField(null=True, blank=True)
    steps = models.JSONField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    delete_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["version_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["version", "check_id"], name="check_id_per_version"),
        ]

    def __str__(self) -> str:
        return f"{self.check_id} ({self.tier})"


class CheckEdit(models.Model):
    """One edit of a human version, as it happened. Append-only."""

    class Op(models.TextChoices):
        EDIT = "edit", "edited the text"
        RETIER = "retier", "changed the tier"
        DELETE = "delete", "deleted"
        RESTORE = "restore", "restored"
        ADD = "add", "added"
        MOVE = "move", "moved"
        COMPLETE = "complete", "completed the round"

    version = models.ForeignKey(RubricVersion, on_delete=models.PROTECT, related_name="edits")
    check_row = models.ForeignKey(
        RubricCheck, null=True, blank=True, on_delete=models.PROTECT, related_name="edits"
    )
    editor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    op = models.CharField(max_length=10, choices=Op.choices)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    revision = models.PositiveIntegerField()  # the version's revision this edit produced
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.op} by {self.editor_id} at {self.at:%Y-%m-%d %H:%M}"


class RevisionClaim(models.Model):
    """One reviser per rubric per human round, for a while."""

    version = models.OneToOneField(RubricVersion, on_delete=models.CASCADE, related_name="claim")
    reviser = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"claim of {self.version_id} by {self.reviser_id}"
