"""Human spot checks: graders (rubric revisers and admins) grade, admins draw (among the
disagreements, or the random audit) and read each judge's agreement with people and the judges
measured against people. Graders never see the judges' verdicts, nor a first grader's."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core import access

from ..csv_export import csv_response
from ..models import SpotCheck, VerdictValue
from . import judge_quality as quality
from .audit import audit_draw, audit_report
from .services import (
    GRADES,
    SpotCheckError,
    judge_agreement,
    spot_check_claim,
    spot_check_grade,
    spot_check_held,
    spot_check_progress,
    spot_check_view,
    spot_checks_draw,
)

EXPORT_COLUMNS = ["judge", "graded", "exact", "exact_rate", "same_side", "same_side_rate"]
MAX_DRAW = 5_000
MAX_AUDIT = 20_000


def _grade_context(spot: SpotCheck | None, *, claim_on_load: bool = False) -> dict:
    context = {
        "progress": spot_check_progress(),
        "grades": [(v, VerdictValue(v).label, n) for n, v in enumerate(GRADES, 1)],
        "claim_on_load": claim_on_load,
    }
    if spot is not None:
        context["second"] = spot.double and spot.graded_at is not None
        spot = SpotCheck.objects.select_related(
            "response__question__image", "check_row__version"
        ).get(pk=spot.pk)
        context.update(spot_check_view(spot))
    return context


@access.role_required(access.RUBRIC_REVISER, access.ADMIN)
@require_http_methods(["GET", "POST"])
@never_cache
def grade_page(request: HttpRequest) -> HttpResponse:
    """GET shows the spot check the grader holds and claims nothing (a link from another site
    cannot); POST claims the next, as the page does on load with htmx when none is held, and
    its button without JavaScript."""
    if request.method == "GET":
        spot = spot_check_held(user=request.user)
        context = _grade_context(spot, claim_on_load=spot is None)
        return render(request, "judging/spot_checks/grade.html", context)
    spot = spot_check_claim(user=request.user)
    if request.htmx:
        return render(request, "judging/spot_checks/grade.html#panel", _grade_context(spot))
    if spot is not None:
        return redirect("spot_checks")
    return render(request, "judging/spot_checks/grade.html", _grade_context(None))  # none left


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
    else:
        # The next one is claimed here, in the POST: the page the redirect shows only reads.
        spot_check_claim(user=request.user)
    return redirect("spot_checks")


@access.role_required(access.ADMIN)
def results_page(request: HttpRequest) -> HttpResponse:
    """Admins: draw spot checks (POST), read and export each judge's agreement with people."""
    if request.method == "POST" and request.POST.get("kind") == "audit":
        return _audit_draw(request)
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
        return JsonResponse(
            {"agreement": rows, "progress": spot_check_progress(), "audit": audit_report()}
        )
    if export == "csv":
        return csv_response("judge-agreement", EXPORT_COLUMNS, rows)
    return render(
        request,
        "judging/spot_checks/results.html",
        {
            "rows": rows,
            "progress": spot_check_progress(),
            "max_draw": MAX_DRAW,
            "max_audit": MAX_AUDIT,
            "audit": audit_report(),
        },
    )


def _audit_draw(request: HttpRequest) -> HttpResponse:
    try:
        count = int(request.POST.get("count", ""))
        share = float(request.POST.get("double_percent", "")) / 100
        if not 1 <= count <= MAX_AUDIT or not 0 <= share <= 1:
            raise ValueError
    except ValueError:
        messages.error(
            request, f"Audit between 1 and {MAX_AUDIT} pairs, a share graded twice of 0 to 100%."
        )
        return redirect("spot_check_results")
    try:
        drawn = audit_draw(count=count, double_share=share, user=request.user)
    except SpotCheckError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"{drawn} pair(s) added to the audit"
            + ("" if drawn == count else f": only {drawn} pair(s) were left to audit"),
        )
    return redirect("spot_check_results")


@access.role_required(access.ADMIN)
@require_GET
def quality_page(request: HttpRequest) -> HttpResponse:
    """Admins: each judge against people, the people against each other, calibration."""
    source = request.GET.get("source", "all")
    if source not in quality.SOURCES:
        source = "all"
    report = quality.judge_quality(source)
    export = request.GET.get("format")
    if export == "json":
        return JsonResponse(report)
    if export == "csv":
        return csv_response(
            f"judges-against-people-{source}", quality.EXPORT_COLUMNS, quality.export_rows(report)
        )
    for judge in report["judges"]:
        overall = next((g for g in judge["groups"] if g["by"] == "all"), None)
        judge["kappa"] = overall["kappa"] if overall else None
        judge["bar"] = _kappa_bar(judge["kappa"])
    people = next((g for g in report["people"] if g["by"] == "all"), None)
    return render(
        request,
        "judging/spot_checks/quality.html",
        {
            "report": report,
            "source": source,
            "sources": quality.SOURCES,
            "grades": GRADES,
            "people_kappa": people["kappa"] if people else None,
            "people_bar": _kappa_bar(people["kappa"] if people else None),
        },
    )


def _kappa_bar(kappa: float | None) -> dict:
    """Kappa in [-1, 1] as a bar from the middle of a 0..100 track."""
    if kappa is None:
        return {"value": None, "bar": 0, "negative": False}
    return {"value": kappa, "bar": round(abs(kappa) * 50), "negative": kappa < 0}
