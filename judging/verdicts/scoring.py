"""Tier scores, the Gamut score of one response, and a model's score over its questions.

Pure Python: no Django import, so it is tested in milliseconds and shared by the
score_verdicts command, the judge jobs and the leaderboards. The contract is
../shared/spec/rubric-method.md, section 4.

Verdicts score meets 1, partially_meets lambda, missing 0, contradicts mu. With M, P, S, C the
counts of each verdict among one response's checks of one tier:

    s_t = (M + lambda*P + mu*C) / (M + P + S + |mu|*C)        in [-1, 1]

The Gamut score G of a response is the weighted mean of its tier scores over the tiers that have
at least one check, the weights (answer_critical, valuable, context) renormalised over those
tiers. lambda, mu and the weights are settings of a benchmark (ScoringSettings), not constants.

Entry points
    tier_score(counts, settings) -> float            raises Unscorable for a tier with no check
    response_score(counts_by_tier, settings)          -> ResponseScore(gamut, tiers)
    model_score(responses)                            -> ModelScore(gamut, tiers, questions,
                                                                    scored, missing, failed)

Choices
    - A response with no check at all raises Unscorable rather than returning None: it means a
      broken rubric or lost verdicts, and a None is too easy to drop silently from a mean. The
      same holds when every tier present has weight 0 (possible with custom weights).
    - model_score takes, per question, either a ResponseScore or MISSING (no response from the
      model) or FAILED (a verdict could not be obtained). Those are counted and reported, never
      scored as zero and never silently dropped: `gamut` is the mean over the scored questions
      and `missing`/`failed` say how many were not, so a reader sees an incomplete run.
    - Scores here are on the spec's [-1, 1] scale; reports multiply by 100.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

Verdict = Literal["meets", "partially_meets", "missing", "contradicts"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

Tier = Literal["answer_critical", "valuable", "context"]
TIERS: tuple[Tier, ...] = get_args(Tier)  # highest first, the order of the weights


class ScoringError(ValueError):
    """Base of this module's errors."""


class SettingsInvalid(ScoringError):
    """lambda, mu or the weights break the method's constraints."""


class Unscorable(ScoringError):
    """There is nothing to score: no check at all, or only tiers of weight 0."""


# ---------------------------------------------------------------------------------------------
# Settings


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class ScoringSettings:
    """lambda (credit of partially_meets), mu (score of contradicts) and the tier weights
    (answer_critical, valuable, context). Validated on construction: 0 < lambda < 1, mu < 0,
    every weight >= 0 and not all 0, all finite."""

    lambda_: float = 0.5
    mu: float = -2.0
    weights: tuple[float, float, float] = (0.6, 0.3, 0.1)

    def __post_init__(self) -> None:
        problems = []
        if not (_finite(self.lambda_) and 0 < self.lambda_ < 1):
            problems.append(f"lambda must lie strictly between 0 and 1, got {self.lambda_!r}")
        if not (_finite(self.mu) and self.mu < 0):
            problems.append(f"mu must be negative, got {self.mu!r}")
        weights = tuple(self.weights)
        if len(weights) != len(TIERS):
            problems.append(
                f"weights must be 3 numbers (answer_critical, valuable, context), "
                f"got {len(weights)}"
            )
        elif not all(_finite(w) and w >= 0 for w in weights):
            problems.append(f"weights must be finite and >= 0, got {weights!r}")
        elif not any(w > 0 for w in weights):
            problems.append("weights must not all be 0")
        if problems:
            raise SettingsInvalid("; ".join(problems))
        object.__setattr__(self, "weights", tuple(float(w) for w in weights))

    def weight(self, tier: Tier) -> float:
        return self.weights[TIERS.index(tier)]

    def value(self, verdict: Verdict) -> float:
        """The number a verdict scores: 1, lambda, 0 or mu."""
        return {
            "meets": 1.0,
            "partially_meets": self.lambda_,
            "missing": 0.0,
            "contradicts": self.mu,
        }[verdict]


DEFAULT_SETTINGS = ScoringSettings()


# ---------------------------------------------------------------------------------------------
# Counts


@dataclass(frozen=True)
class VerdictCounts:
    """How many checks of one tier of one response got each verdict (M, P, S, C)."""

    meets: int = 0
    partially_meets: int = 0
    missing: int = 0
    contradicts: int = 0

    def __post_init__(self) -> None:
        for verdict in VERDICTS:
            n = getattr(self, verdict)
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise ScoringError(f"count of {verdict} must be an integer >= 0, got {n!r}")

    @classmethod
    def of(cls, verdicts: Iterable[Verdict]) -> VerdictCounts:
        """Counts of a sequence of verdicts; an unknown verdict raises ScoringError."""
        counted = Counter(verdicts)
        unknown = set(counted) - set(VERDICTS)
        if unknown:
            raise ScoringError(
                f"unknown verdict(s) {sorted(map(str, unknown))}; expected one "
                f"of {', '.join(VERDICTS)}"
            )
        return cls(**{str(verdict): n for verdict, n in counted.items()})

    @property
    def total(self) -> int:
        return self.meets + self.partially_meets + self.missing + self.contradicts


