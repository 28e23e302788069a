"""The random human audit: a uniform sample of (response, check) pairs, stratified by (tier,
domain), a share of it graded twice; its progress, and the interval width of a corrected Gamut
score that each sample size should give. The audit's pairs are spot checks (`audit=True`),
leased and graded as every spot check is (services.py); the leaderboard corrects its scores with
them (judging/leaderboard/ppi.py)."""

from __future__ import annotations

import bisect
import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from rubrics.models import RubricCheck
from rubrics.services import final_version_ids

from ..leaderboard.ppi import predicted_width
from ..models import Response, SpotCheck
from ..verdicts.services import scoring_settings
from . import judge_quality as quality
from .services import SpotCheckError

AUDIT_SIZES = (200, 500, 1_000, 2_000, 5_000)


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


def audit_report() -> dict:
    """The audit's progress and the 95% interval width of a corrected Gamut score that each
    sample size should give, from the judges' agreement with people seen so far."""
    spread, source, _ = quality.audit_spread(scoring_settings())
    boards = Response.objects.values("model_id", "setting").distinct().count()
    return {
        "progress": audit_progress(),
        "boards": boards,
        "spread_from": source or None,
        "spread": None if math.isnan(spread) else spread,  # nan: nothing graded yet
        "widths": [
            {
                "pairs": n,
                "per_board": n / boards if boards else None,
                "width": predicted_width(spread, n / boards) if boards else None,
            }
            for n in AUDIT_SIZES
        ],
    }
