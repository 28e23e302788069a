"""Human spot checks of the judges: drawing (response, check) pairs on which judges disagree
(the random audit's sample is drawn in audit.py), leasing them to graders one at a time, grading
with the four verdicts (twice, by two people, for the audit's `double` share), and each judge's
agreement with people.

Blind on the server: `spot_check_view` returns what a grader may see (question, photo, response,
check, evidence) and nothing of the judges' verdicts.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from core.text import MAX_SPOT_NOTE
from rubrics.services import final_version_ids

from ..models import Judge, SpotCheck, Verdict, VerdictValue

LEASE = timedelta(minutes=30)
GRADES = [v for v in VerdictValue.values if v != VerdictValue.FAILED]
PASSING = {VerdictValue.MEETS, VerdictValue.PARTIALLY_MEETS}


class SpotCheckError(ValueError):
    """A spot check that cannot be drawn, claimed or graded as asked."""


def disagreements() -> list[tuple[int, int]]:
    """(response id, check id) pairs of final rubric versions that at least two judges graded
    with different (non-failed) verdicts, and that are not drawn yet."""
    rows = (
        Verdict.objects.exclude(verdict=VerdictValue.FAILED)
        .filter(
            check_row__version_id__in=final_version_ids(),
            response__question__dropped_at__isnull=True,
        )
        .values("response_id", "check_row_id")
        .annotate(judges=Count("judge_id", distinct=True), kinds=Count("verdict", distinct=True))
        .filter(judges__gte=2, kinds__gte=2)
        .values_list("response_id", "check_row_id")
    )
    drawn = set(SpotCheck.objects.values_list("response_id", "check_row_id"))
    return sorted(pair for pair in rows if pair not in drawn)


@transaction.atomic
def spot_checks_draw(*, count: int, user: Any, seed: int | None = None) -> int:
    """Draw up to `count` new spot checks at random among the disagreements. Returns how many
    were drawn (fewer when fewer disagreements are left)."""
    if count < 1:
        raise SpotCheckError("draw at least one spot check")
    pool = disagreements()
    chosen = random.Random(seed).sample(pool, min(count, len(pool)))
    SpotCheck.objects.bulk_create(
        [SpotCheck(response_id=r, check_row_id=c, drawn_by=user) for r, c in sorted(chosen)],
        ignore_conflicts=True,
    )
    return len(chosen)


def spot_check_held(*, user: Any, now: datetime | None = None) -> SpotCheck | None:
    """The spot check this grader holds and may still grade, read only (what a visit of the
    page shows; spot_check_claim renews it, or takes the next)."""
    now = now or timezone.now()
    return SpotCheck.objects.filter(
        _waiting_for(user), claimed_by=user, claimed_until__gt=now
    ).first()


def spot_check_claim(*, user: Any, now: datetime | None = None) -> SpotCheck | None:
    """The grader's current spot check (renewed), or the next ungraded one nobody holds."""
    now = now or timezone.now()
    with transaction.atomic():
        mine = SpotCheck.objects.filter(
            _waiting_for(user), claimed_by=user, claimed_until__gt=now
        ).first()
        if mine is not None:
            SpotCheck.objects.filter(pk=mine.pk).update(claimed_until=now + LEASE)
            return mine
        free = Q(claimed_by__isnull=True) | Q(claimed_until__lte=now) | Q(claimed_by=user)
        waiting = _waiting_for(user)
        for candidate in (
            SpotCheck.objects.filter(free, waiting).order_by("pk").values_list("pk", flat=True)[:20]
        ):
            # Conditional: two graders racing for one row, only one update takes it.
            if SpotCheck.objects.filter(free, waiting, pk=candidate).update(
                claimed_by=user, claimed_until=now + LEASE
            ):
                return SpotCheck.objects.get(pk=candidate)
    return None


def _waiting_for(user: Any) -> Q:
    """Spot checks this grader may grade: ungraded ones, and the double-graded audit pairs
    that another person graded first (the same person never grades a pair twice)."""
    second = Q(double=True, graded_at__isnull=False, second_graded_at__isnull=True) & ~Q(
        graded_by=user
    )
    return Q(graded_at__isnull=True) | second


