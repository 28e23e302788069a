"""The leaderboard page and its CSV and JSON exports."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from core import access
from judging.csv_export import csv_response
from judging.leaderboard import COMPARISON_COLUMNS, EXPORT_COLUMNS, board_as_dict, leaderboard
from judging.models import Judge, Setting
from judging.verdicts.services import scoring_settings


def _chart(value: float | None) -> dict:
    """A Gamut x100 in [-100, 100] as a bar from the middle of a 0..100 track."""
    if value is None:
        return {"bar": 0, "negative": False}
    return {"bar": round(abs(value) / 2), "negative": value < 0}


def _matrix(board) -> list[dict]:
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


@access.role_required(access.ADMIN)
def leaderboard_page(request: HttpRequest) -> HttpResponse:
    judges = list(Judge.objects.order_by("name"))
    judge = next(
        (j for j in judges if j.name == request.GET.get("judge")), judges[0] if judges else None
    )
    setting = request.GET.get("setting", Setting.MULTIMODAL)
    if setting not in Setting.values:
        setting = Setting.MULTIMODAL
    scoring = scoring_settings()
    board = (
        leaderboard(judge=judge, setting=setting, settings=scoring, audit=True) if judge else None
    )
    export = request.GET.get("format")
    if export in ("csv", "json") and board is None:
        return HttpResponse("No judge yet.", status=404, content_type="text/plain")
    if export == "json":
        return JsonResponse(board_as_dict(board))
    if export == "csv":
        table = request.GET.get("table", "rows")
        if table not in ("rows", "comparisons"):
            return HttpResponse(
                "table must be rows or comparisons", status=400, content_type="text/plain"
            )
        if table == "comparisons":
            return csv_response(
                f"leaderboard-{board.judge}-{board.setting}-comparisons",
                COMPARISON_COLUMNS,
                [pair.as_dict() for pair in board.comparisons],
            )
        return csv_response(
            f"leaderboard-{board.judge}-{board.setting}",
            EXPORT_COLUMNS,
            [row.as_dict() for row in board.rows],
        )
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
            "matrix": _matrix(board) if board else [],
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
        from judging.runs.services import run_estimate  # the judging console's own estimate
        from llm.jobs import JobError

        try:
            out["estimate"] = run_estimate(
                "judge",
                {"judge": judge, "models": [], "settings": [setting], "ids": None, "batch": False},
            )
        except JobError as exc:
            out["error"] = str(exc)
    return out