CountsLike = VerdictCounts | Mapping[str, int]


def _counts(counts: CountsLike) -> VerdictCounts:
    if isinstance(counts, VerdictCounts):
        return counts
    unknown = set(counts) - set(VERDICTS)
    if unknown:
        raise ScoringError(
            f"unknown verdict(s) {sorted(map(str, unknown))}; expected one of {', '.join(VERDICTS)}"
        )
    return VerdictCounts(**counts)


# ---------------------------------------------------------------------------------------------
# Scores


def tier_score(counts: CountsLike, settings: ScoringSettings = DEFAULT_SETTINGS) -> float:
    """s_t = (M + lambda*P + mu*C) / (M + P + S + |mu|*C), in [-1, 1]. `counts` is a
    VerdictCounts or a mapping verdict -> count. A tier with no check has no score: raises
    Unscorable."""
    c = _counts(counts)
    if c.total == 0:
        raise Unscorable("a tier with no check has no score")
    numerator = c.meets + settings.lambda_ * c.partially_meets + settings.mu * c.contradicts
    denominator = c.meets + c.partially_meets + c.missing + abs(settings.mu) * c.contradicts
    return numerator / denominator


@dataclass(frozen=True)
class ResponseScore:
    """The Gamut score of one response and the scores of the tiers it has checks in (tiers
    with no check are absent from `tiers`, not 0). Both on the [-1, 1] scale."""

    gamut: float
    tiers: dict[Tier, float] = field(default_factory=dict)


def response_score(
    counts_by_tier: Mapping[str, CountsLike],
    settings: ScoringSettings = DEFAULT_SETTINGS,
) -> ResponseScore:
    """G = sum_t w_t s_t / sum_t w_t over the tiers with at least one check. A tier given
    with zero counts is treated as absent. Raises Unscorable for a response with no check at
    all (see the module's docstring) and ScoringError for an unknown tier."""
    unknown = set(counts_by_tier) - set(TIERS)
    if unknown:
        raise ScoringError(
            f"unknown tier(s) {sorted(map(str, unknown))}; expected one of {', '.join(TIERS)}"
        )
    tiers: dict[Tier, float] = {}
    for tier in TIERS:  # a fixed order, so the sum does not depend on the mapping's order
        if tier in counts_by_tier:
            counts = _counts(counts_by_tier[tier])
            if counts.total:
                tiers[tier] = tier_score(counts, settings)
    if not tiers:
        raise Unscorable("a response with no check has no Gamut score")
    total_weight = sum(settings.weight(tier) for tier in tiers)
    if total_weight == 0:
        raise Unscorable(f"every tier present ({', '.join(tiers)}) has weight 0")
    gamut = sum(settings.weight(tier) * score for tier, score in tiers.items()) / total_weight
    return ResponseScore(gamut=gamut, tiers=tiers)


class Unscored(enum.Enum):
    """A question that has no score: why."""

    MISSING = "missing"  # the model gave no response
    FAILED = "failed"  # a verdict could not be obtained

    def __repr__(self) -> str:
        return f"Unscored.{self.name}"


MISSING = Unscored.MISSING
FAILED = Unscored.FAILED


@dataclass(frozen=True)
class ModelScore:
    """A model's result over a set of questions, on the [-1, 1] scale.

    gamut      mean G over the scored questions; None when none was scored
    tiers      per tier, the mean tier score over the scored questions that have that tier
    questions  every question given, scored or not (= scored + missing + failed)
    scored, missing, failed
    """

    gamut: float | None
    tiers: dict[Tier, float]
    questions: int
    scored: int
    missing: int
    failed: int

    @property
    def complete(self) -> bool:
        return self.missing == 0 and self.failed == 0


def model_score(responses: Iterable[ResponseScore | Unscored]) -> ModelScore:
    """Aggregate one model's questions: each a ResponseScore, MISSING or FAILED. Missing and
    failed questions are counted, never scored as 0 or dropped unreported."""
    scores: list[ResponseScore] = []
    unscored: Counter[Unscored] = Counter()
    for response in responses:
        if isinstance(response, ResponseScore):
            scores.append(response)
        elif isinstance(response, Unscored):
            unscored[response] += 1
        else:
            raise ScoringError(f"expected a ResponseScore, MISSING or FAILED, got {response!r}")
    tiers: dict[Tier, float] = {}
    for tier in TIERS:
        values = [score.tiers[tier] for score in scores if tier in score.tiers]
        if values:
            tiers[tier] = math.fsum(values) / len(values)
    return ModelScore(
        gamut=math.fsum(s.gamut for s in scores) / len(scores) if scores else None,
        tiers=tiers,
        questions=len(scores) + sum(unscored.values()),
        scored=len(scores),
        missing=unscored[MISSING],
        failed=unscored[FAILED],
    )
