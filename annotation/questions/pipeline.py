"""The pipeline's counts: images and candidates by state, and what each stage waits for (the
pipeline page and the admin's home)."""

from __future__ import annotations

from collections import Counter

from django.db.models import Count, Exists, OuterRef

from rubrics.models import Rubric, RubricVersion

from ..models import (
    Candidate,
    CandidateStatus,
    FinalQuestion,
    Image,
    ImageStatus,
    image_status,
)


def pipeline_counts() -> dict:
    images: Counter = Counter()
    generate = 0  # needing candidates, with a confirmed entity (generation waits for it)
    entities: Counter = Counter()  # unconfirmed: "propose" (none yet) or "confirm" (proposed)
    for (
        n_pending,
        n_accepted,
        has_question,
        confirmed,
        entity,
    ) in Image.objects.with_counts().values_list(
        "n_pending", "n_accepted", "has_question", "entity_confirmed", "entity"
    ):
        status = image_status(n_pending=n_pending, n_accepted=n_accepted, has_question=has_question)
        images[status] += 1
        generate += status == ImageStatus.NEEDS_CANDIDATES and confirmed
        if not confirmed:
            entities["confirm" if entity else "propose"] += 1
    candidates = dict(Candidate.objects.order_by().values_list("status").annotate(n=Count("id")))
    return {
        "images": [(status.label, status.value, images.get(status, 0)) for status in ImageStatus],
        "images_total": sum(images.values()),
        "candidates": [
            (status.label, status.value, candidates.get(status.value, 0))
            for status in CandidateStatus
        ],
        "candidates_total": sum(candidates.values()),
        "questions": FinalQuestion.objects.count(),
        # The guard's wait is the images card's "Awaiting the guard": one rule (image_status).
        "guard": images.get(ImageStatus.AWAITING_GUARD, 0),
        "generate": generate,
        "entities": entities,
    }


def pipeline_waits(counts: dict) -> list[tuple[str, str, int, str]]:
    """What each stage waits for: (label, key, count, launcher key or "" for a human round).
    Two queries (besides the counts) whatever the number of images or rubrics."""
    guard = counts["guard"]
    live = FinalQuestion.objects.filter(dropped_at__isnull=True)
    build = live.filter(~Exists(RubricVersion.objects.filter(rubric__question=OuterRef("pk"))))
    # The same rule as the launchers' (RubricQuerySet.with_waits), counted in SQL.
    waits: Counter = Counter(
        dict(
            Rubric.objects.live()
            .with_waits()
            .values("waits_for")
            .annotate(n=Count("pk"))
            .values_list("waits_for", "n")
            .order_by()
        )
    )
    return [
        (
            "CRAG-MM images without an entity (propose entities)",
            "propose_entities",
            counts["entities"]["propose"],
            "propose_entities",
        ),
        (
            "Proposed entities waiting for an annotator (/entities/)",
            "confirm_entities",
            counts["entities"]["confirm"],
            "",
        ),
        (
            "Images needing candidates, entity confirmed (generation, A.1)",
            "generate",
            counts["generate"],
            "generate",
        ),
        ("Images with accepted candidates and no question (guard, A.2)", "guard", guard, "guard"),
        ("Questions without a rubric (build, A.3)", "build", build.count(), "build"),
        (
            "Rubrics waiting for refinement 1 (latest: LLM draft)",
            "refine1",
            waits["refine1"],
            "refine1",
        ),
        ("Rubrics waiting for human round 1", "human1", waits["human1"], ""),
        (
            "Rubrics waiting for refinement 2 (latest frozen: human round 1)",
            "refine2",
            waits["refine2"],
            "refine2",
        ),
        ("Rubrics waiting for human round 2", "human2", waits["human2"], ""),
        ("Final rubrics (human round 2 done)", "final", waits["final"], ""),
    ]
