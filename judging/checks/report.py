"""Which checks of the final rubrics carry no information, for the rubric team: the figures
of info.py for one judge and setting, from the per-check counts that verdict_record keeps
(CheckVerdictCount, CheckAgreement), never from the verdict rows of every check.

Four queries whatever the number of verdicts: the scoring settings, the judge's counts, the
checks two or more judges graded (the disagreement) and the shown checks' texts. Only a shown
check that some model meets and some does not has a discrimination, which needs each model's
credit on it and the models' rest scores: then the leaderboard's queries, the models, and the
judge's verdicts on those checks alone. A check met by every model or by none has no spread,
so no discrimination.
"""

from __future__ import annotations

import numpy as np
from django.db.models import Exists, F, OuterRef, Q
from django.urls import reverse

from rubrics.models import RubricCheck
from rubrics.services import final_version_ids

from ..leaderboard.board import leaderboard
from ..models import CheckAgreement, CheckVerdictCount, EvaluatedModel, Judge, Verdict, VerdictValue
from ..verdicts.services import scoring_settings
from .info import (
    MET_BY_ALL,
    MET_BY_NONE,
    MIN_MODELS,
    MIN_SHARED,
    check_flags,
    credit,
    disagreement_limit,
    discrimination,
    rest_scores,
)

COLUMNS = [
    "source_id",
    "check_id",
    "tier",
    "text",
    "models",
    "difficulty",
    "discrimination",
    "disagreement",
    "shared",
    "flags",
    "rubric_url",
]


def _on_final(setting: str) -> Q:
    """The rows of the checks of the final rubric versions (neither deleted nor of a dropped
    question) in `setting`, for a model with `check_row` and `setting`."""
    return Q(
        setting=setting,
        check_row__version_id__in=final_version_ids(),
        check_row__deleted_at__isnull=True,
        check_row__version__rubric__question__dropped_at__isnull=True,
    )


def _shared_counts(on_final: Q, judge: Judge) -> dict[int, tuple[int, int, int, bool]]:
    """Per check that two or more judges graded on some response: (its rubric, the responses
    graded by two or more judges, those on which their verdicts differ, whether `judge`
    graded it)."""
    graded = CheckVerdictCount.objects.filter(
        judge=judge, setting=OuterRef("setting"), check_row=OuterRef("check_row")
    )
    rows = (
        CheckAgreement.objects.filter(on_final, shared__gt=0)
        .annotate(graded=Exists(graded))
        .values_list(
            "check_row_id", "check_row__version__rubric_id", "shared", "differing", "graded"
        )
    )
    return {check: rest for check, *rest in rows}


def check_report(
    judge: Judge, setting: str, *, rubric_id: int | None = None, flagged_only: bool = True
) -> dict:
    """The flagged checks (or every check) of the final rubrics under `judge` in `setting`;
    with `rubric_id`, those of that rubric only (counted as such; a disagreement is still
    far above the rest against every check's)."""
    scoring = scoring_settings()
    on_final = _on_final(setting)
    mine = CheckVerdictCount.objects.filter(on_final, judge=judge)
    if rubric_id is not None:
        mine = mine.filter(check_row__version__rubric_id=rubric_id)
    shared = _shared_counts(on_final, judge)
    # In check order, as info.check_flags orders its own.
    rates = [d / n for _, (_, n, d, _) in sorted(shared.items()) if n >= MIN_SHARED]
    limit = disagreement_limit(rates)
    in_scope = {c: row for c, row in shared.items() if rubric_id in (None, row[0])}
    graded_checks = mine.count()
    if flagged_only:
        # Only the checks that may be flagged (info.check_flags decides): none met it, or
        # none missed or contradicted it, or judges disagree on it far above the rest. The
        # rest, most of the checks, are never read.
        models = F("meets") + F("partially") + F("missing") + F("contradicts")
        disputed = [
            c
            for c, (_, n, d, _) in in_scope.items()
            if limit is not None and n >= MIN_SHARED and d / n > limit
        ]
        mine = mine.alias(models=models).filter(
            Q(models__gte=MIN_MODELS) & (Q(meets=0) | Q(missing=0, contradicts=0))
            | Q(check_row_id__in=disputed)
        )
    graded = {
        row[0]: row[1:]
        for row in mine.values_list(
            "check_row_id",
            "check_row__version__rubric__question_id",
            "meets",
            "partially",
            "missing",
            "contradicts",
        )
    }
    # Checks that only other judges graded (two of them at least) count too.
    others = [c for c, (_, _, _, by_judge) in in_scope.items() if not by_judge]
    none = (0, 0, 0, 0, 0)
    counts = np.array(
        [
            (check, *graded.get(check, none), *in_scope.get(check, (0, 0, 0))[1:3])
            for check in {*graded, *(c for c in in_scope if c in graded or c in others)}
        ],
        dtype=np.int64,
    )
    result = check_flags(counts, lam=scoring.lambda_, rates=rates, flagged_only=flagged_only)
    shown = result.infos
    # Only a check with a spread in its credits has a discrimination.
    spread = [
        i
        for i in shown
        if i.models >= MIN_MODELS and MET_BY_ALL not in i.flags and MET_BY_NONE not in i.flags
    ]
    if spread:
        board = leaderboard(judge=judge, setting=setting, settings=scoring)
        model_ids = dict(EvaluatedModel.objects.values_list("name", "id"))
        rest = rest_scores(board.scores, board.question_ids, model_ids)
        verdicts = Verdict.objects.filter(
            judge=judge,
            response__setting=setting,
            check_row__version_id__in=final_version_ids(),
            check_row__deleted_at__isnull=True,
            response__question__dropped_at__isnull=True,
        ).exclude(verdict=VerdictValue.FAILED)
        if rubric_id is not None:
            verdicts = verdicts.filter(check_row__version__rubric_id=rubric_id)
        if flagged_only:
            verdicts = verdicts.filter(check_row_id__in=[i.check for i in spread])
        credits: dict[int, list[tuple[int, int, float]]] = {}
        for check, question, model, verdict in verdicts.values_list(
            "check_row_id", "response__question_id", "response__model_id", "verdict"
        ).order_by():
            credits.setdefault(check, []).append(
                (model, question, credit(verdict, scoring.lambda_))
            )
        for info in spread:
            info.discrimination = discrimination(credits.get(info.check, []), rest)
    checks = {
        row["pk"]: row
        for row in RubricCheck.objects.filter(pk__in=[i.check for i in shown])
        .annotate(
            source_id=F("version__rubric__question__image__source_id"),
            rubric=F("version__rubric_id"),
        )
        .values("pk", "check_id", "tier", "text", "source_id", "rubric", "position")
    }
    rows = []
    for info in sorted(
        shown, key=lambda i: (checks[i.check]["source_id"], checks[i.check]["position"])
    ):
        check = checks[info.check]
        rows.append(
            {
                "source_id": check["source_id"],
                "check_id": check["check_id"],
                "tier": check["tier"],
                "text": check["text"],
                "models": info.models,
                "difficulty": info.difficulty,
                "discrimination": info.discrimination,
                "disagreement": info.disagreement,
                "shared": info.shared,
                "flags": info.flags,
                "rubric_url": reverse("rubric_history", args=[check["rubric"]]),
            }
        )
    return {
        "judge": judge.name,
        "setting": setting,
        "checks": graded_checks + len(others),
        "flagged": result.flagged,
        "rows": rows,
    }
