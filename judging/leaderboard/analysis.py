"""The analyses behind the result pages: settings against each other, judges against each other.

Pure Python, no Django import, like judging/verdicts/scoring.py: the views read the scores
(Gamut x100 per model, from `board.leaderboard`) and the verdict pairs, and everything computed
from them is here, typed and tested without a database.

Entry points
    kendall_tau_b(x, y) -> float | None     rank correlation with ties (tau-b)
    ranking(scores) -> [model, ...]         best first
    adjacent_swaps(a, b) -> [(m1, m2), ...] neighbours in either ranking that the other reverses
    setting_gaps(multimodal, text_only)     per model: both scores and the cost of the image
    largest_differences(scores)             per model: the widest gap between two judges
    leniency(scores)                        per judge: its mean minus the others' mean
    own_models(judges, models)              which evaluated model is each judge's own
    self_preference(scores, own, leniency)  a judge on its own model against the other judges
    confusion(pairs)                        verdict counts of judge A (rows) by judge B (columns)

Choices
    - `scores` maps judge -> model -> Gamut x100, None where the judge scored nothing of that
      model. A None is never read as 0: every figure says over which models it was taken.
    - Leniency is taken over the models that every judge scored, so that a judge is not called
      lenient because it happened to score only the strong models.
    - Kendall's tau-b is None when undefined: fewer than two models, or one ranking ties every
      model (no order to compare).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Scores = Mapping[str, Mapping[str, float | None]]  # judge -> model -> Gamut x100

VERDICTS = ("meets", "partially_meets", "missing", "contradicts")
FAILED = "failed"
LABELS = (*VERDICTS, FAILED)


# ---------------------------------------------------------------------------------------------
# Rank correlation


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two paired sequences: (C - D) / sqrt((C + D + Tx)(C + D + Ty)), with C
    and D the concordant and discordant pairs, Tx the pairs tied in x only and Ty those tied in
    y only (pairs tied in both count nowhere). O(n^2): n is a number of models."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} values and y has {len(y)}")
    concordant = discordant = tied_x = tied_y = 0
    n = len(x)
    for i in range(n):
        for j in range(i + 1, n):
            dx = x[i] - x[j]
            dy = y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tied_x += 1
            elif dy == 0:
                tied_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + tied_x) * (concordant + discordant + tied_y))
    if denominator == 0:
        return None
    # Rounding can put |tau| a hair above 1 when there are no discordant pairs.
    return max(-1.0, min(1.0, (concordant - discordant) / denominator))


def ranking(scores: Mapping[str, float | None]) -> list[str]:
    """The scored models, best first; equal scores by name, so the order is deterministic."""
    return sorted(
        (m for m, s in scores.items() if s is not None), key=lambda m: (-(scores[m] or 0.0), m)
    )


def adjacent_swaps(
    a: Mapping[str, float | None], b: Mapping[str, float | None]
) -> list[tuple[str, str]]:
    """Pairs of models, over those both judges scored, that are neighbours in either judge's
    ranking and that the two judges order strictly the other way round. Each pair once, as
    (the model `a` ranks higher, the other), in `a`'s order; the same set whichever judge is
    `a`."""
    common = {m for m in a if a[m] is not None and b.get(m) is not None}
    sa = {m: a[m] for m in common}
    sb = {m: b[m] for m in common}
    neighbours: set[frozenset[str]] = set()
    for order in (ranking(sa), ranking(sb)):
        neighbours |= {frozenset(pair) for pair in zip(order, order[1:], strict=False)}
    position = {m: i for i, m in enumerate(ranking(sa))}
    swaps = []
    for pair in neighbours:
        high, low = sorted(pair, key=position.__getitem__)
        da = (sa[high] or 0.0) - (sa[low] or 0.0)
        db = (sb[high] or 0.0) - (sb[low] or 0.0)
        if da * db < 0:
            swaps.append((high, low))
    return sorted(swaps, key=lambda p: (position[p[0]], position[p[1]]))


@dataclass(frozen=True)
class PairAgreement:
    judge_a: str
    judge_b: str
    models: int  # scored by both
    tau: float | None
    swaps: list[tuple[str, str]]


def rank_agreement(scores: Scores) -> list[PairAgreement]:
    """Kendall's tau-b and the adjacent swaps for every pair of judges (in the order given),
    each over the models both scored."""
    judges = list(scores)
    out = []
    for i, ja in enumerate(judges):
        for jb in judges[i + 1 :]:
            common = sorted(
                m for m, s in scores[ja].items() if s is not None and scores[jb].get(m) is not None
            )
            tau = kendall_tau_b(
                [_f(scores[ja][m]) for m in common], [_f(scores[jb][m]) for m in common]
            )
            out.append(
                PairAgreement(
                    judge_a=ja,
                    judge_b=jb,
                    models=len(common),
                    tau=tau,
                    swaps=adjacent_swaps(scores[ja], scores[jb]),
                )
            )
    return out


def _f(value: float | None) -> float:
    if value is None:
        raise ValueError("a missing score was used")
    return value


# ---------------------------------------------------------------------------------------------
# Settings against each other


@dataclass(frozen=True)
class SettingGap:
    model: str
    multimodal: float | None
    text_only: float | None
    cost: float | None  # text_only - multimodal: what naming the entity in text gives back


def setting_gaps(
    multimodal: Mapping[str, float | None], text_only: Mapping[str, float | None]
) -> list[SettingGap]:
    """One row per model seen in either setting, the largest cost first (models lacking one of
    the two scores last, by name). The cost of visual identification is text-only minus
    multimodal: positive when the model does worse having to recognise the entity itself."""
    rows = []
    for model in sorted(set(multimodal) | set(text_only)):
        mm, text = multimodal.get(model), text_only.get(model)
        cost = None if mm is None or text is None else text - mm
        rows.append(SettingGap(model=model, multimodal=mm, text_only=text, cost=cost))
    rows.sort(key=lambda r: (r.cost is None, -(r.cost or 0.0), r.model))
    return rows


# ---------------------------------------------------------------------------------------------
# Judges against each other


@dataclass(frozen=True)
class Spread:
    model: str
    difference: float | None  # highest minus lowest score among the judges that scored it
    high: str | None  # the judge that scored it highest
    low: str | None


def largest_differences(scores: Scores) -> list[Spread]:
    """Per model (every model any judge scored), the largest difference between two judges'
    scores: None with fewer than two judges scoring it. Largest first."""
    models = sorted({m for per in scores.values() for m, s in per.items() if s is not None})
    rows = []
    for model in models:
        given = [(s, j) for j, per in scores.items() if (s := per.get(model)) is not None]
        if len(given) < 2:
            rows.append(Spread(model=model, difference=None, high=None, low=None))
            continue
        # Ties go to the judge named first, so the answer does not depend on dict order.
        high = min(given, key=lambda p: (-p[0], p[1]))
        low = min(given, key=lambda p: (p[0], p[1]))
        rows.append(Spread(model=model, difference=high[0] - low[0], high=high[1], low=low[1]))
    rows.sort(key=lambda r: (r.difference is None, -(r.difference or 0.0), r.model))
    return rows


def common_models(scores: Scores) -> list[str]:
    """The models that every judge scored."""
    sets = [{m for m, s in per.items() if s is not None} for per in scores.values()]
    return sorted(set.intersection(*sets)) if sets else []


@dataclass(frozen=True)
class Leniency:
    judge: str
    mean: float | None  # this judge's mean over the common models
    others: float | None  # the other judges' mean over the same models
    leniency: float | None  # mean - others: above 0, kinder than the others
    models: int  # the common models


def leniency(scores: Scores) -> list[Leniency]:
    """Each judge's mean score over the models every judge scored, minus the mean of the other
    judges' scores over the same models. None with a single judge or no common model."""
    common = common_models(scores)
    judges = list(scores)
    out = []
    for judge in judges:
        if not common:
            out.append(Leniency(judge=judge, mean=None, others=None, leniency=None, models=0))
            continue
        mean = _mean(_f(scores[judge][m]) for m in common)
        others_list = [_f(scores[j][m]) for j in judges if j != judge for m in common]
        others = _mean(others_list) if others_list else None
        out.append(
            Leniency(
                judge=judge,
                mean=mean,
                others=others,
                leniency=None if others is None else mean - others,
                models=len(common),
            )
        )
    return out


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return math.fsum(items) / len(items)


