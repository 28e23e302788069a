"""Checks that carry no information (pure numpy, no Django).

Per check of a final rubric, across the evaluated models' responses graded by one judge:

  difficulty      the mean credit the models got on it (meets 1, partially meets lambda,
                  missing and contradicts 0): 1 when every model meets it, 0 when none does
  discrimination  the point-biserial correlation, across models, between a model's credit on
                  the check and its benchmark score without the check's question (the mean
                  Gamut over its other scored questions): near 0 or negative, the check does
                  not separate the models that do well from those that do not
  disagreement    over the responses that two or more judges graded on it, the share on
                  which they gave different verdicts

Flagged: met by every model, met by none (with at least MIN_MODELS models graded), and a
disagreement far above the rest (more than two standard deviations above the mean over the
checks with one, on at least MIN_SHARED responses).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

MIN_MODELS = 2
MIN_SHARED = 3
MET_BY_ALL = "met by every model"
MET_BY_NONE = "met by no model"
DISAGREED = "judges disagree far more than on other checks"


@dataclass
class CheckInfo:
    check: int  # the RubricCheck's pk
    question: int
    models: int
    difficulty: float | None
    discrimination: float | None
    disagreement: float | None
    shared: int  # responses graded by two or more judges
    flags: list[str] = field(default_factory=list)


def credit(verdict: str, lam: float) -> float | None:
    return {"meets": 1.0, "partially_meets": lam, "missing": 0.0, "contradicts": 0.0}.get(verdict)


def point_biserial(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r between the credits x and the rest scores y; None without spread."""
    if len(x) < MIN_MODELS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


# The columns of the counts that `check_flags` reads, one row per check: the judge's verdicts
# on it by kind (failed ones left out), and over every judge, the responses two or more judges
# graded on it (`shared`) and those on which they gave different verdicts (`differing`).
COUNTS = (
    "check",
    "question",
    "meets",
    "partially",
    "missing",
    "contradicts",
    "shared",
    "differing",
)


def disagreement_limit(rates: list[float]) -> float | None:
    """Above it, a check's disagreement is far above the rest: two standard deviations over
    the mean of every check's (in check order); None with fewer than two."""
    return float(np.mean(rates) + 2 * np.std(rates)) if len(rates) >= 2 else None


@dataclass
class Flagged:
    checks: int  # every check counted
    flagged: int
    infos: list[CheckInfo]  # the flagged ones, or every one, in check order


def check_flags(
    counts: np.ndarray,
    *,
    lam: float = 0.5,
    rates: list[float] | None = None,
    flagged_only: bool = True,
) -> Flagged:
    """Difficulty, disagreement and the flags of each check from its counts (an integer array
    of COUNTS columns), over arrays: a full-size benchmark has some 60,000 checks.
    Discrimination is left None (it needs each model's credit: `discrimination`). A
    disagreement is far above the rest against `rates`, the disagreements of every check in
    check order (by default those of `counts`: give them when `counts` is a few checks of
    many)."""
    counts = np.asarray(counts, dtype=np.int64).reshape(-1, len(COUNTS))
    counts = counts[np.argsort(counts[:, 0], kind="stable")]
    check, question, meets, partially, missing, contradicts, shared, differing = counts.T
    models = meets + partially + missing + contradicts
    with np.errstate(divide="ignore", invalid="ignore"):
        difficulty = np.where(models > 0, (meets + lam * partially) / models, np.nan)
        disagreement = np.where(shared >= MIN_SHARED, differing / shared, np.nan)
    met_all = (models >= MIN_MODELS) & (difficulty == 1.0)
    met_none = (models >= MIN_MODELS) & (difficulty == 0.0)
    if rates is None:
        rates = disagreement[~np.isnan(disagreement)].tolist()
    disagreed = np.zeros(len(counts), dtype=bool)
    limit = disagreement_limit(rates)
    if limit is not None:
        disagreed = ~np.isnan(disagreement) & (disagreement > limit)
    flagged = met_all | met_none | disagreed
    infos = []
    for i in np.flatnonzero(flagged) if flagged_only else range(len(counts)):
        info = CheckInfo(
            check=int(check[i]),
            question=int(question[i]),
            models=int(models[i]),
            difficulty=None if np.isnan(difficulty[i]) else float(difficulty[i]),
            discrimination=None,
            disagreement=None if np.isnan(disagreement[i]) else float(disagreement[i]),
            shared=int(shared[i]),
        )
        for flag, on in ((MET_BY_ALL, met_all), (MET_BY_NONE, met_none), (DISAGREED, disagreed)):
            if on[i]:
                info.flags.append(flag)
        infos.append(info)
    return Flagged(checks=len(counts), flagged=int(flagged.sum()), infos=infos)


def discrimination(
    credits: list[tuple[int, int, float]], rest_score: dict[tuple[int, int], float]
) -> float | None:
    """One check's point-biserial from its (model, question, credit) rows: against each
    model's rest score, over the models that have one."""
    values = np.array([value for _, _, value in credits])
    rests = np.array([rest_score.get((model, question), np.nan) for model, question, _ in credits])
    keep = ~np.isnan(rests)
    return point_biserial(values[keep], rests[keep])


def check_information(
    graded: list[tuple[int, int, int, str]],
    rest_score: dict[tuple[int, int], float],
    judged: list[tuple[int, int, int, str]],
    *,
    lam: float = 0.5,
) -> list[CheckInfo]:
    """Every figure of every check from the verdict rows themselves. graded: (check,
    question, model, verdict) by the judge in question; rest_score[(model, question)]: the
    model's mean Gamut over its other scored questions; judged: (check, response, judge,
    verdict) by every judge, for the disagreement. The pages count in the database instead
    (report.py); this is the same arithmetic on rows, for checking it by hand."""
    kinds: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_check: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    questions: dict[int, int] = {}
    for check, question, model, verdict in graded:
        value = credit(verdict, lam)
        questions[check] = question
        kinds[check][verdict] += 1
        if value is not None:
            by_check[check].append((model, question, value))
    verdicts: dict[tuple[int, int], list[str]] = defaultdict(list)
    for check, response, _judge, verdict in judged:
        if verdict != "failed":
            verdicts[(check, response)].append(verdict)
    shared: dict[int, int] = defaultdict(int)
    differing: dict[int, int] = defaultdict(int)
    for (check, _response), given in verdicts.items():
        if len(given) >= 2:
            shared[check] += 1
            differing[check] += len(set(given)) > 1
    counts = [
        (
            check,
            questions.get(check, 0),
            kinds[check]["meets"],
            kinds[check]["partially_meets"],
            kinds[check]["missing"],
            kinds[check]["contradicts"],
            shared[check],
            differing[check],
        )
        for check in set(questions) | set(shared)
    ]
    out = check_flags(np.array(counts), lam=lam, flagged_only=False).infos
    for info in out:
        info.discrimination = discrimination(by_check.get(info.check, []), rest_score)
    return out


def rest_scores(
    scores: dict[str, np.ndarray], question_ids: list[int], model_ids: dict[str, int]
) -> dict[tuple[int, int], float]:
    """(model id, question id) -> the model's mean Gamut over its other scored questions, from
    a leaderboard's per-question scores (nan where not scored)."""
    out: dict[tuple[int, int], float] = {}
    for name, row in scores.items():
        scored = ~np.isnan(row)
        total, count = float(np.nansum(row)), int(scored.sum())
        if count < 2:
            continue
        model = model_ids[name]
        for index in np.flatnonzero(scored):
            out[(model, question_ids[index])] = (total - float(row[index])) / (count - 1)
    return out
