"""The analyses' pages (admins). /agreement/: the agreement figures, and accuracy on gold and
audit overturns per annotator and per week. /diversity/: templates among the final questions
beside all candidates, per domain, with the largest templates and their examples, as the
background job last computed them (POST: Recompute); `?format=json` (both scopes) and
`?format=csv&scope=final|candidates&table=domains|templates|guard_prompts`."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core import access
from core.errors import Unavailable
from judging.csv_export import csv_response
from llm.views import STOP_POLLING

from . import diversity_jobs
from .agreement import agreement_report
from .diversity_report import SCOPES, csv_rows
from .quality_report import (
    ANNOTATOR_COLUMNS,
    WEEK_COLUMNS,
    quality_report,
    trend_chart,
)

TABLES = ("domains", "templates", "guard_prompts")


def _bad(message: str) -> HttpResponse:
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")


def _chart(report: dict) -> list[dict]:
    """The template size distribution as bars on a 0..100 track."""
    top = max((row["templates"] for row in report["size_distribution"]), default=0) or 1
    return [
        {**row, "bar": round(100 * row["templates"] / top)} for row in report["size_distribution"]
    ]


@access.role_required(access.ADMIN)
@require_http_methods(["GET", "POST"])
def diversity_page(request: HttpRequest) -> HttpResponse:
    """The stored report (the latest computation that is over) with when it was computed and
    how long it took; POST (Recompute) launches a new computation in the background, and the
    page shows its progress until it is over, then the new report."""
    if request.method == "POST":
        try:
            job = diversity_jobs.launch(request.user)
        except diversity_jobs.AlreadyRunning as exc:
            messages.info(request, f"The report is being computed already (job {exc.job.pk}).")
        except Unavailable as exc:  # the task queue is down: nothing was launched
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Computing the report in the background (job {job.pk}).")
        return redirect("diversity")
    export = request.GET.get("format")
    if export not in (None, "html", "csv", "json"):
        return _bad("format must be html, csv or json")
    found = diversity_jobs.stored()
    if request.htmx:
        # The progress box polls while a computation runs; once it is over, the whole page
        # reloads to show the new report.
        if found.running is None:
            response = HttpResponse(status=STOP_POLLING)
            response["HX-Refresh"] = "true"
            return response
        return render(
            request, "annotation/analysis/diversity.html#progress", {"running": found.running}
        )
    if export == "csv":
        scope = request.GET.get("scope", "final")
        table = request.GET.get("table", "templates")
        if scope not in SCOPES:
            return _bad(f"scope must be one of: {', '.join(SCOPES)}")
        if table not in TABLES:
            return _bad(f"table must be one of: {', '.join(TABLES)}")
        if scope not in found.reports:
            return _not_computed()
        columns, rows = csv_rows(found.reports[scope], table)
        return csv_response(f"diversity-{scope}-{table}", columns, rows)
    if export == "json":
        if not found.reports:
            return _not_computed()
        return JsonResponse(
            {scope: diversity_jobs.with_times(scope, found) for scope in SCOPES},
            json_dumps_params={"indent": 1},
        )
    views = [
        {
            "scope": scope,
            "label": SCOPES[scope],
            "report": report,
            "seconds": found.seconds[scope],
            "sizes": _chart(report),
            "domains": [
                {**d, "bar": round(100 * (d["top5_share"] or 0))} for d in report["domains"]
            ],
        }
        for scope, report in ((s, found.reports[s]) for s in SCOPES if s in found.reports)
    ]
    return render(
        request,
        "annotation/analysis/diversity.html",
        {
            "views": views,
            "found": found,
            "running": found.running,
            "failed": [(SCOPES[s], reason) for s, reason in found.failed.items()],
        },
    )


def _not_computed() -> HttpResponse:
    return HttpResponse(
        "The diversity report has not been computed yet: an admin starts it with Recompute "
        "on the Question diversity page.",
        status=404,
        content_type="text/plain; charset=utf-8",
    )


@access.role_required(access.ADMIN)
def agreement(request: HttpRequest) -> HttpResponse:
    """The agreement figures, and accuracy on gold and audit overturns per annotator and per
    week: `?format=json`, `?format=csv&table=quality|weeks`."""
    export = request.GET.get("format")
    if export not in (None, "html", "csv", "json"):
        return HttpResponse("format must be html, csv or json", status=400)
    quality = quality_report()
    if export == "json":
        return JsonResponse(quality, json_dumps_params={"indent": 1})
    if export == "csv":
        table = request.GET.get("table", "quality")
        if table not in ("quality", "weeks"):
            return HttpResponse("table must be quality or weeks", status=400)
        if table == "quality":
            return csv_response("agreement-quality", ANNOTATOR_COLUMNS, quality["annotators"])
        return csv_response("agreement-weeks", WEEK_COLUMNS, quality["weeks"])
    report = agreement_report()
    max_reviews = max((a.reviews for a in report.annotators), default=0) or 1
    for stats in report.annotators:
        stats.bar = round(100 * stats.reviews / max_reviews)
    for pair in report.pairs:
        # kappa in [-1, 1] drawn as a bar from the middle of the track
        pair.bar = round(50 * abs(pair.kappa)) if pair.kappa is not None else 0
        pair.negative = pair.kappa is not None and pair.kappa < 0
    return render(
        request,
        "annotation/analysis/agreement.html",
        {"report": report, "quality": quality, "trend": trend_chart(quality["weeks"])},
    )