@dataclass(frozen=True)
class JudgeRef:
    name: str
    llm_model_id: int | None
    provider_model: str  # the LLMModel's provider model name, "" without one


@dataclass(frozen=True)
class ModelRef:
    name: str
    llm_model_id: int | None
    model_name: str  # the provider's model name, "" when unknown


def _plain(name: str) -> str:
    return "".join(c for c in name.casefold() if c.isalnum())


def _without_judge_suffix(name: str) -> str:
    folded = name.casefold().strip()
    for sep in ("-", "_", " "):
        if folded.endswith(f"{sep}judge"):
            return folded[: -len("judge") - 1]
    return folded


def own_models(judges: Iterable[JudgeRef], models: Iterable[ModelRef]) -> dict[str, list[str]]:
    """Judge name -> the evaluated models that are the judge's own model, by the first rule
    that finds any:
      1. the same configured LLM model (Judge.llm_model is EvaluatedModel.llm_model);
      2. the same provider model name (the judge's LLMModel.model is the evaluated model's
         model_name), compared ignoring case;
      3. the names: the judge's name, less a trailing "-judge" ("_judge", " judge"), equals the
         evaluated model's name, compared ignoring case and every character that is not a
         letter or digit ("Gemini-2.5-Pro-judge" is "gemini 2.5 pro").
    A judge that no rule matches has no own model and no self-preference."""
    models = list(models)
    out: dict[str, list[str]] = {}
    for judge in judges:
        found: list[str] = []
        if judge.llm_model_id is not None:
            found = [m.name for m in models if m.llm_model_id == judge.llm_model_id]
        if not found and judge.provider_model:
            wanted = judge.provider_model.casefold()
            found = [m.name for m in models if m.model_name and m.model_name.casefold() == wanted]
        if not found:
            wanted = _plain(_without_judge_suffix(judge.name))
            found = [m.name for m in models if wanted and _plain(m.name) == wanted]
        out[judge.name] = sorted(found)
    return out


