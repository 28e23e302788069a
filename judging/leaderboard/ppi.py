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

from ..verdicts.scoring import TIERS, ScoringSettings, Tier, Verdict

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


VERDICT_INDEX = {"meets": 0, "partially_meets": 1, "missing": 2, "contradicts": 3}
Counts = tuple[np.ndarray, np.ndarray, np.ndarray]


def from_counts(judge_counts: np.ndarray, pairs: Sequence[tuple[int, int, int, int]]) -> Counts:
    """What the leaderboard has: the judge's counts[q, tier, verdict] of the audited
    questions (its own counts array, verdicts in VERDICT_INDEX order), and each graded pair as
    (question row, tier index, the judge's verdict index, people's verdict index). Returns the
    (judge, mixed, audited) arrays `question_counts` returns."""
    judge = np.asarray(judge_counts, dtype=float)
    mixed = judge.copy()
    audited = np.zeros(judge.shape[:2])
    if len(pairs):
        q, t, j, p = np.asarray(pairs, dtype=np.int64).T
        np.add.at(mixed, (q, t, j), -1)
        np.add.at(mixed, (q, t, p), 1)
        np.add.at(audited, (q, t), 1)
    return judge, mixed, audited


def question_counts(questions: Sequence[AuditedQuestion]) -> Counts:
    """judge[q, tier, verdict] counts over all checks, mixed[q, tier, verdict] with the
    people's verdicts in place of the judge's on the audited checks, audited[q, tier]."""
    tier_index = {t: i for i, t in enumerate(TIERS)}
    cells, judged, graded = [], [], []  # (question, tier) cell; judge's, then mixed verdict
    for q, question in enumerate(questions):
        for check, (tier, verdict) in question.judge.items():
            cells.append(q * len(TIERS) + tier_index[tier])
            judged.append(VERDICT_INDEX[verdict])
            person = question.people.get(check)
            graded.append(-1 if person is None else VERDICT_INDEX[person])
    cell, by_judge, by_people = (np.array(x, dtype=np.int64) for x in (cells, judged, graded))
    size = len(questions) * len(TIERS)
    judge = np.bincount(cell * 4 + by_judge, minlength=size * 4).reshape(-1, len(TIERS), 4)
    by_mixed = np.where(by_people < 0, by_judge, by_people)
    mixed = np.bincount(cell * 4 + by_mixed, minlength=size * 4).reshape(-1, len(TIERS), 4)
    audited = np.bincount(cell, weights=by_people >= 0, minlength=size).reshape(-1, len(TIERS))
    return judge.astype(float), mixed.astype(float), audited


def _scores(counts: np.ndarray, settings: ScoringSettings) -> tuple[np.ndarray, np.ndarray]:
    """scoring.tier_score and response_score over counts[q, tier, verdict]: the tier scores
    (nan for a tier without a check) and the Gamut score of each question."""
    m, p, s, c = (counts[..., i] for i in range(4))
    present = counts.sum(axis=-1) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        tiers = np.where(
            present,
            (m + settings.lambda_ * p + settings.mu * c) / (m + p + s + abs(settings.mu) * c),
            np.nan,
        )
        weights = np.where(present, np.array(settings.weights), 0.0)
        gamut = np.nansum(tiers * weights, axis=-1) / weights.sum(axis=-1)
    return tiers, gamut


def labelled(
    questions: Sequence[AuditedQuestion], settings: ScoringSettings, tier: Tier | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(Y, Yhat, weights, pairs) of the audited questions for the Gamut score (tier None) or
    one tier's score: see the module's docstring. Questions with no audited check among the
    score's checks are left out."""
    return _labelled(*question_counts(questions), settings, tier)


def _labelled(judge, mixed, audited, settings, tier):
    (judge_tiers, judge_gamut), (mixed_tiers, mixed_gamut) = (
        _scores(judge, settings),
        _scores(mixed, settings),
    )
    if tier is None:
        n, k, yhat, ymix = judge.sum(axis=(1, 2)), audited.sum(axis=1), judge_gamut, mixed_gamut
    else:
        t = TIERS.index(tier)
        n, k = judge[:, t].sum(axis=1), audited[:, t]
        yhat, ymix = judge_tiers[:, t], mixed_tiers[:, t]
    keep = k > 0
    n, k, yhat, ymix = n[keep], k[keep], yhat[keep], ymix[keep]
    return yhat + n / k * (ymix - yhat), yhat, 1 / n, int(k.sum())


def corrected(
    judge_scores: np.ndarray,
    questions: Sequence[AuditedQuestion],
    settings: ScoringSettings,
    tier: Tier | None = None,
) -> Corrected:
    """The PPI++ estimate of the mean score over the scored questions (`judge_scores`, the
    judge's score of each, no nan) and its 95% interval."""
    return _corrected(judge_scores, labelled(questions, settings, tier))


def _corrected(judge_scores: np.ndarray, samples: tuple) -> Corrected:
    y, yhat, w, pairs = samples
    if len(y) < MIN_QUESTIONS or not len(judge_scores):
        return Corrected(None, None, None, pairs, len(y))
    # ppi_py imports numba, scikit-learn and statsmodels (seconds): only when there is an audit.
    from ppi_py import ppi_mean_ci

    unlabelled = np.asarray(judge_scores, dtype=float)
    # PPI++'s lambda divides by the judge scores' variance: when they are all equal there is
    # nothing to tune, and plain PPI (lambda = 1) is the estimate.
    lam = None if np.ptp(np.concatenate([yhat, unlabelled])) > 0 else 1.0
    low, high = (
        float(np.ravel(x)[0]) for x in ppi_mean_ci(y, yhat, unlabelled, alpha=ALPHA, lam=lam, w=w)
    )
    # The interval is the normal one around ppi_py's point estimate (the same lambda), so its
    # middle is that estimate: one call instead of two (the tests compare both).
    return Corrected((low + high) / 2, low, high, pairs, len(y))


def all_scores(
    judge_gamut: np.ndarray,
    judge_tiers: Mapping[str, np.ndarray],
    counts: Counts,
    settings: ScoringSettings,
) -> dict[str, Corrected]:
    """The corrected Gamut score ("gamut") and tier scores of one model in one setting, from
    the judge's scores of every scored question and the audited questions' counts
    (`from_counts` or `question_counts`)."""
    out = {"gamut": _corrected(judge_gamut, _labelled(*counts, settings, None))}
    for tier in TIERS:
        out[tier] = _corrected(judge_tiers[tier], _labelled(*counts, settings, tier))
    return out


def rectifier_spread(counts: Counts, settings: ScoringSettings) -> float:
    """The variance of one audited question's weighted rectifier, w (Y - Yhat), over the
    audited questions of these counts (any judges and boards pooled): what the PPI interval's
    width is made of (plain PPI; PPI++ can only narrow it). nan for fewer than two."""
    y, yhat, w, _ = _labelled(*counts, settings, None)
    if len(y) < 2:
        return math.nan
    return float(np.var(w / w.sum() * len(w) * (y - yhat), ddof=1))


def predicted_width(spread: float, pairs_per_board: float) -> float | None:
    """The 95% interval width (x100) that this many audited pairs per model and setting should
    give a corrected Gamut score, from `rectifier_spread` of the audit so far (an audited
    question per pair: pairs rarely share a question). The judge-only term (over every
    question) is left out: it is small beside the rectifier's."""
    if not pairs_per_board or math.isnan(spread):
        return None
    return 100 * 2 * Z * math.sqrt(spread / pairs_per_board)
