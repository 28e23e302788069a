"""The leaderboard of one judge and one setting, from SQL over the per-tier verdict counts.

Four queries whatever the number of models: the questions (with their final rubric version and
its number of checks), the responses, the models' names, and the judge's `ResponseTierCount`
rows in the setting. Each (judge, response, version, tier) has one count row, so no aggregate is
needed; the rows of versions other than a question's final one (the latest frozen one) are
skipped, so verdicts on checks that a later version changed or deleted are never scored.

The scores are judging/verdicts/scoring.py's formulas evaluated over numpy arrays
(`_response_scores`), with the operations of `tier_score` and `response_score` in the same order,
and the means taken with `math.fsum` as `model_score` takes them: the figures agree with
scoring.py's to rounding (bit for bit on Python 3.11), which judging/tests and
bench/leaderboard_bench.py check. Calling `response_score` once per response was most of the time
at 14 models x 1,813 questions; see bench/README.md, "Leaderboard benchmark".

Per model, over the final questions that are not dropped:
  missing  no response from the model in this setting
  failed   a response with at least one failed verdict (shown, never scored as 0)
  pending  a response not yet judged on every check of its question's final rubric version
           (or whose question has no frozen rubric yet): not scored, counted
  scored   the rest; Gamut x100 is the mean over them, with a 95% percentile bootstrap
           interval over questions (fixed seed, so a page shows the same interval every time;
           every model's resamples draw the same questions, see `bootstrap_intervals`), none
           under MIN_INTERVAL_N scored questions

Only comparable rows are ranked (RANK_MIN_SHARE of the most-scored model's questions); the
others are listed after them with `ranked` false.

With `audit=True` (the page and the API) each row also carries its scores corrected by the
random human audit (ppi.py), from two more queries over the audited pairs only.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.db import connections
from django.db.models import Case, IntegerField, Value, When

from ..models import (
    EvaluatedModel,
    Judge,
    Release,
    ReleaseQuestion,
    Response,
    ResponseTierCount,
    SpotCheck,
    Verdict,
    VerdictValue,
)
from ..releases.scope import release_field
from ..releases.selectors import scope_questions
from ..verdicts.scoring import (
    DEFAULT_SETTINGS,
    TIERS,
    ScoringError,
    ScoringSettings,
    Unscorable,
)
from . import ppi
from .comparisons import Paired, minimum_detectable_difference, pairwise

RESAMPLES = 1000
SEED = 20240601
# A bootstrap interval over fewer scored questions than this means nothing (one question: a
# point, "-15.6 - -15.6"): none is given, and the page says "n too small".
MIN_INTERVAL_N = 2
# A model is ranked beside the others only when it was scored on at least this share of the
# questions the most-scored model was scored on; below it, it is listed after the ranked rows,
# unranked, with "scored on n of N questions" (a mean over 1 question is not comparable with
# one over 4).
RANK_MIN_SHARE = 0.5


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
    # Not told apart from the model ranked next (Holm-adjusted paired test, p >= 0.05).
    indistinguishable_from_next: bool = False
    # Ranked among the comparable rows (RANK_MIN_SHARE); False: listed after them, unranked.
    ranked: bool = True
    rank: int | None = None
    # Corrected by the random audit (ppi.py): "gamut" and each tier; empty without an audit.
    corrected: dict[str, ppi.Corrected] = field(default_factory=dict)

    @property
    def audited(self) -> dict:
        """The corrected Gamut score x100 with its interval and the pairs it rests on."""
        return self.corrected.get("gamut", ppi.NONE).as_dict()

    def as_dict(self) -> dict:
        ppi_columns = {}
        for name in ("gamut", *TIERS):
            c = self.corrected.get(name, ppi.NONE).as_dict()
            ppi_columns[f"ppi_{name}"] = c["estimate"]
            ppi_columns[f"ppi_{name}_ci_low"] = c["ci_low"]
            ppi_columns[f"ppi_{name}_ci_high"] = c["ci_high"]
        gamut = self.corrected.get("gamut", ppi.NONE)
        return {
            "model": self.model,
            "gamut": self.gamut,
            "ci_low": self.low,
            "ci_high": self.high,
            **{tier: self.tiers.get(tier) for tier in TIERS},
            "questions": self.questions,
            "scored": self.scored,
            "missing": self.missing,
            "failed": self.failed,
            "pending": self.pending,
            "indistinguishable_from_next": self.indistinguishable_from_next,
            "ranked": self.ranked,
            **ppi_columns,
            "ppi_pairs": gamut.pairs,
            "ppi_questions": gamut.questions,
        }


EXPORT_COLUMNS = [
    "model",
    "gamut",
    "ci_low",
    "ci_high",
    *TIERS,
    "questions",
    "scored",
    "missing",
    "failed",
    "pending",
    "indistinguishable_from_next",
    "ranked",
    *(f"ppi_{name}{end}" for name in ("gamut", *TIERS) for end in ("", "_ci_low", "_ci_high")),
    "ppi_pairs",
    "ppi_questions",
]
COMPARISON_COLUMNS = [
    "a",
    "b",
    "questions",
    "difference",
    "ci_low",
    "ci_high",
    "p",
    "p_holm",
    "significant",
]


@dataclass
class Leaderboard:
    judge: str
    setting: str
    questions: int
    rows: list[Row]
    domains: list[str]
    popularities: list[str]
    # Every pair of models on the questions both were scored on (comparisons.py), the rows'
    # order; and the smallest difference the benchmark's size can tell apart (x100).
    comparisons: list[Paired] = field(default_factory=list)
    minimum_detectable_difference: float | None = None
    # Per model, the Gamut score of each question (in question id order; nan where not
    # scored): what paired comparisons across boards (the two settings) are computed from.
    scores: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    question_ids: list[int] = field(default_factory=list, repr=False)


def board_as_dict(board: Leaderboard, *, release: Release | None) -> dict:
    """The JSON of a board of `release` (None: the working draft), for the page's
    `?format=json` and the API."""
    return {
        "release": release_field(release),
        "judge": board.judge,
        "setting": board.setting,
        "questions": board.questions,
        "rows": [row.as_dict() for row in board.rows],
        "comparisons": [pair.as_dict() for pair in board.comparisons],
        "minimum_detectable_difference": board.minimum_detectable_difference,
    }


def bootstrap_interval(
    values: list[float] | np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float] | tuple[None, None]:
    """95% percentile bootstrap interval of the mean, resampling the values (questions)."""
    data = np.asarray(values, dtype=float).reshape(1, -1)
    return bootstrap_intervals(data, resamples=resamples, seed=seed)[0]


@functools.lru_cache(maxsize=4)
def _drawn(n: int, resamples: int, seed: int) -> np.ndarray:
    """How often each of n questions is drawn in each resample: the same for every board of n
    questions (the seed is fixed), so a worker draws it once (about 15 MB at 1,813 questions,
    half a second to make) and the settings and judges pages' boards share it. Read-only."""
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    draws += (np.arange(resamples) * n)[:, None]
    drawn = np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n)
    drawn = drawn.astype(float)
    drawn.flags.writeable = False
    return drawn


