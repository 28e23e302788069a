"""Reading releases: which one, what it holds, and the questions a score is computed over.

A *scope* is a release or the working draft. Every function here that takes `release` takes
`None` (DRAFT) for the working draft: the live state, each question that is not dropped on its
final rubric version (the latest frozen one, `RubricVersion.objects.final_of`), as the
leaderboard has always scored. A release is its frozen rows: the questions it holds, dropped
since or not, each on the rubric version it froze.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery

from annotation.models import FinalQuestion
from rubrics.models import RubricCheck, RubricVersion

from ..models import Release, ReleaseQuestion

DRAFT = None  # the working draft (the live state), wherever a release is asked for


class ScopeQuestion(NamedTuple):
    """A question as scores read it: its id, domain and popularity, the rubric version its
    responses are scored on (None: no frozen version yet, so not scorable) and how many live
    checks that version has."""

    id: int
    domain: str
    popularity: str
    version_id: int | None
    n_checks: int | None


def latest_release() -> Release | None:
    """The release cut last, or None when none was cut."""
    return Release.objects.order_by("-created_at", "-id").first()


def releases() -> QuerySet[Release]:
    """Every release, newest first, with `n_questions` annotated."""
    return Release.objects.annotate(n_questions=Count("questions")).order_by("-created_at", "-id")


def release_named(name: str) -> Release | None:
    return Release.objects.filter(name=name).first()


def release_questions(release: Release) -> QuerySet[ReleaseQuestion]:
    """The frozen rows of a release, in source id order (code point order is applied by
    whoever needs bytes, e.g. the export)."""
    return ReleaseQuestion.objects.filter(release=release).order_by("source_id", "id")


def release_versions(release: Release | None) -> dict[int, int]:
    """{question id: rubric version id} of a scope. One query. For the draft, the questions
    not dropped that have a frozen version."""
    if release is None:
        return dict(
            RubricVersion.objects.final()
            .filter(rubric__question__dropped_at__isnull=True)
            .values_list("rubric__question_id", "id")
            .order_by()
        )
    return dict(
        ReleaseQuestion.objects.filter(release=release)
        .values_list("question_id", "version_id")
        .order_by()
    )


def release_checks(release: Release) -> QuerySet[RubricCheck]:
    """The live checks (not deleted) of every rubric version the release holds, ordered by
    version and position: what its scores are computed over. One query."""
    return RubricCheck.objects.filter(
        version_id__in=ReleaseQuestion.objects.filter(release=release).values("version_id"),
        deleted_at__isnull=True,
    ).order_by("version_id", "position", "id")


def scope_questions(release: Release | None = DRAFT) -> list[ScopeQuestion]:
    """The questions a leaderboard of this scope scores, in id order. One query."""
    if release is not None:
        return [
            ScopeQuestion(*row)
            for row in ReleaseQuestion.objects.filter(release=release)
            .order_by("question_id")
            .values_list("question_id", "domain", "popularity", "version_id", "n_checks")
        ]
    final_version = Subquery(
        RubricVersion.objects.final_of(OuterRef("rubric")).values("id")[:1],
        output_field=IntegerField(),
    )
    n_checks = Subquery(
        RubricCheck.objects.filter(version_id=OuterRef("final_version"), deleted_at__isnull=True)
        .values("version_id")
        .annotate(n=Count("id"))
        .values("n"),
        output_field=IntegerField(),
    )
    return [
        ScopeQuestion(*row)
        for row in FinalQuestion.objects.filter(dropped_at__isnull=True)
        .annotate(final_version=final_version)
        .annotate(n_checks=n_checks)
        .order_by("id")
        .values_list("id", "image__domain", "image__popularity", "final_version", "n_checks")
    ]


def scope_label(release: Release | None) -> str:
    """How pages name a scope: the release's name, or "working draft"."""
    return "working draft" if release is None else release.name
