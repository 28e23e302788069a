"""Human spot checks of the judges: drawing (response, check) pairs on which judges disagree,
or a random audit sample of pairs (`audit_draw`), leasing them to graders one at a time, grading
with the four verdicts (twice, by two people, for the audit's `double` share), and each judge's
agreement with people.

Blind on the server: `spot_check_view` returns what a grader may see (question, photo, response,
check, evidence) and nothing of the judges' verdicts.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from judging.models import Judge, Response, SpotCheck, Verdict, VerdictValue
from rubrics.models import RubricCheck
from rubrics.services import final_version_ids

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


# --- the random audit ------------------------------------------------------------------------


@dataclass
class Stratum:
    """The (response, check) pairs of one (tier, domain), never listed one by one (at full size
    there are millions): per question, its responses and its checks of the tier; pair i of the
    stratum is found from the running totals."""

    questions: list[tuple[list[int], list[int]]]  # (response ids, check ids)
    ends: list[int]  # running total of pairs, question by question

    @property
    def size(self) -> int:
        return self.ends[-1] if self.ends else 0

    def pair(self, i: int) -> tuple[int, int]:
        q = bisect.bisect_right(self.ends, i)
        responses, checks = self.questions[q]
        offset = i - (self.ends[q - 1] if q else 0)
        return responses[offset // len(checks)], checks[offset % len(checks)]


def audit_strata() -> dict[tuple[str, str], Stratum]:
    """The pairs the audit samples from, by (tier, domain): every response to a question not
    dropped, with every check of its question's final rubric version. Two queries."""
    checks: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for check_id, question_id, tier in (
        RubricCheck.objects.filter(
            version_id__in=final_version_ids(),
            deleted_at__isnull=True,
            version__rubric__question__dropped_at__isnull=True,
        )
        .order_by("id")
        .values_list("id", "version__rubric__question_id", "tier")
    ):
        checks[question_id][tier].append(check_id)
    responses: dict[int, list[int]] = defaultdict(list)
    domains: dict[int, str] = {}
    for response_id, question_id, domain in (
        Response.objects.filter(question_id__in=list(checks))
        .order_by("id")
        .values_list("id", "question_id", "question__image__domain")
    ):
        responses[question_id].append(response_id)
        domains[question_id] = domain
    strata: dict[tuple[str, str], Stratum] = {}
    for question_id in sorted(responses):
        for tier, ids in sorted(checks[question_id].items()):
            stratum = strata.setdefault((tier, domains[question_id]), Stratum([], []))
            stratum.questions.append((responses[question_id], ids))
            stratum.ends.append(stratum.size + len(responses[question_id]) * len(ids))
    return dict(sorted(strata.items()))


def allocate(sizes: dict[Any, int], count: int) -> dict[Any, int]:
    """Proportional allocation of `count` draws over strata of these sizes, by largest
    remainder (ties broken by the strata's order), never more than a stratum holds. With it the
    sample is self-weighting: every pair has (to rounding) the same chance to be drawn."""
    total = sum(sizes.values())
    count = min(count, total)
    if not total:
        return dict.fromkeys(sizes, 0)
    quotas = {key: count * size / total for key, size in sizes.items()}
    out = {key: math.floor(q) for key, q in quotas.items()}
    left = count - sum(out.values())
    for key in sorted(sizes, key=lambda k: (-(quotas[k] - out[k]), str(k)))[:left]:
        out[key] += 1
    return out


@transaction.atomic
def audit_draw(*, count: int, double_share: float, user: Any, seed: int | None = None) -> int:
    """Add up to `count` pairs to the random audit: a uniform sample, without replacement,
    of the (response, check) pairs of final rubric versions not in the audit yet, stratified by
    (tier, domain) with proportional allocation. A share `double_share` (0..1) of them is
    graded by two people independently. A pair already drawn as a disagreement joins the audit
    (its grade counts for both): leaving it out would bias the sample. Returns how many."""
    if count < 1:
        raise SpotCheckError("draw at least one pair for the audit")
    if not 0 <= double_share <= 1:
        raise SpotCheckError("the share graded twice must lie between 0 and 1")
    existing = {
        (r, c): (pk, audit)
        for pk, r, c, audit in SpotCheck.objects.values_list(
            "pk", "response_id", "check_row_id", "audit"
        )
    }
    in_audit = {pair for pair, (_, audit) in existing.items() if audit}
    strata = audit_strata()
    tier_of = {
        c: key for key, stratum in strata.items() for _, ids in stratum.questions for c in ids
    }
    audited: Counter[tuple[str, str]] = Counter(tier_of[c] for _, c in in_audit if c in tier_of)
    quotas = allocate({key: s.size - audited[key] for key, s in strata.items()}, count)
    rng = random.Random(seed)
    chosen: list[tuple[int, int]] = []
    for key, stratum in strata.items():
        # A uniform order of the stratum's pairs (random.sample on a range lists nothing),
        # skipping those in the audit already: a uniform sample of the others.
        order = rng.sample(range(stratum.size), min(stratum.size, quotas[key] + audited[key]))
        picked = [p for p in map(stratum.pair, order) if p not in in_audit]
        chosen += picked[: quotas[key]]
    chosen.sort()
    doubles = set(rng.sample(chosen, round(double_share * len(chosen))))
    for double in (False, True):
        joined = [existing[p][0] for p in chosen if p in existing and (p in doubles) == double]
        if joined:
            SpotCheck.objects.filter(pk__in=joined).update(audit=True, double=double)
    SpotCheck.objects.bulk_create(
        [
            SpotCheck(
                response_id=r,
                check_row_id=c,
                drawn_by=user,
                disagreement=False,
                audit=True,
                double=(r, c) in doubles,
            )
            for r, c in chosen
            if (r, c) not in existing
        ],
        batch_size=500,
    )
    return len(chosen)


def audit_progress() -> dict[str, int]:
    """The audit's pairs: drawn, graded once, to be graded twice, graded twice."""
    audit = SpotCheck.objects.filter(audit=True)
    return {
        "pairs": audit.count(),
        "graded": audit.filter(graded_at__isnull=False).count(),
        "double": audit.filter(double=True).count(),
        "graded_twice": audit.filter(second_graded_at__isnull=False).count(),
    }
