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


def check_information(
    graded: list[tuple[int, int, int, str]],
    rest_score: dict[tuple[int, int], float],
    judged: list[tuple[int, int, int, str]],
    *,
    lam: float = 0.5,
) -> list[CheckInfo]:
    """graded: (check, question, model, verdict) by the judge in question; rest_score[(model,
    question)]: the model's mean Gamut over its other scored questions; judged: (check,
    response, judge, verdict) by every judge, for the disagreement."""
    by_check: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    questions: dict[int, int] = {}
    for check, question, model, verdict in graded:
        value = credit(verdict, lam)
        questions[check] = question
        if value is not None:
            by_check[check].append((model, question, value))
    verdicts: dict[tuple[int, int], list[str]] = defaultdict(list)
    for check, response, _judge, verdict in judged:
        if verdict != "failed":
            verdicts[(check, response)].append(verdict)
    compared: dict[int, list[bool]] = defaultdict(list)
    for (check, _response), given in verdicts.items():
        if len(given) >= 2:
            compared[check].append(len(set(given)) > 1)
    out = []
    for check in sorted(set(questions) | set(compared)):
        rows = by_check.get(check, [])
        credits = np.array([value for _, _, value in rows])
        rests = np.array([rest_score.get((model, question), np.nan) for model, question, _ in rows])
        keep = ~np.isnan(rests)
        shared = compared.get(check, [])
        info = CheckInfo(
            check=check,
            question=questions.get(check, 0),
            models=len(rows),
            difficulty=float(credits.mean()) if len(credits) else None,
            discrimination=point_biserial(credits[keep], rests[keep]),
            disagreement=sum(shared) / len(shared) if len(shared) >= MIN_SHARED else None,
            shared=len(shared),
        )
        if info.models >= MIN_MODELS and info.difficulty == 1.0:
            info.flags.append(MET_BY_ALL)
        if info.models >= MIN_MODELS and info.difficulty == 0.0:
            info.flags.append(MET_BY_NONE)
        out.append(info)
    rates = np.array([i.disagreement for i in out if i.disagreement is not None])
    if len(rates) >= 2:
        limit = rates.mean() + 2 * rates.std()
        for info in out:
            if info.disagreement is not None and info.disagreement > limit:
                info.flags.append(DISAGREED)
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
