"""Human spot checks: graders (rubric revisers and admins) grade, admins draw and read each
judge's agreement with people. Graders never see the judges' verdicts."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from core import access

from .csv_export import csv_response
from .models import SpotCheck, VerdictValue
from .spot_checks import (
    GRADES,
    SpotCheckError,
    judge_agreement,
    spot_check_claim,
    spot_check_grade,
    spot_check_progress,
    spot_check_view,
    spot_checks_draw,
)

EXPORT_COLUMNS = ["judge", "graded", "exact", "exact_rate", "same_side", "same_side_rate"]
MAX_DRAW = 5_000


@access.role_required(access.RUBRIC_REVISER, access.ADMIN)
@require_GET
def grade_page(request: HttpRequest) -> HttpResponse:
    spot = spot_check_claim(user=request.user)
    context = {
        "progress": spot_check_progress(),
        "grades": [(v, VerdictValue(v).label, n) for n, v in enumerate(GRADES, 1)],
    }
    if spot is not None:
        spot = SpotCheck.objects.select_related(
            "response__question__image", "check_row__version"
        ).get(pk=spot.pk)
        context.update(spot_check_view(spot))
    return render(request, "judging/spot_grade.html", context)


@access.role_required(access.RUBRIC_REVISER, access.ADMIN)
@require_POST
def grade_submit(request: HttpRequest, spot_check_id: int) -> HttpResponse:
    try:
        spot_check_grade(
            spot_check_id=spot_check_id,
            user=request.user,
            verdict=request.POST.get("decision", ""),
            note=request.POST.get("note", ""),
        )
    except SpotCheckError as exc:
        messages.error(request, f"Not saved: {exc}.")
    return redirect("spot_checks")


@access.role_required(access.ADMIN)
def results_page(request: HttpRequest) -> HttpResponse:
    """Admins: draw spot checks (POST), read and export each judge's agreement with people."""
    if request.method == "POST":
        try:
            count = int(request.POST.get("count", ""))
            if not 1 <= count <= MAX_DRAW:
                raise ValueError
        except ValueError:
            messages.error(request, f"Draw between 1 and {MAX_DRAW} spot checks.")
            return redirect("spot_check_results")
        try:
            drawn = spot_checks_draw(count=count, user=request.user)
        except SpotCheckError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                f"{drawn} spot check(s) drawn"
                + ("" if drawn == count else f": only {drawn} disagreement(s) were left to draw"),
            )
        return redirect("spot_check_results")
    rows = [row.as_dict() for row in judge_agreement()]
    export = request.GET.get("format")
    if export == "json":
        return JsonResponse({"agreement": rows, "progress": spot_check_progress()})
    if export == "csv":
        return csv_response("judge-agreement", EXPORT_COLUMNS, rows)
    return render(
        request,
        "judging/spot_results.html",
        {"rows": rows, "progress": spot_check_progress(), "max_draw": MAX_DRAW},
    )
