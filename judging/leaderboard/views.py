"""The result pages, for admins: the leaderboard, and the analyses beside it (multimodal against
text-only, judges compared, and one question's responses and verdicts). Each has
`?format=csv|json` exports; the analyses' JSON is the API's (judging/leaderboard/api.py), built
once in judging/leaderboard/reports.py. Each scores the release `?release=` names (`draft`: the
working draft; left out: the latest release), says which in its heading, and carries it into
its exports (judging/releases/scope.py)."""

from __future__ import annotations

import math

from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from annotation.models import FinalQuestion
from core import access
from core.errors import NotFound

from ..csv_export import csv_response
from ..models import Judge, ReleaseQuestion, Setting
from ..releases.scope import Scope, requested_scope
from ..releases.scores import release_board
from . import reports
from .analysis import LABELS
from .board import COMPARISON_COLUMNS, EXPORT_COLUMNS, board_as_dict, significance_grid

QUESTIONS_PER_PAGE = 100


def _chart(value: float | None) -> dict:
    """A Gamut x100 in [-100, 100] as a bar from the middle of a 0..100 track."""
    if value is None:
        return {"bar": 0, "negative": False}
    return {"bar": round(abs(value) / 2), "negative": value < 0}


def _scope(request: HttpRequest) -> Scope:
    """The release `?release=` names; the site's not-found page for a name no release has."""
    try:
        return requested_scope(request.GET.get("release"))
    except NotFound as exc:
        raise Http404(exc.message) from exc


def _csv(scope: Scope, name: str, columns: list[str], rows) -> HttpResponse:
    """A CSV export that names the release it scores: in its file name, and in the `release`
    and `release_hash` columns of every row."""
    extra = scope.csv_columns()
    return csv_response(
        f"{name}-{scope.file_part()}",
        [*columns, *extra],
        ({**row, **extra} for row in rows),
    )


@access.role_required(access.ADMIN)
def leaderboard_page(request: HttpRequest) -> HttpResponse:
    scope = _scope(request)
    judges = list(Judge.objects.order_by("name"))
    judge = next(
        (j for j in judges if j.name == request.GET.get("judge")), judges[0] if judges else None
    )
    setting = request.GET.get("setting", Setting.MULTIMODAL)
    if setting not in Setting.values:
        setting = Setting.MULTIMODAL
    export = request.GET.get("format")
    if export in ("csv", "json") and judge is None:
        return HttpResponse("No judge yet.", status=404, content_type="text/plain")
    scoring = scope.scoring()
    scored = (
        release_board(
            scope.release,
            judge=judge,
            setting=setting,
            settings=scoring,
            audit=True,
            estimate=export is None,
        )
        if judge
        else None
    )
    board = scored.board if scored else None
    if export == "json":
        return JsonResponse(board_as_dict(board, release=scope.release))
    if export == "csv":
        table = request.GET.get("table", "rows")
        if table not in ("rows", "comparisons"):
            return HttpResponse(
                "table must be rows or comparisons", status=400, content_type="text/plain"
            )
        if table == "comparisons":
            return _csv(
                scope,
                f"leaderboard-{board.judge}-{board.setting}-comparisons",
                COMPARISON_COLUMNS,
                [pair.as_dict() for pair in board.comparisons],
            )
        return _csv(
            scope,
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
        "judging/leaderboard/leaderboard.html",
        {
            "scope": scope,
            "matrix": significance_grid(board) if board else [],
            "judges": judges,
            "judge": judge,
            "setting": setting,
            "settings": Setting.choices,
            "board": board,
            "scoring": scoring,
            # Responses that wait for verdicts on the scope's checks (after a rubric round,
            # on the new final versions of the draft), with the judging job's estimate.
            "rejudge": scored if scored and scored.pending else None,
        },
    )


# --- the analyses beside the leaderboard -----------------------------------------------------


def _pick(judges: list[Judge], name: str | None, default: Judge | None) -> Judge | None:
    return next((j for j in judges if j.name == name), default)


def _setting(request: HttpRequest) -> str:
    setting = request.GET.get("setting", Setting.MULTIMODAL)
    return setting if setting in Setting.values else Setting.MULTIMODAL


def _no_judge() -> HttpResponse:
    return HttpResponse("No judge yet.", status=404, content_type="text/plain")


def _bar(value: float | None) -> dict:
    """A Gamut x100 in [-100, 100] as a bar from the middle of a 0..100 track (as on the
    leaderboard)."""
    if value is None:
        return {"bar": 0, "negative": False, "value": None}
    return {"bar": round(abs(value) / 2, 1), "negative": value < 0, "value": value}


@access.role_required(access.ADMIN)
def settings_page(request: HttpRequest) -> HttpResponse:
    scope = _scope(request)
    judges = list(Judge.objects.order_by("name"))
    judge = _pick(judges, request.GET.get("judge"), judges[0] if judges else None)
    export = request.GET.get("format")
    if judge is None:
        if export in ("csv", "json"):
            return _no_judge()
        return render(
            request, "judging/leaderboard/settings.html", {"judges": judges, "scope": scope}
        )
    report = reports.settings_report(judge, release=scope.release)
    if export == "json":
        return JsonResponse(report)
    if export == "csv":
        return _csv(scope, f"settings-{judge.name}", reports.SETTINGS_COLUMNS, report["rows"])
    for row in report["rows"]:
        row["bars"] = [(label, _bar(row[value])) for value, label in Setting.choices]
    return render(
        request,
        "judging/leaderboard/settings.html",
        {
            "scope": scope,
            "judges": judges,
            "judge": judge,
            "report": report,
        },
    )