def bootstrap_intervals(
    scores: np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED
) -> list[tuple[float, float] | tuple[None, None]]:
    """The 95% percentile bootstrap interval of each row's mean, resampling the columns
    (questions) together: `scores[model, question]`, nan where the model has no score. Each
    resample draws n questions with `default_rng(seed).integers(0, n, size=(resamples, n))`;
    a row's mean in it is over the drawn questions it has a score for (a resample holding
    none of them is left out). For a row without nan this is the plain bootstrap of its
    values, with the same draws as `bootstrap_interval`.

    The draws are kept as a matrix of how often each question was drawn, so that the means
    of all rows are two matrix products, not a gather per row (which was most of the
    leaderboard's time at 14 models, bench/README.md)."""
    scores = np.asarray(scores, dtype=float)
    rows, n = scores.shape
    if not n:
        return [(None, None)] * rows
    drawn = _drawn(n, resamples, seed)
    known = ~np.isnan(scores)
    sums = drawn @ np.where(known, scores, 0.0).T  # [resample, row]
    counts = drawn @ known.T.astype(float)
    intervals: list[tuple[float, float] | tuple[None, None]] = []
    for r in range(rows):
        usable = counts[:, r] > 0
        if known[r].sum() < MIN_INTERVAL_N or not usable.any():
            intervals.append((None, None))
            continue
        means = sums[usable, r] / counts[usable, r]
        low, high = np.percentile(means, [2.5, 97.5])
        intervals.append((float(low), float(high)))
    return intervals


