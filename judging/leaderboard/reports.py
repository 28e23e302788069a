"""The result tables behind the analysis pages and their API: what they read and how they shape it.

Each report is a plain dict, the exact JSON that the page's `?format=json` and the API answer
(scores x100, rounded to 4 decimals); `*_COLUMNS` name the CSV columns of its tables. Scores come
from `board.leaderboard` (one call per judge and setting, a constant number of queries each),
the figures from `analysis` (pure), the verdicts by SQL.

  settings_report(judge)                      multimodal against text-only, per model
  judges_report(setting, judge_a, judge_b)    judges compared (scores, leniency, rankings,
                                              self-preference, verdict confusion of A and B)
  question_report(question, image_url)        one question: responses, checks, verdicts

Each takes `release`: the release whose questions, rubric versions and scoring parameters it
reads, or None (the default) for the working draft (every question not dropped, on its final
rubric version, with today's scoring parameters); each report names it in its `release` field
(judging/releases/scope.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import Count, F, FilteredRelation, Q
from django.urls import reverse

from annotation.models import FinalQuestion
from core.errors import NotFound
from rubrics.models import RubricCheck
from rubrics.services import final_version, final_version_ids

from ..models import (
    EvaluatedModel,
    Judge,
    Release,
    ReleaseQuestion,
    Response,
    Setting,
    Verdict,
    VerdictValue,
)
from ..releases.scope import release_field
from ..verdicts.scoring import VERDICTS, ScoringError, ScoringSettings, response_score
from ..verdicts.services import scoring_settings
from . import analysis
from .board import leaderboard
from .comparisons import Paired, paired


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _scoring(release: Release | None, scoring: ScoringSettings | None) -> ScoringSettings:
    """The parameters given, else the release's frozen ones, else today's (one query)."""
    if scoring is not None:
        return scoring
    return release.scoring_settings() if release is not None else scoring_settings()


# --- multimodal against text-only ------------------------------------------------------------

SETTINGS_COLUMNS = [
    "model",
    "multimodal",
    "multimodal_ci_low",
    "multimodal_ci_high",
    "multimodal_scored",
    "text_only",
    "text_only_ci_low",
    "text_only_ci_high",
    "text_only_scored",
    "cost",
    "paired_questions",
    "paired_cost",
    "paired_ci_low",
    "paired_ci_high",
    "paired_p",
]


def _paired_cost(boards: dict, model: str) -> Paired | None:
    multimodal = boards[Setting.MULTIMODAL].scores.get(model)
    text_only = boards[Setting.TEXT_ONLY].scores.get(model)
    if multimodal is None or text_only is None:
        return None
    return paired(model, model, text_only, multimodal)


def settings_report(
    judge: Judge, *, scoring: ScoringSettings | None = None, release: Release | None = None
) -> dict:
    """Per model, the Gamut x100 of both settings under one judge and the cost of visual
    identification (text-only minus multimodal), on `release` (None: the working draft)."""
    scoring = _scoring(release, scoring)
    boards = {
        s: leaderboard(judge=judge, setting=s, settings=scoring, release=release)
        for s in Setting.values
    }
    rows = {s: {r.model: r for r in board.rows} for s, board in boards.items()}
    gaps = analysis.setting_gaps(
        {m: r.gamut for m, r in rows[Setting.MULTIMODAL].items()},
        {m: r.gamut for m, r in rows[Setting.TEXT_ONLY].items()},
    )
    out = []
    for gap in gaps:
        row: dict[str, Any] = {"model": gap.model}
        for setting in Setting.values:
            r = rows[setting].get(gap.model)
            row[setting] = _round(r.gamut) if r else None
            row[f"{setting}_ci_low"] = _round(r.low) if r else None
            row[f"{setting}_ci_high"] = _round(r.high) if r else None
            row[f"{setting}_scored"] = r.scored if r else 0
        row["cost"] = _round(gap.cost)
        # The same cost as a paired difference, on the questions scored in both settings.
        pair = _paired_cost(boards, gap.model)
        row["paired_questions"] = pair.n if pair else 0
        row["paired_cost"] = _round(pair.difference) if pair else None
        row["paired_ci_low"] = _round(pair.low) if pair else None
        row["paired_ci_high"] = _round(pair.high) if pair else None
        row["paired_p"] = _round(pair.p, 6) if pair and pair.p is not None else None
        out.append(row)
    return {
        "release": release_field(release),
        "judge": judge.name,
        "questions": boards[Setting.MULTIMODAL].questions,
        "rows": out,
    }


# --- judges compared -------------------------------------------------------------------------

LENIENCY_COLUMNS = ["judge", "mean", "others", "leniency", "models"]
RANKING_COLUMNS = ["judge_a", "judge_b", "models", "tau", "swaps"]
SELF_COLUMNS = ["judge", "model", "own", "others", "gap", "net", "judges"]


def scores_columns(judges: Iterable[str]) -> list[str]:
    return ["model", *judges, "largest_difference", "highest", "lowest"]


def _own_models(judges: list[Judge]) -> dict[str, list[str]]:
    return analysis.own_models(
        [
            analysis.JudgeRef(
                name=j.name,
                llm_model_id=j.llm_model_id,
                provider_model=j.llm_model.model if j.llm_model else "",
            )
            for j in judges
        ],
        [
            analysis.ModelRef(name=m.name, llm_model_id=m.llm_model_id, model_name=m.model_name)
            for m in EvaluatedModel.objects.order_by("name")
        ],
    )


def verdict_pairs(
    *, judge_a: Judge, judge_b: Judge, setting: str, release: Release | None = None
) -> list[tuple[str, str, int]]:
    """(verdict of A, verdict of B, count) over the (response, check) pairs both judges judged,
    in the setting, on the checks scores use: each non-dropped question's final rubric version,
    or the versions `release` froze (the same check row means the same version). One query:
    A's verdicts joined to B's on the same response and check row (1.5 s for the 880,000 pairs
    of one setting at full size on SQLite; a correlated subquery for B's verdict took 3 to 4 s)."""
    if release is None:
        scope = Q(
            response__question__dropped_at__isnull=True,
            check_row__version_id__in=final_version_ids(),
        )
    else:
        scope = Q(
            check_row__version_id__in=ReleaseQuestion.objects.filter(release=release)
            .values("version_id")
            .order_by()
        )
    rows = (
        Verdict.objects.filter(
            scope,
            judge=judge_a,
            response__setting=setting,
            check_row__deleted_at__isnull=True,
        )
        .annotate(
            other=FilteredRelation(
                "response__verdicts",
                condition=Q(
                    response__verdicts__judge=judge_b, response__verdicts__check_row=F("check_row")
                ),
            )
        )
        .filter(other__isnull=False)
        .values("verdict", "other__verdict")
        .annotate(n=Count("id"))
        .order_by()
    )
    return [(r["verdict"], r["other__verdict"], r["n"]) for r in rows]


def judges_report(
    *,
    setting: str,
    judge_a: Judge | None = None,
    judge_b: Judge | None = None,
    scoring: ScoringSettings | None = None,
    release: Release | None = None,
) -> dict:
    """Every judge's scores of every model in one setting on `release` (None: the working
    draft), and what follows from comparing them; the verdict confusion of judges A and B (by
    default the first two by name)."""
    scoring = _scoring(release, scoring)
    judges = list(Judge.objects.select_related("llm_model").order_by("name"))
    names = [j.name for j in judges]
    scores: dict[str, dict[str, float | None]] = {}
    for judge in judges:
        board = leaderboard(judge=judge, setting=setting, settings=scoring, release=release)
        scores[judge.name] = {r.model: r.gamut for r in board.rows}
    models = sorted({m for per in scores.values() for m in per})
    spreads = {s.model: s for s in analysis.largest_differences(scores)}
    score_rows: list[dict[str, Any]] = []
    for model in models:
        spread = spreads.get(model)
        score_rows.append(
            {
                "model": model,
                "scores": {j: _round(scores[j].get(model)) for j in names},
                "largest_difference": _round(spread.difference) if spread else None,
                "highest": spread.high if spread else None,
                "lowest": spread.low if spread else None,
            }
        )
    score_rows.sort(
        key=lambda r: (r["largest_difference"] is None, -(r["largest_difference"] or 0), r["model"])
    )
    leniencies = analysis.leniency(scores) if len(judges) > 1 else []
    own = _own_models(judges)
    report: dict = {
        "release": release_field(release),
        "setting": setting,
        "judges": names,
        "common_models": analysis.common_models(scores) if judges else [],
        "scores": score_rows,
        "leniency": [
            {
                "judge": row.judge,
                "mean": _round(row.mean),
                "others": _round(row.others),
                "leniency": _round(row.leniency),
                "models": row.models,
            }
            for row in leniencies
        ],
        "rankings": [
            {
                "judge_a": p.judge_a,
                "judge_b": p.judge_b,
                "models": p.models,
                "tau": _round(p.tau),
                "swaps": [list(s) for s in p.swaps],
            }
            for p in analysis.rank_agreement(scores)
        ],
        "own_models": own,
        "self_preference": [
            {
                "judge": p.judge,
                "model": p.model,
                "own": _round(p.own),
                "others": _round(p.others),
                "gap": _round(p.gap),
                "net": _round(p.net),
                "judges": p.judges,
            }
            for p in analysis.self_preference(scores, own, leniencies)
        ],
        "confusion": None,
    }
    if judge_a is None and judge_b is None and len(judges) >= 2:
        judge_a, judge_b = judges[0], judges[1]
    if judge_a is not None and judge_b is not None:
        matrix = analysis.confusion(
            verdict_pairs(judge_a=judge_a, judge_b=judge_b, setting=setting, release=release)
        )
        report["confusion"] = {"judge_a": judge_a.name, "judge_b": judge_b.name, **matrix.as_dict()}
        for key in ("agreement", "kappa"):
            report["confusion"][key] = _round(report["confusion"][key])
    return report


CONFUSION_COLUMNS = ["judge_a_verdict", *analysis.LABELS]


def judges_table(report: dict, table: str) -> tuple[list[str], list[dict]]:
    """One table of a judges report as CSV columns and flat rows."""
    if table == "scores":
        return scores_columns(report["judges"]), [
            {
                "model": r["model"],
                **r["scores"],
                "largest_difference": r["largest_difference"],
                "highest": r["highest"],
                "lowest": r["lowest"],
            }
            for r in report["scores"]
        ]
    if table == "leniency":
        return LENIENCY_COLUMNS, report["leniency"]
    if table == "rankings":
        return RANKING_COLUMNS, [
            {**r, "swaps": "; ".join(f"{a} > {b}" for a, b in r["swaps"])}
            for r in report["rankings"]
        ]
    if table == "self_preference":
        return SELF_COLUMNS, report["self_preference"]
    if table == "confusion":
        matrix = report["confusion"]
        if matrix is None:
            return CONFUSION_COLUMNS, []
        return CONFUSION_COLUMNS, [
            {"judge_a_verdict": label, **dict(zip(matrix["labels"], row, strict=True))}
            for label, row in zip(matrix["labels"], matrix["counts"], strict=True)
        ]
    raise KeyError(table)


JUDGES_TABLES = ("scores", "leniency", "rankings", "self_preference", "confusion")


# --- one question ----------------------------------------------------------------------------

QUESTION_COLUMNS = [
    "setting",
    "model",
    "check_id",
    "tier",
    "check",
    "judge",
    "verdict",
    "rationale",
]


def question_for(source_id: str) -> FinalQuestion:
    """The final question of an image, with its image and rubric (one query); raises
    FinalQuestion.DoesNotExist."""
    return FinalQuestion.objects.select_related("image", "rubric").get(image__source_id=source_id)


def _response_outcome(
    verdicts: list[str], n_checks: int, tiers: list[str], scoring: ScoringSettings
) -> tuple[str, float | None]:
    """What a judge's verdicts on one response amount to: ("scored", Gamut x100), or
    ("failed" | "pending", None), as the leaderboard decides."""
    if VerdictValue.FAILED in verdicts:
        return "failed", None
    if not n_checks or len(verdicts) < n_checks:
        return "pending", None
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(VERDICTS, 0))
    for verdict, tier in zip(verdicts, tiers, strict=True):
        counts[tier][verdict] += 1
    try:
        return "scored", 100 * response_score(counts, scoring).gamut
    except ScoringError:
        return "pending", None


