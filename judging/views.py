"""The leaderboard page and its CSV and JSON exports."""

from __future__ import annotations

import csv

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from annotation import access

from .leaderboard import EXPORT_COLUMNS, leaderboard
from .models import Judge, Setting
from .services import scoring_settings


def _chart(value: float | None) -> dict:
    """A Gamut x100 in [-100, 100] as a bar from the middle of a 0..100 track."""
    if value is None:
        return {"bar": 0, "negative": False}
    return {"bar": round(abs(value) / 2), "negative": value < 0}


@login_required
def leaderboard_page(request: HttpRequest) -> HttpResponse:
    if not access.is_admin(request.user):
        raise PermissionDenied("This page is for admins.")
    judges = list(Judge.objects.order_by("name"))
    judge = next(
        (j for j in judges if j.name == request.GET.get("judge")), judges[0] if judges else None
    )
    setting = request.GET.get("setting", Setting.MULTIMODAL)
    if setting not in Setting.values:
        setting = Setting.MULTIMODAL
    scoring = scoring_settings()
    board = leaderboard(judge=judge, setting=setting, settings=scoring) if judge else None
    export = request.GET.get("format")
    if export in ("csv", "json") and board is None:
        return HttpResponse("No judge yet.", status=404, content_type="text/plain")
    if export == "json":
        return JsonResponse(
            {
                "judge": board.judge,
                "setting": board.setting,
                "questions": board.questions,
                "rows": [row.as_dict() for row in board.rows],
            }
        )
    if export == "csv":
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="leaderboard-{board.judge}-{board.setting}.csv"'
        )
        writer = csv.DictWriter(response, fieldnames=EXPORT_COLUMNS)
        writer.writeheader()
        for row in board.rows:
            writer.writerow({k: "" if v is None else v for k, v in row.as_dict().items()})
        return response
    if board:
        for row in board.rows:
            row.chart = _chart(row.gamut)
            if row.low is not None:
                row.chart["ci_low"] = round(50 + row.low / 2, 1)
                row.chart["ci_high"] = round(50 + row.high / 2, 1)
    return render(
        request,
        "judging/leaderboard.html",
        {
            "judges": judges,
            "judge": judge,
            "setting": setting,
            "settings": Setting.choices,
            "board": board,
            "scoring": scoring,
            "rejudge": _rejudge(judge, setting, board) if board else None,
        },
    )


def _rejudge(judge: Judge, setting: str, board) -> dict | None:
    """After a rubric round the responses wait for verdicts on the new final versions, and the
    board shows them as pending: say so, and offer the judging job with its estimate here."""
    pending = sum(row.pending for row in board.rows)
    if not pending:
        return None
    out: dict = {
        "pending": pending,
        "estimate": None,
        "error": "",
        "can_launch": judge.llm_model_id is not None,
    }
    if out["can_launch"]:
        from llm.jobs import JobError

        from .views_runs import _estimate  # the judging console's own estimate

        try:
            out["estimate"] = _estimate(
                "judge",
                {"judge": judge, "models": [], "settings": [setting], "ids": None, "batch": False},
            )
        except JobError as exc:
            out["error"] = str(exc)
    return out