@access.role_required(access.ADMIN)
def judges_page(request: HttpRequest) -> HttpResponse:
    scope = _scope(request)
    judges = list(Judge.objects.order_by("name"))
    setting = _setting(request)
    judge_a = _pick(judges, request.GET.get("a"), judges[0] if judges else None)
    judge_b = _pick(judges, request.GET.get("b"), next((j for j in judges if j != judge_a), None))
    export = request.GET.get("format")
    if export in ("csv", "json") and not judges:
        return _no_judge()
    report = reports.judges_report(
        setting=setting, judge_a=judge_a, judge_b=judge_b, release=scope.release
    )
    if export == "json":
        return JsonResponse(report)
    if export == "csv":
        table = request.GET.get("table", "scores")
        if table not in reports.JUDGES_TABLES:
            return HttpResponse(
                f"table must be one of {', '.join(reports.JUDGES_TABLES)}",
                status=400,
                content_type="text/plain",
            )
        columns, rows = reports.judges_table(report, table)
        return _csv(scope, f"judges-{setting}-{table}", columns, rows)
    for row in report["scores"]:
        row["bars"] = [(j, _bar(row["scores"][j])) for j in report["judges"]]
    matrix = report["confusion"]
    if matrix:
        # Each cell shaded in five steps of its count against the largest, as a heatmap.
        most = max((n for counts in matrix["counts"] for n in counts), default=0) or 1
        matrix["rows"] = [
            (
                label,
                [(col, n, math.ceil(5 * n / most)) for col, n in zip(LABELS, counts, strict=True)],
            )
            for label, counts in zip(LABELS, matrix["counts"], strict=True)
        ]
    return render(
        request,
        "judging/leaderboard/judges.html",
        {
            "scope": scope,
            "judges": judges,
            "setting": setting,
            "settings": Setting.choices,
            "judge_a": judge_a,
            "judge_b": judge_b,
            "report": report,
            "tables": reports.JUDGES_TABLES,
        },
    )


# Each verdict's mark in the heatmap, beside its colour, so that it reads without colour too.
VERDICT_MARKS = (
    ("meets", "✓"),
    ("partially_meets", "½"),
    ("missing", "○"),
    ("contradicts", "✗"),
    ("failed", "!"),
)


@access.role_required(access.ADMIN)
def questions_page(request: HttpRequest) -> HttpResponse:
    """The questions of the release (or of the working draft: every final question), to reach
    each one's results; `q` filters by source id, entity or wording."""
    scope = _scope(request)
    query = request.GET.get("q", "").strip()
    questions = (
        FinalQuestion.objects.select_related("image")
        .annotate(n_responses=Count("responses"))
        .order_by("image__source_id")
    )
    if scope.release is not None:
        questions = questions.filter(
            pk__in=ReleaseQuestion.objects.filter(release=scope.release)
            .values("question_id")
            .order_by()
        )
    if query:
        questions = questions.filter(
            Q(image__source_id__icontains=query)
            | Q(image__entity__icontains=query)
            | Q(text__icontains=query)
        )
    page = Paginator(questions, QUESTIONS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "judging/leaderboard/questions.html",
        {"page": page, "query": query, "scope": scope},
    )


@access.role_required(access.ADMIN)
def question_page(request: HttpRequest, source_id: str) -> HttpResponse:
    scope = _scope(request)
    try:
        question = reports.question_for(source_id)
    except FinalQuestion.DoesNotExist as exc:
        raise Http404("no final question for this image") from exc
    export = request.GET.get("format")
    try:
        report = reports.question_report(
            question,
            image_url=request.build_absolute_uri(reports.image_url_for(source_id)),
            release=scope.release,
        )
    except reports.NotInRelease as exc:
        if export is not None:
            raise Http404(exc.message) from exc
        # The page says so, and its selector leads to the draft or another release.
        return render(
            request,
            "judging/leaderboard/question.html",
            {"scope": scope, "question": question, "not_in_release": exc.message},
        )
    if export == "json":
        return JsonResponse(report)
    if export == "csv":
        return _csv(
            scope,
            f"question-{source_id}",
            reports.QUESTION_COLUMNS,
            reports.question_table(report),
        )
    checks = {c["check_id"]: c for c in report["checks"]}
    # The heatmap: one row per check, one column per (response, judge), each cell a verdict.
    columns = [(r, j) for r in report["responses"] for j in report["judges"]]
    given = [{e["check_id"]: e["judges"] for e in r["verdicts"]} for r in report["responses"]]
    heatmap = [
        (
            check,
            [
                given[i].get(check["check_id"], {}).get(j)
                for i, _ in enumerate(report["responses"])
                for j in report["judges"]
            ],
        )
        for check in report["checks"]
    ]
    for response in report["responses"]:
        response["rows"] = [
            (checks[entry["check_id"]], [(j, entry["judges"].get(j)) for j in report["judges"]])
            for entry in response["verdicts"]
        ]
        response["score_list"] = [(j, response["scores"][j]) for j in report["judges"]]
    return render(
        request,
        "judging/leaderboard/question.html",
        {
            "scope": scope,
            "report": report,
            "question": question,
            "heatmap": heatmap,
            "columns": columns,
            "verdict_marks": VERDICT_MARKS,
        },
    )