class NotInRelease(NotFound):
    """The question asked for is not one of the release's."""


def question_report(
    question: FinalQuestion,
    *,
    image_url: str,
    scoring: ScoringSettings | None = None,
    release: Release | None = None,
) -> dict:
    """One question: its checks in the rubric version scored (the final one, or the one
    `release` froze, with the question's wording as frozen), with tier, provenance and
    evidence, each model's response per setting, and each judge's verdict and rationale per
    check, with the response's Gamut x100 under each judge. Five queries (and one for the
    benchmark's scoring settings unless given or frozen by the release) whatever the number of
    models, judges and checks. Raises NotInRelease when the release does not hold it."""
    frozen = None
    if release is None:
        rubric = getattr(question, "rubric", None)
        version = final_version(rubric) if rubric else None
    else:
        frozen = (
            ReleaseQuestion.objects.select_related("version")
            .filter(release=release, question=question)
            .first()
        )
        if frozen is None:
            raise NotInRelease(
                f"{question.image.source_id} is not in release {release.name}: it was added "
                "after the release was cut, or dropped before.",
                "release",
            )
        version = frozen.version
    scoring = _scoring(release, scoring)
    checks = (
        list(
            RubricCheck.objects.filter(version=version, deleted_at__isnull=True).order_by(
                "position"
            )
        )
        if version
        else []
    )
    snippets = (
        {
            s.get("id"): s
            for s in (version.meta_rubric or {}).get("snippets", [])
            if isinstance(s, dict)
        }
        if version
        else {}
    )
    names = dict(Judge.objects.order_by("name").values_list("id", "name"))
    judges = list(names.values())
    responses = list(
        Response.objects.filter(question=question)
        .select_related("model")
        .order_by("setting", "model__name")
    )
    # response id -> check id -> judge name -> {verdict, rationale}. Rows, not model instances:
    # a question has a thousand verdicts at full size (28 responses x 35 checks), and building
    # a Verdict and a Judge for each was most of the report's time (publishing reads them all).
    by_response: dict[int, dict[int, dict[str, dict[str, str]]]] = defaultdict(dict)
    if checks:
        for response_id, check_id, judge_id, verdict, rationale in Verdict.objects.filter(
            response__question=question, check_row__in=checks
        ).values_list("response_id", "check_row_id", "judge_id", "verdict", "rationale"):
            by_response[response_id].setdefault(check_id, {})[names[judge_id]] = {
                "verdict": verdict,
                "rationale": rationale,
            }
    check_rows = [
        {
            "check_id": c.check_id,
            "position": c.position,
            "tier": c.tier,
            "kind": c.kind,
            "secondary": c.secondary,
            "text": c.text,
            "source": c.source,
            "rule": c.rule,
            "origin": c.origin,
            "options": c.options,
            "steps": c.steps,
            "evidence": [
                {"id": s, **{k: snippets[s].get(k, "") for k in ("url", "title", "text")}}
                for s in c.snippets
                if s in snippets
            ],
            "missing_evidence": [s for s in c.snippets if s not in snippets],
        }
        for c in checks
    ]
    tiers = [c.tier for c in checks]
    response_rows = []
    for r in responses:
        verdicts = by_response.get(r.pk, {})
        per_check = []
        for c in checks:
            given = verdicts.get(c.pk, {})
            per_check.append({j: given[j] for j in judges if j in given})
        outcomes = {}
        for j in judges:
            judged = [(v[j]["verdict"], t) for v, t in zip(per_check, tiers, strict=True) if j in v]
            status, gamut = _response_outcome(
                [v for v, _ in judged], len(checks), [t for _, t in judged], scoring
            )
            outcomes[j] = {"status": status, "gamut": _round(gamut)}
        response_rows.append(
            {
                "model": r.model.name,
                "setting": r.setting,
                "text": r.text,
                "model_version": r.model_version,
                "scores": outcomes,
                "verdicts": [
                    {"check_id": c.check_id, "judges": v}
                    for c, v in zip(checks, per_check, strict=True)
                ],
            }
        )
    image = question.image
    as_scored = frozen or image  # a release's wording, entity, domain and popularity as frozen
    return {
        "release": release_field(release),
        "source_id": image.source_id,
        "question": frozen.text if frozen else question.text,
        "entity": as_scored.entity,
        "domain": as_scored.domain,
        "popularity": as_scored.popularity,
        "image_url": image_url,
        "dropped": question.dropped_at is not None,
        "rubric_version": ({"id": version.pk, "stage": version.stage} if version else None),
        "judges": judges,
        "checks": check_rows,
        "responses": response_rows,
    }


def question_table(report: dict) -> list[dict]:
    """One CSV row per (response, check, judge) verdict."""
    checks = {c["check_id"]: c for c in report["checks"]}
    rows = []
    for r in report["responses"]:
        for entry in r["verdicts"]:
            check = checks[entry["check_id"]]
            for judge, v in entry["judges"].items():
                rows.append(
                    {
                        "setting": r["setting"],
                        "model": r["model"],
                        "check_id": entry["check_id"],
                        "tier": check["tier"],
                        "check": check["text"],
                        "judge": judge,
                        "verdict": v["verdict"],
                        "rationale": v["rationale"],
                    }
                )
    return rows


def image_url_for(source_id: str) -> str:
    return reverse("image_file", args=[source_id])
