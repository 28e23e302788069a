"""Scores corrected by the random human audit: prediction-powered inference (PPI++,
Angelopoulos, Duchi and Zrnic 2023) at the level of questions, with the authors' `ppi_py`.

Pure: no Django. The leaderboard gives, per model and setting, the judge's score of every
scored question (`judge_scores`) and the audited questions (`AuditedQuestion`: the judge's
verdict on each of the question's checks and the people's on the audited ones).

Why questions. The Gamut score is a mean over questions and a question's checks are not
independent (one answer, one rubric), so the unit of the correction is the question, as it is
the unit of the leaderboard's bootstrap: each audited question gives one labelled sample
(Y_j, Yhat_j), and ppi_py's interval treats the samples as independent, which questions are.

Y_j, an estimate of the question's score had people graded every check. Yhat_j is the judge's
score of the question (all checks). Replacing the judge's verdict by the people's on the k
audited checks of the n gives G_mix; the judge's error on those k checks is G_mix - Yhat_j, and
since the audited checks are a random subset of the question's checks, the error on all n is
estimated by scaling it: Y_j = Yhat_j + (n / k) (G_mix - Yhat_j). Exact in expectation when the
score is linear in the verdicts (no "contradicts", whose weight |mu| moves the tier's
denominator), first-order otherwise.

Weights 1/n. The audit draws pairs, not questions, so a question of 12 checks is twice as
likely to be audited as one of 6; weighting each audited question by 1/n undoes that, so the
weighted labelled questions stand for the scored questions as a whole (ppi_py's `w`).

The corrected score is ppi_py's power-tuned estimate, lambda * mean(Yhat over every scored
question) + weighted mean(Y - lambda * Yhat over the audited ones), lambda chosen from the data
(lambda = 1 is plain PPI, 0 the people alone), with its 95% normal interval. A tier score is
corrected the same way over the checks of that tier.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .scoring import TIERS, ScoringSettings, Tier, Verdict, response_score, tier_score

ALPHA = 0.05
Z = 1.959963984540054  # the normal quantile of a 95% two-sided interval
MIN_QUESTIONS = 2  # fewer audited questions give no interval at all


@dataclass(frozen=True)
class AuditedQuestion:
    """One audited question of one response: the judge's verdict on every check of its final
    rubric version (check id -> (tier, verdict)), and the people's on the audited checks."""

    judge: Mapping[int, tuple[Tier, Verdict]]
    people: Mapping[int, Verdict]


@dataclass(frozen=True)
class Corrected:
    """A score corrected by the audit, on the [-1, 1] scale."""

    estimate: float | None
    low: float | None
    high: float | None
    pairs: int  # audited (response, check) pairs it rests on
    questions: int  # audited questions

    def as_dict(self, scale: float = 100) -> dict:
        def scaled(x: float | None) -> float | None:
            return None if x is None else scale * x

        return {
            "estimate": scaled(self.estimate),
            "ci_low": scaled(self.low),
            "ci_high": scaled(self.high),
            "pairs": self.pairs,
            "questions": self.questions,
        }


NONE = Corrected(None, None, None, 0, 0)


def _score(verdicts: Sequence[tuple[Tier, Verdict]], settings: ScoringSettings, tier: Tier | None):
    counts: dict[str, dict[str, int]] = {}
    for t, verdict in verdicts:
        if tier is None or t == tier:
            by_verdict = counts.setdefault(t, {})
            by_verdict[verdict] = by_verdict.get(verdict, 0) + 1
    if tier is not None:
        return tier_score(counts[tier], settings)
    return response_score(counts, settings).gamut


def labelled(
    questions: Sequence[AuditedQuestion], settings: ScoringSettings, tier: Tier | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(Y, Yhat, weights, pairs) of the audited questions for the Gamut score (tier None) or
    one tier's score: see the module's docstring. Questions with no audited check among the
    score's checks are left out."""
    ys, yhats, weights, pairs = [], [], [], 0
    for question in questions:
        checks = [c for c, (t, _) in question.judge.items() if tier is None or t == tier]
        audited = [c for c in checks if c in question.people]
        if not audited:
            continue
        judge = [question.judge[c] for c in checks]
        mixed = [
            (question.judge[c][0], question.people.get(c, question.judge[c][1])) for c in checks
        ]
        yhat = _score(judge, settings, tier)
        error = _score(mixed, settings, tier) - yhat
        ys.append(yhat + len(checks) / len(audited) * error)
        yhats.append(yhat)
        weights.append(1 / len(checks))
        pairs += len(audited)
    return np.array(ys), np.array(yhats), np.array(weights), pairs


def corrected(
    judge_scores: np.ndarray,
    questions: Sequence[AuditedQuestion],
    settings: ScoringSettings,
    tier: Tier | None = None,
) -> Corrected:
    """The PPI++ estimate of the mean score over the scored questions (`judge_scores`, the
    judge's score of each, no nan) and its 95% interval."""
    y, yhat, w, pairs = labelled(questions, settings, tier)
    if len(y) < MIN_QUESTIONS or not len(judge_scores):
        return Corrected(None, None, None, pairs, len(y))
    # ppi_py imports numba, scikit-learn and statsmodels (seconds): only when there is an audit.
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    unlabelled = np.asarray(judge_scores, dtype=float)
    # PPI++'s lambda divides by the judge scores' variance: when they are all equal there is
    # nothing to tune, and plain PPI (lambda = 1) is the estimate.
    lam = None if np.ptp(np.concatenate([yhat, unlabelled])) > 0 else 1.0
    estimate = ppi_mean_pointestimate(y, yhat, unlabelled, lam=lam, w=w)
    low, high = ppi_mean_ci(y, yhat, unlabelled, alpha=ALPHA, lam=lam, w=w)
    return Corrected(
        float(np.ravel(estimate)[0]),
        float(np.ravel(low)[0]),
        float(np.ravel(high)[0]),
        pairs,
        len(y),
    )


def all_scores(
    judge_gamut: np.ndarray,
    judge_tiers: Mapping[str, np.ndarray],
    questions: Sequence[AuditedQuestion],
    settings: ScoringSettings,
) -> dict[str, Corrected]:
    """The corrected Gamut score ("gamut") and tier scores of one model in one setting."""
    out = {"gamut": corrected(judge_gamut, questions, settings)}
    for tier in TIERS:
        out[tier] = corrected(judge_tiers[tier], questions, settings, tier)
    return out


def credit_spread(pairs: Sequence[tuple[Verdict, Verdict]], settings: ScoringSettings) -> float:
    """The variance of (people's credit - judge's credit) over graded (judge, people) verdict
    pairs: what one audited pair adds to the rectifier's variance, roughly (a check weighs
    about 1/n of its question's score and is scaled by n)."""
    if len(pairs) < 2:
        return math.nan
    diffs = np.array([settings.value(h) - settings.value(j) for j, h in pairs])
    return float(diffs.var(ddof=1))


def predicted_width(spread: float, pairs_per_board: float) -> float | None:
    """The 95% interval width (x100) that this many audited pairs per model and setting should
    give a corrected Gamut score, from the spread of the judge's errors seen so far. The
    judge-only term (over every question) is left out: it is small beside the rectifier's."""
    if not pairs_per_board or math.isnan(spread):
        return None
    return 100 * 2 * Z * math.sqrt(spread / pairs_per_board)
