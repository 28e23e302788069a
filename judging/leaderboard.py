"""The leaderboard of one judge and one setting, from SQL over the per-tier verdict counts.

A constant number of queries whatever the number of models: the questions (with their final
rubric version and its number of checks), the models, the responses, and ONE aggregate over
`ResponseTierCount` restricted to each question's final version. The scores themselves are
judging/scoring.py's.

Per model, over the final questions that are not dropped:
  missing  no response from the model in this setting
  failed   a response with at least one failed verdict (shown, never scored as 0)
  pending  a response not yet judged on every check of its question's final rubric version
           (or whose question has no frozen rubric yet): not scored, counted
  scored   the rest; Gamut x100 is the mean over them, with a 95% percentile bootstrap
           interval over questions (fixed seed, so a page shows the same interval every time)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Count, Exists, IntegerField, OuterRef, Subquery, Sum

from annotation.models import FinalQuestion
from rubrics.models import RubricCheck, RubricVersion

from .models import EvaluatedModel, Judge, Response, ResponseTierCount
from .scoring import (
    DEFAULT_SETTINGS,
    FAILED,
    MISSING,
    TIERS,
    ResponseScore,
    ScoringSettings,
    Unscored,
    model_score,
    response_score,
)

RESAMPLES = 1000
SEED = 20240601


@dataclass
class Cell:
    """A model's result on a subset of questions (a domain, a popularity band)."""

    gamut: float | None  # x100
    scored: int
    questions: int


@dataclass
class Row:
    model: str
    gamut: float | None  # x100, mean over scored questions
    low: float | None  # 95% bootstrap interval, x100
    high: float | None
    tiers: dict[str, float | None]  # x100
    questions: int
    scored: int
    missing: int
    failed: int
    pending: int
    by_domain: dict[str, Cell] = field(default_factory=dict)
    by_popularity: dict[str, Cell] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "model": self.model, "gamut": self.gamut, "ci_low": self.low, "ci_high": self.high,
            **{tier: self.tiers.get(tier) for tier in TIERS},
            "questions": self.questions, "scored": self.scored, "missing": self.missing,
            "failed": self.failed, "pending": self.pending,
        }


EXPORT_COLUMNS = ["model", "gamut", "ci_low", "ci_high", *TIERS, "questions", "scored",
                  "missing", "failed", "pending"]


@dataclass
class Leaderboard:
    judge: str
    setting: str
    questions: int
    rows: list[Row]
    domains: list[str]
    popularities: list[str]