@transaction.atomic
def spot_check_grade(
    *, spot_check_id: int, user: Any, verdict: str, note: str = "", now: datetime | None = None
) -> SpotCheck:
    """Grade a spot check the grader holds (or that nobody else holds). The first grade
    stands: a graded spot check is refused."""
    now = now or timezone.now()
    if verdict not in GRADES:
        raise SpotCheckError(f"choose one of {', '.join(GRADES)}")
    if len((note or "").strip()) > MAX_SPOT_NOTE:
        raise SpotCheckError(
            f"The note is longer than {MAX_SPOT_NOTE:,} characters "
            f"({len(note.strip()):,} sent): shorten it."
        )
    spot = SpotCheck.objects.select_for_update().filter(pk=spot_check_id).first()
    if spot is None:
        raise SpotCheckError("there is no such spot check")
    second = spot.double and spot.graded_at is not None
    if spot.graded_at is not None and not second or spot.second_graded_at is not None:
        raise SpotCheckError("this spot check was graded already")
    if second and spot.graded_by_id == user.pk:
        raise SpotCheckError("a second grade must come from another person")
    if (
        spot.claimed_by_id not in (None, user.pk)
        and spot.claimed_until is not None
        and spot.claimed_until > now
    ):
        raise SpotCheckError("another grader holds this spot check")
    if second:
        # The second person's note is kept with the first one's, marked.
        spot.second_verdict, spot.second_graded_by, spot.second_graded_at = verdict, user, now
        if note.strip():
            spot.note = "\n".join(filter(None, [spot.note, f"(second grader) {note.strip()}"]))
    else:
        spot.verdict, spot.note, spot.graded_by, spot.graded_at = verdict, note.strip(), user, now
    spot.claimed_by, spot.claimed_until = None, None
    spot.save()
    return spot


def spot_check_view(spot: SpotCheck) -> dict[str, Any]:
    """What the grader sees: never the judges' verdicts."""
    check = spot.check_row
    snippets = {s.get("id"): s for s in (check.version.meta_rubric or {}).get("snippets", [])}
    response = spot.response
    return {
        "spot": spot,
        "question": response.question,
        "image": response.question.image,
        "setting": response.setting,
        "response_text": response.text,
        "check": check,
        "evidence": [snippets[s] for s in check.snippets if s in snippets],
    }


@dataclass
class JudgeAgreement:
    judge: str
    graded: int  # graded spot checks this judge gave a verdict on
    exact: int  # same verdict as the person
    passing: int  # same side: (meets, partially meets) against (missing, contradicts)

    @property
    def exact_rate(self) -> float | None:
        return self.exact / self.graded if self.graded else None

    @property
    def passing_rate(self) -> float | None:
        return self.passing / self.graded if self.graded else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "graded": self.graded,
            "exact": self.exact,
            "exact_rate": self.exact_rate,
            "same_side": self.passing,
            "same_side_rate": self.passing_rate,
        }


def judge_agreement() -> list[JudgeAgreement]:
    """Each judge's agreement with the people's grades, over the graded spot checks it judged
    (failed verdicts left out). Two queries whatever the number of spot checks."""
    graded = {
        (r, c): v
        for r, c, v in SpotCheck.objects.filter(graded_at__isnull=False).values_list(
            "response_id", "check_row_id", "verdict"
        )
    }
    tally: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    if graded:
        responses = {r for r, _ in graded}
        for judge_id, r, c, verdict in (
            Verdict.objects.filter(response_id__in=responses)
            .exclude(verdict=VerdictValue.FAILED)
            .values_list("judge_id", "response_id", "check_row_id", "verdict")
        ):
            person = graded.get((r, c))
            if person is None:
                continue
            counts = tally[judge_id]
            counts[0] += 1
            counts[1] += verdict == person
            counts[2] += (verdict in PASSING) == (person in PASSING)
    return [
        JudgeAgreement(judge.name, *tally.get(judge.pk, [0, 0, 0]))
        for judge in Judge.objects.order_by("name")
    ]


def spot_check_progress() -> dict[str, int]:
    """Spot checks drawn, graded (a double-graded pair once both grades are in), left."""
    total = SpotCheck.objects.count()
    graded = SpotCheck.objects.filter(
        Q(double=False) | Q(second_graded_at__isnull=False), graded_at__isnull=False
    ).count()
    return {"total": total, "graded": graded, "left": total - graded}