def _x100(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _questions(release: Release | None) -> list[tuple[int, str, str, int | None, int | None]]:
    """(id, domain, popularity, version id, checks in it) of every question of the scope: a
    release's frozen questions, or (None) every non-dropped question on its final version."""
    return [tuple(q) for q in scope_questions(release)]


# Verdict columns of the counts array, in ResponseTierCount's order.
_M, _P, _S, _C, _F = range(5)
# Outcome codes of a (model, question) cell.
SCORED, MISSING, FAILED, PENDING = range(4)


def _counts(
    judge: Judge,
    setting: str,
    final_versions: np.ndarray,
    question_ids: np.ndarray,
    model_ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """counts[model, question, tier, verdict] of each question's final version, and whether
    each (model, question) has any count row. `question_ids` and `model_ids` are sorted;
    `final_versions` is aligned with `question_ids` (0 where a question has none)."""
    tier_code = Case(
        *(When(tier=tier, then=Value(t)) for t, tier in enumerate(TIERS)),
        default=Value(-1),
        output_field=IntegerField(),
    )
    rows = (
        ResponseTierCount.objects.filter(judge=judge, response__setting=setting)
        .annotate(tier_code=tier_code)
        .values_list(
            "response__model_id",
            "response__question_id",
            "version_id",
            "tier_code",
            "meets",
            "partially",
            "missing",
            "contradicts",
            "failed",
        )
        .order_by()
    )
    # Straight from the cursor: the rows are integers already, and Django's per-value
    # converters (the Case's int()) were a fifth of the board's time at full size.
    sql, params = rows.query.sql_with_params()
    with connections[rows.db].cursor() as cursor:
        cursor.execute(sql, params)
        data = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 9)
    counts = np.zeros((len(model_ids), len(question_ids), len(TIERS), 5), dtype=np.int64)
    seen = np.zeros((len(model_ids), len(question_ids)), dtype=bool)
    if not len(data) or not len(question_ids) or not len(model_ids):
        return counts, seen
    q = np.minimum(np.searchsorted(question_ids, data[:, 1]), len(question_ids) - 1)
    m = np.minimum(np.searchsorted(model_ids, data[:, 0]), len(model_ids) - 1)
    # Only each (non-dropped) question's final version: verdicts on checks that a later
    # version changed or deleted are never scored.
    keep = (
        (question_ids[q] == data[:, 1])
        & (final_versions[q] == data[:, 2])
        & (model_ids[m] == data[:, 0])
    )
    data, q, m = data[keep], q[keep], m[keep]
    if (data[:, 3] < 0).any():
        raise ScoringError(f"a count row has an unknown tier; expected one of {', '.join(TIERS)}")
    counts[m, q, data[:, 3]] = data[:, 4:]
    seen[m, q] = True
    return counts, seen


def _response_scores(
    counts: np.ndarray, settings: ScoringSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """scoring.response_score over an array of counts [..., tier, verdict]: the tier scores,
    which tiers have a check, and the Gamut score. The same floating-point operations in the
    same order as scoring.tier_score and scoring.response_score, so the same results to the
    bit on Python 3.11 (whose sum() adds left to right). Cells with no check, or whose tiers
    all have weight 0, get nan."""
    m, p, s, c = (counts[..., v].astype(float) for v in (_M, _P, _S, _C))
    present = counts[..., :_F].sum(axis=-1) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        tiers = np.where(
            present,
            (m + settings.lambda_ * p + settings.mu * c) / (m + p + s + abs(settings.mu) * c),
            np.nan,
        )
        weighted = np.zeros(counts.shape[:-2])
        total_weight = np.zeros(counts.shape[:-2])
        for t, tier in enumerate(TIERS):  # sum() in TIERS order, as response_score adds them
            w = settings.weight(tier)
            weighted = weighted + np.where(present[..., t], w * tiers[..., t], 0.0)
            total_weight = total_weight + np.where(present[..., t], w, 0.0)
        gamut = np.where(total_weight > 0, weighted / total_weight, np.nan)
    return tiers, present, gamut


def _mean(values: np.ndarray) -> float | None:
    """model_score's mean: math.fsum over the values, or None for none."""
    return math.fsum(values.tolist()) / len(values) if len(values) else None


def _cell(outcome: np.ndarray, gamut: np.ndarray, subset: np.ndarray) -> Cell:
    scored = subset & (outcome == SCORED)
    return Cell(
        gamut=_x100(_mean(gamut[scored])), scored=int(scored.sum()), questions=int(subset.sum())
    )


def leaderboard(
    *,
    judge: Judge,
    setting: str,
    settings: ScoringSettings = DEFAULT_SETTINGS,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    audit: bool = False,
    release: Release | None = None,
) -> Leaderboard:
    """The board of one judge and setting over a scope: `release` (its questions on its
    rubric versions; pass `settings=release.scoring_settings()` to score it as it was cut,
    judging.releases.scores does) or None, the working draft (every question not dropped, on
    its final version)."""
    questions = _questions(release)  # in id order
    question_ids = np.array([q[0] for q in questions], dtype=np.int64)
    final_versions = np.array([q[3] or 0 for q in questions], dtype=np.int64)
    responses = Response.objects.filter(setting=setting)
    if release is None:
        responses = responses.filter(question__dropped_at__isnull=True)
    else:
        responses = responses.filter(
            question_id__in=ReleaseQuestion.objects.filter(release=release).values("question_id")
        )
    responded = np.array(
        list(responses.values_list("model_id", "question_id")),
        dtype=np.int64,
    ).reshape(-1, 2)
    model_ids = np.unique(responded[:, 0])  # the arrays' model axis, in id order
    names = dict(EvaluatedModel.objects.filter(pk__in=model_ids.tolist()).values_list("id", "name"))
    counts, seen = _counts(judge, setting, final_versions, question_ids, model_ids)
    domains = sorted({q[1] for q in questions})
    # "unknown": a source without popularity (CRAG-MM rows without an entities file).
    popularities = [
        p for p in ("head", "torso", "tail", "unknown") if any(q[2] == p for q in questions)
    ]
    n_checks = np.array([q[4] or 0 for q in questions], dtype=np.int64)

    # The outcome of each (model, question), decided in this order: no response (missing);
    # no count row or no check (pending); a failed verdict; fewer verdicts than checks
    # (pending).
    has_response = np.zeros((len(model_ids), len(questions)), dtype=bool)
    if len(responded) and len(questions):
        q = np.minimum(np.searchsorted(question_ids, responded[:, 1]), len(questions) - 1)
        known = question_ids[q] == responded[:, 1]  # a question dropped meanwhile is not
        has_response[np.searchsorted(model_ids, responded[known, 0]), q[known]] = True
    failed = counts[..., _F].sum(axis=-1) > 0
    judged = counts.sum(axis=(-1, -2))
    outcome = np.full((len(model_ids), len(questions)), SCORED, dtype=np.int8)
    outcome[judged < n_checks] = PENDING
    outcome[failed] = FAILED
    outcome[~seen | (n_checks == 0)] = PENDING
    outcome[~has_response] = MISSING
    tier_scores, present, gamut = _response_scores(counts, settings)
    if np.isnan(gamut[outcome == SCORED]).any():
        raise Unscorable("a response whose tiers all have weight 0 has no Gamut score")

    by_domain = {d: np.array([q[1] == d for q in questions], dtype=bool) for d in domains}
    by_popularity = {p: np.array([q[2] == p for q in questions], dtype=bool) for p in popularities}
    audited = _audited(judge, setting) if audit else {}
    question_index = {qid: j for j, qid in enumerate(question_ids.tolist())}
    rows = []
    intervals = bootstrap_intervals(
        np.where(outcome == SCORED, gamut, np.nan), resamples=resamples, seed=seed
    )
    for i, model_id in enumerate(model_ids.tolist()):
        scored = outcome[i] == SCORED
        values = gamut[i][scored]
        low, high = intervals[i]
        tiers: dict[str, float | None] = {
            tier: _x100(_mean(tier_scores[i, :, t][scored & present[i, :, t]]))
            for t, tier in enumerate(TIERS)
        }
        rows.append(
            Row(
                model=names[model_id],
                gamut=_x100(_mean(values)),
                low=_x100(low),
                high=_x100(high),
                tiers=tiers,
                questions=len(questions),
                scored=int(scored.sum()),
                missing=int((outcome[i] == MISSING).sum()),
                failed=int((outcome[i] == FAILED).sum()),
                pending=int((outcome[i] == PENDING).sum()),
                by_domain={d: _cell(outcome[i], gamut[i], mask) for d, mask in by_domain.items()},
                by_popularity={
                    p: _cell(outcome[i], gamut[i], mask) for p, mask in by_popularity.items()
                },
            )
        )
        if audit:
            rows[-1].corrected = _corrected(
                audited.get(model_id, []),
                question_index,
                final_versions,
                scored,
                counts[i],
                values,
                {t: tier_scores[i, :, k][scored & present[i, :, k]] for k, t in enumerate(TIERS)},
                settings,
            )
    # Comparable rows are ranked by their score; the others follow, unranked, by score too.
    # Model names are unique, so this is a total order whatever the order of model_ids.
    most = max((r.scored for r in rows), default=0)
    for r in rows:
        r.ranked = r.gamut is not None and r.scored >= RANK_MIN_SHARE * most
    rows.sort(key=lambda r: (not r.ranked, r.gamut is None, -(r.gamut or 0), r.model))
    for rank, r in enumerate((r for r in rows if r.ranked), start=1):
        r.rank = rank
    scored_gamut = np.where(outcome == SCORED, gamut, np.nan)
    scores = {names[m]: scored_gamut[i] for i, m in enumerate(model_ids.tolist())}
    ranked = [r.model for r in rows]
    pairs = pairwise(ranked, np.array([scores[m] for m in ranked]))
    by_pair = {(p.a, p.b): p for p in pairs}
    for upper, lower in zip(rows, rows[1:], strict=False):
        if not lower.ranked:
            break
        pair = by_pair[(upper.model, lower.model)]
        upper.indistinguishable_from_next = pair.p_holm is not None and not pair.significant
    spreads = [p.sd for p in pairs if p.sd]
    return Leaderboard(
        judge=judge.name,
        setting=setting,
        questions=len(questions),
        rows=rows,
        domains=domains,
        popularities=popularities,
        comparisons=pairs,
        minimum_detectable_difference=minimum_detectable_difference(
            float(np.median(spreads)) if spreads else None, len(questions)
        ),
        scores=scores,
        question_ids=question_ids.tolist(),
    )


def _audited(judge: Judge, setting: str) -> dict[int, list[tuple[int, int, int, int, int]]]:
    """Per model id, each graded audit pair of this setting as (question id, rubric version
    id, tier code, the judge's verdict index, people's verdict index); the caller keeps those
    of each question's final version. Two queries
    that read only audited rows: the pairs, and the judge's verdicts on them (none without an
    audit). The judge's verdicts on the questions' other checks are already in the board's
    counts."""
    people: dict[tuple[int, int], tuple[int, int, int, int, str]] = {}
    for response_id, check_id, model_id, question_id, version_id, tier, verdict in (
        SpotCheck.objects.filter(
            audit=True,
            graded_at__isnull=False,
            response__setting=setting,
            check_row__deleted_at__isnull=True,
        )
        .order_by()
        .values_list(
            "response_id",
            "check_row_id",
            "response__model_id",
            "response__question_id",
            "check_row__version_id",
            "check_row__tier",
            "verdict",
        )
    ):
        if tier in TIERS:
            people[(response_id, check_id)] = (
                model_id,
                question_id,
                version_id,
                TIERS.index(tier),
                verdict,
            )
    if not people:
        return {}
    out: dict[int, list[tuple[int, int, int, int, int]]] = defaultdict(list)
    # Every judge's verdicts on the audited pairs, this judge's kept here: with `judge=` in the
    # query SQLite walks the judge's index (all its verdicts, a second at full size) rather
    # than the responses'; this reads the few rows of the audited responses.
    for judge_id, response_id, check_id, verdict in (
        Verdict.objects.filter(
            response_id__in={r for r, _ in people}, check_row_id__in={c for _, c in people}
        )
        .exclude(verdict=VerdictValue.FAILED)  # its question is not scored anyway
        .order_by()
        .values_list("judge_id", "response_id", "check_row_id", "verdict")
    ):
        pair = people.get((response_id, check_id))
        if pair is not None and judge_id == judge.pk:
            model_id, question_id, version_id, tier, person = pair
            out[model_id].append(
                (
                    question_id,
                    version_id,
                    tier,
                    ppi.VERDICT_INDEX[verdict],
                    ppi.VERDICT_INDEX[person],
                )
            )
    return out


def _corrected(
    pairs: list[tuple[int, int, int, int, int]],
    question_index: dict[int, int],
    final_versions: np.ndarray,
    scored: np.ndarray,
    counts: np.ndarray,
    gamut: np.ndarray,
    tiers: dict[str, np.ndarray],
    settings: ScoringSettings,
) -> dict[str, ppi.Corrected]:
    """One model's scores corrected by its audited pairs, on the questions the board scored
    (a pending or failed one has no judge score) and their final versions' checks, from the
    board's own counts."""
    rows: dict[int, int] = {}  # question index -> row of the audited questions' arrays
    kept = []
    for question_id, version_id, tier, judged, person in pairs:
        q = question_index.get(question_id)
        if q is not None and scored[q] and final_versions[q] == version_id:
            kept.append((rows.setdefault(q, len(rows)), tier, judged, person))
    judge_counts = counts[list(rows)][..., :_F] if rows else np.zeros((0, len(TIERS), 4))
    return ppi.all_scores(gamut, tiers, ppi.from_counts(judge_counts, kept), settings)


def significance_grid(board: Leaderboard) -> list[dict]:
    """The significance grid: a row per model (ranked), a cell per other model with the
    paired difference (row minus column), shaded by its size when Holm-significant."""
    by_pair = {}
    for pair in board.comparisons:
        by_pair[(pair.a, pair.b)] = (pair, 1)
        by_pair[(pair.b, pair.a)] = (pair, -1)
    grid = []
    for row in board.rows:
        cells = []
        for column in board.rows:
            if column.model == row.model:
                cells.append({"self": True})
                continue
            pair, sign = by_pair[(row.model, column.model)]
            difference = None if pair.difference is None else sign * pair.difference
            if difference is None or not pair.significant:
                shade = "same"
            else:
                shade = ("better" if difference > 0 else "worse") + (
                    "-strong" if abs(difference) >= 10 else ""
                )
            cells.append(
                {"difference": difference, "p": pair.p_holm, "shade": shade, "model": column.model}
            )
        grid.append({"model": row.model, "cells": cells})
    return grid