def bootstrap_interval(values: list[float], *, resamples: int = RESAMPLES,
                       seed: int = SEED) -> tuple[float, float] | tuple[None, None]:
    """95% percentile bootstrap interval of the mean, resampling the values (questions)."""
    if not values:
        return None, None
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _x100(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _final_version_of_rubric(rubric_ref: str) -> Subquery:
    return Subquery(
        RubricVersion.objects.filter(rubric=OuterRef(rubric_ref), frozen_at__isnull=False)
        .order_by("-id").values("id")[:1],
        output_field=IntegerField(),
    )


def _questions() -> list[tuple[int, str, str, int | None, int]]:
    """(id, domain, popularity, final version id, checks in it) of every non-dropped question."""
    n_checks = Subquery(
        RubricCheck.objects.filter(version_id=OuterRef("final_version"), deleted_at__isnull=True)
        .values("version_id").annotate(n=Count("id")).values("n"),
        output_field=IntegerField(),
    )
    return list(
        FinalQuestion.objects.filter(dropped_at__isnull=True)
        .annotate(final_version=_final_version_of_rubric("rubric"))
        .annotate(n_checks=n_checks)
        .order_by("id")
        .values_list("id", "image__domain", "image__popularity", "final_version", "n_checks")
    )


def _counts(judge: Judge, setting: str) -> dict[tuple[int, int], dict[str, dict[str, int]]]:
    """(model id, question id) -> tier -> verdict counts, for each question's final version."""
    newer_frozen = RubricVersion.objects.filter(
        rubric=OuterRef("version__rubric"), frozen_at__isnull=False, pk__gt=OuterRef("version")
    )
    rows = (
        ResponseTierCount.objects.filter(
            judge=judge, response__setting=setting,
            response__question__dropped_at__isnull=True, version__frozen_at__isnull=False,
        )
        .filter(~Exists(newer_frozen))
        .values("response__model_id", "response__question_id", "tier")
        .annotate(m=Sum("meets"), p=Sum("partially"), s=Sum("missing"), c=Sum("contradicts"),
                  f=Sum("failed"))
        .order_by()
    )
    out: dict[tuple[int, int], dict[str, dict[str, int]]] = defaultdict(dict)
    for r in rows:
        out[(r["response__model_id"], r["response__question_id"])][r["tier"]] = {
            "meets": r["m"], "partially_meets": r["p"], "missing": r["s"],
            "contradicts": r["c"], "failed": r["f"],
        }
    return out


PENDING = "pending"


def _outcome(counts: dict[str, dict[str, int]] | None, n_checks: int | None,
             settings: ScoringSettings) -> ResponseScore | Unscored | str:
    if not counts or not n_checks:
        return PENDING
    if any(c["failed"] for c in counts.values()):
        return FAILED
    if sum(sum(c.values()) for c in counts.values()) < n_checks:
        return PENDING
    return response_score(
        {tier: {k: v for k, v in c.items() if k != "failed"} for tier, c in counts.items()},
        settings,
    )


def _cell(outcomes: list) -> Cell:
    result = model_score(o for o in outcomes if o != PENDING)
    return Cell(gamut=_x100(result.gamut), scored=result.scored, questions=len(outcomes))


def leaderboard(*, judge: Judge, setting: str, settings: ScoringSettings = DEFAULT_SETTINGS,
                resamples: int = RESAMPLES, seed: int = SEED) -> Leaderboard:
    questions = _questions()
    responded = set(Response.objects.filter(setting=setting, question__dropped_at__isnull=True)
                    .values_list("model_id", "question_id"))
    model_ids = {m for m, _ in responded}
    models = [m for m in EvaluatedModel.objects.order_by("name") if m.pk in model_ids]
    counts = _counts(judge, setting)
    domains = sorted({q[1] for q in questions})
    popularities = [p for p in ("head", "torso", "tail") if any(q[2] == p for q in questions)]

    rows = []
    for model in models:
        outcomes = []
        by_domain: dict[str, list] = defaultdict(list)
        by_popularity: dict[str, list] = defaultdict(list)
        for qid, domain, popularity, _version, n_checks in questions:
            if (model.pk, qid) not in responded:
                outcome = MISSING
            else:
                outcome = _outcome(counts.get((model.pk, qid)), n_checks, settings)
            outcomes.append(outcome)
            by_domain[domain].append(outcome)
            by_popularity[popularity].append(outcome)
        scored = [o for o in outcomes if isinstance(o, ResponseScore)]
        result = model_score(o for o in outcomes if o != PENDING)
        low, high = bootstrap_interval([o.gamut for o in scored], resamples=resamples,
                                       seed=seed)
        rows.append(Row(
            model=model.name, gamut=_x100(result.gamut), low=_x100(low), high=_x100(high),
            tiers={tier: _x100(result.tiers.get(tier)) for tier in TIERS},
            questions=len(outcomes), scored=result.scored, missing=result.missing,
            failed=result.failed, pending=outcomes.count(PENDING),
            by_domain={d: _cell(by_domain[d]) for d in domains},
            by_popularity={p: _cell(by_popularity[p]) for p in popularities},
        ))
    rows.sort(key=lambda r: (r.gamut is None, -(r.gamut or 0), r.model))
    return Leaderboard(judge=judge.name, setting=setting, questions=len(questions), rows=rows,
                       domains=domains, popularities=popularities)
