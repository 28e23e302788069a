"""Paired comparisons of models on the same questions (pure numpy and scipy, no Django).

Two models' Gamut scores are compared on the questions both were scored on: the mean of the
per-question differences, its 95% interval and a two-sided p-value from the paired t test
(each question is one image, so the standard error over questions is the standard error
clustered on the image), and the p-values of every pair adjusted together by Holm's method
(which keeps the chance of any false "different" at 5% over all pairs). The smallest
difference the benchmark can tell apart is the one a paired test at alpha 0.05 finds with 80%
power, given the spread of the paired differences seen and the number of questions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.8


@dataclass(frozen=True)
class Paired:
    a: str
    b: str
    n: int  # questions both were scored on
    difference: float | None  # mean of a - b, x100
    low: float | None  # 95% interval, x100
    high: float | None
    sd: float | None  # standard deviation of the per-question differences, x100
    p: float | None  # two-sided, paired t test
    p_holm: float | None = None  # adjusted over every pair of the board

    @property
    def significant(self) -> bool:
        return self.p_holm is not None and self.p_holm < ALPHA

    def as_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "questions": self.n,
            "difference": self.difference,
            "ci_low": self.low,
            "ci_high": self.high,
            "p": self.p,
            "p_holm": self.p_holm,
            "significant": self.significant,
        }


def _paired_stats(x: np.ndarray, y: np.ndarray) -> list[tuple]:
    """(n, mean, low, high, sd, p) of x[k] - y[k] for each row k, x100, vectorised over the
    rows (a board's 91 pairs in one pass); nan marks a question not scored."""
    both = ~np.isnan(x) & ~np.isnan(y)
    d = np.where(both, (x - y) * 100, 0.0)
    n = both.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = d.sum(axis=1) / n
        squares = np.where(both, (d - mean[:, None]) ** 2, 0.0).sum(axis=1)
        sd = np.sqrt(squares / (n - 1))
        se = sd / np.sqrt(n)
        dof = np.maximum(n - 1, 1)
        half = stats.t.ppf(1 - ALPHA / 2, dof) * se
        p = 2 * stats.t.sf(np.abs(mean) / se, dof)
    out = []
    for k in range(len(n)):
        count = int(n[k])
        if count == 0:
            out.append((0, None, None, None, None, None))
        elif count == 1:
            out.append((1, float(mean[k]), None, None, None, None))
        elif se[k] == 0:
            # Every question gives the same difference: no spread to test against.
            m = float(mean[k])
            out.append((count, m, m, m, 0.0, 1.0 if m == 0 else 0.0))
        else:
            m = float(mean[k])
            out.append(
                (count, m, m - float(half[k]), m + float(half[k]), float(sd[k]), float(p[k]))
            )
    return out


def paired(a: str, b: str, x: np.ndarray, y: np.ndarray) -> Paired:
    """x and y: per-question scores in [-1, 1] on the same questions, nan where one was not
    scored. Figures x100."""
    (stats_row,) = _paired_stats(np.asarray(x, float)[None, :], np.asarray(y, float)[None, :])
    return Paired(a, b, *stats_row)


def holm(pvalues: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (None stays None): the k-th smallest of m p-values is
    multiplied by m - k + 1, made monotone, capped at 1."""
    known = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(known)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for k, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - k) * p))
        adjusted[i] = running
    return adjusted


def pairwise(names: list[str], scores: np.ndarray) -> list[Paired]:
    """Every pair of models (in the order of `names`: a before b), Holm-adjusted together.
    scores[model, question]: in [-1, 1], nan where not scored."""
    index = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    if not index:
        return []
    scores = np.asarray(scores, dtype=float)
    rows = _paired_stats(scores[[i for i, _ in index]], scores[[j for _, j in index]])
    adjusted = holm([row[5] for row in rows])
    return [
        Paired(names[i], names[j], *row, p_holm=q)
        for (i, j), row, q in zip(index, rows, adjusted, strict=True)
    ]


def minimum_detectable_difference(
    sd: float | None, n: int, *, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The difference (same units as sd) a two-sided paired test at `alpha` detects with
    `power` over n questions: (z_{1-alpha/2} + z_power) * sd / sqrt(n)."""
    if sd is None or n < 2:
        return None
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return float(z * sd / math.sqrt(n))