@dataclass(frozen=True)
class SelfPreference:
    judge: str
    model: str
    own: float | None  # the judge's score of its own model
    others: float | None  # the other judges' mean score of that model
    gap: float | None  # own - others
    net: float | None  # gap less the judge's leniency: what kindness in general does not explain
    judges: int  # other judges that scored the model


def self_preference(
    scores: Scores, own: Mapping[str, Sequence[str]], leniencies: Iterable[Leniency] = ()
) -> list[SelfPreference]:
    """For each judge and each of its own models: how it scores that model against the mean
    of the other judges' scores of the same model. `net` removes the judge's leniency (its
    kindness to every model), where known."""
    kind = {row.judge: row.leniency for row in leniencies}
    out = []
    for judge, models in own.items():
        for model in models:
            mine = scores.get(judge, {}).get(model)
            theirs = [
                s for j, per in scores.items() if j != judge if (s := per.get(model)) is not None
            ]
            others = _mean(theirs) if theirs else None
            gap = None if mine is None or others is None else mine - others
            lenient = kind.get(judge)
            net = None if gap is None or lenient is None else gap - lenient
            out.append(
                SelfPreference(
                    judge=judge,
                    model=model,
                    own=mine,
                    others=others,
                    gap=gap,
                    net=net,
                    judges=len(theirs),
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# Verdict confusion


@dataclass
class Confusion:
    """counts[a][b]: checks that judge A gave verdict a and judge B verdict b. Rows and columns
    in LABELS order (the four verdicts, then failed)."""

    counts: dict[str, dict[str, int]] = field(
        default_factory=lambda: {a: dict.fromkeys(LABELS, 0) for a in LABELS}
    )

    @property
    def total(self) -> int:
        return sum(sum(row.values()) for row in self.counts.values())

    @property
    def graded(self) -> int:
        """The pairs in which neither judge failed."""
        return sum(self.counts[a][b] for a in VERDICTS for b in VERDICTS)

    @property
    def agreement(self) -> float | None:
        """Share of the graded pairs on which both judges gave the same verdict."""
        graded = self.graded
        return None if not graded else sum(self.counts[v][v] for v in VERDICTS) / graded

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa over the graded pairs; None when undefined (no pair, or both judges
        used one and the same verdict throughout)."""
        n = self.graded
        if not n:
            return None
        observed = sum(self.counts[v][v] for v in VERDICTS) / n
        rows = {a: sum(self.counts[a][b] for b in VERDICTS) for a in VERDICTS}
        cols = {b: sum(self.counts[a][b] for a in VERDICTS) for b in VERDICTS}
        expected = sum(rows[v] * cols[v] for v in VERDICTS) / (n * n)
        if expected >= 1:
            return None
        return (observed - expected) / (1 - expected)

    def as_dict(self) -> dict:
        return {
            "labels": list(LABELS),
            "counts": [[self.counts[a][b] for b in LABELS] for a in LABELS],
            "total": self.total,
            "graded": self.graded,
            "agreement": self.agreement,
            "kappa": self.kappa,
        }


def confusion(pairs: Iterable[tuple[str, str, int]]) -> Confusion:
    """From (verdict of A, verdict of B, how many) triples; an unknown verdict is an error."""
    out = Confusion()
    for a, b, n in pairs:
        if a not in LABELS or b not in LABELS:
            raise ValueError(f"unknown verdict pair ({a!r}, {b!r})")
        out.counts[a][b] += n
    return out
