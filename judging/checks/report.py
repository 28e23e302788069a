"""Which checks of the final rubrics carry no information, for the rubric team: the figures
of info.py read from the database for one judge and setting (four queries and
the leaderboard's)."""

from __future__ import annotations

from django.db.models import F
from django.urls import reverse

from rubrics.models import RubricCheck
from rubrics.services import final_version_ids

from ..leaderboard.board import leaderboard
from ..models import EvaluatedModel, Judge, Verdict
from ..verdicts.services import scoring_settings
from .info import check_information, rest_scores

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


def check_report(
    judge: Judge, setting: str, *, rubric_id: int | None = None, flagged_only: bool = True
) -> dict:
    scoring = scoring_settings()
    board = leaderboard(judge=judge, setting=setting, settings=scoring)
    model_ids = dict(EvaluatedModel.objects.values_list("name", "id"))
    rest = rest_scores(board.scores, board.question_ids, model_ids)
    on_final = Verdict.objects.filter(
        response__setting=setting,
        check_row__version_id__in=final_version_ids(),
        check_row__deleted_at__isnull=True,
        response__question__dropped_at__isnull=True,
    )
    graded = list(
        on_final.filter(judge=judge)
        .values_list("check_row_id", "response__question_id", "response__model_id", "verdict")
        .order_by()
    )
    judged = list(
        on_final.values_list("check_row_id", "response_id", "judge_id", "verdict").order_by()
    )
    infos = check_information(graded, rest, judged, lam=scoring.lambda_)
    shown = [i for i in infos if i.flags or not flagged_only]
    if rubric_id is not None:
        # Flags are judged against every check (a disagreement far above the rest); only
        # the rows are this rubric's.
        own = set(
            RubricCheck.objects.filter(version__rubric_id=rubric_id).values_list("pk", flat=True)
        )
        shown = [i for i in shown if i.check in own]
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
        "checks": len(infos),
        "flagged": sum(1 for i in infos if i.flags),
        "rows": rows,
    }
