"""Checks that carry no information (rubric revisers and admins): the flagged checks of the
final rubrics under one judge and setting, each linked to its rubric, where the next human
round is started; `?format=csv|json`."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from core import access

from ..csv_export import csv_response
from ..models import Judge, Setting
from ..verdicts.scoring import TIERS
from .report import COLUMNS, check_report

TIER_LABELS = {tier: tier.replace("_", "-").capitalize() for tier in TIERS}


def pick_judge(name: str | None) -> tuple[list[Judge], Judge | None]:
    judges = list(Judge.objects.order_by("name"))
    return judges, next((j for j in judges if j.name == name), judges[0] if judges else None)


@access.role_required(access.RUBRIC_REVISER, access.ADMIN)
def flagged_checks(request: HttpRequest) -> HttpResponse:
    judges, judge = pick_judge(request.GET.get("judge"))
    setting = request.GET.get("setting", Setting.MULTIMODAL)
    if setting not in Setting.values:
        return HttpResponse(
            "setting must be multimodal or text_only", status=400, content_type="text/plain"
        )
    export = request.GET.get("format")
    if export not in (None, "html", "csv", "json"):
        return HttpResponse(
            "format must be html, csv or json", status=400, content_type="text/plain"
        )
    report = check_report(judge, setting) if judge else None
    if export in ("csv", "json") and report is None:
        return HttpResponse("No judge yet.", status=404, content_type="text/plain")
    if export == "json":
        return JsonResponse(report)
    if export == "csv":
        rows = [{**r, "flags": "; ".join(r["flags"])} for r in report["rows"]]
        return csv_response(f"flagged-checks-{judge.name}-{setting}", COLUMNS, rows)
    return render(
        request,
        "judging/checks/flagged_checks.html",
        {
            "judges": judges,
            "judge": judge,
            "setting": setting,
            "settings": Setting.choices,
            "report": report,
            "tier_labels": TIER_LABELS,
        },
    )
