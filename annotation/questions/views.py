"""The admins' pages of the questions: the pipeline (what each stage waits for, accepted
candidates awaiting the guard), a candidate's promotion by hand, and a question's corrections."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core import access
from core.errors import DomainError
from core.http import refuse, safe_next

from ..models import (
    AuditEvent,
    Candidate,
    CandidateStatus,
    FinalQuestion,
)
from . import services
from .pipeline import pipeline_counts, pipeline_waits

CORRECTION_ATTEMPT = "correction_attempt"  # session key: a refused correction's fields


@access.role_required(access.ADMIN)
def pipeline(request: HttpRequest) -> HttpResponse:
    awaiting = (
        Candidate.objects.filter(status=CandidateStatus.ACCEPTED, image__question__isnull=True)
        .select_related("image")
        .order_by("image_id", "id")[:100]
    )
    counts = pipeline_counts()
    return render(
        request,
        "annotation/questions/pipeline.html",
        {
            "counts": counts,
            "waits": pipeline_waits(counts),
            "awaiting": awaiting,
            "recent": AuditEvent.objects.select_related("actor", "image").order_by("-id")[:20],
        },
    )


@access.role_required(access.ADMIN)
@require_POST
def candidate_promote(request: HttpRequest, candidate_id: int) -> HttpResponse:
    try:
        question = services.final_question_promote(user=request.user, candidate_id=candidate_id)
    except DomainError as exc:
        return refuse(
            request, exc, redirect_to=request.POST["next"] if safe_next(request) else "pipeline"
        )
    messages.success(request, f"{question.image.source_id} now has its question.")
    return redirect(request.POST["next"] if safe_next(request) else "pipeline")


@access.role_required(access.ADMIN)
@require_POST
def question_correct(request: HttpRequest, question_id: int) -> HttpResponse:
    """Correct the ground-truth entity or the wording (field=entity|text), or drop or restore
    the question (field=drop|restore), with a reason."""
    question = get_object_or_404(FinalQuestion.objects.select_related("image"), pk=question_id)
    field_name = request.POST.get("field", "")
    reason = request.POST.get("reason", "")
    try:
        if field_name in ("drop", "restore"):
            services.question_drop(
                user=request.user,
                question_id=question.pk,
                reason=reason,
                restore=field_name == "restore",
            )
        else:
            services.question_correct(
                user=request.user,
                question_id=question.pk,
                field_name=field_name,
                value=request.POST.get("value", ""),
                reason=reason,
            )
    except DomainError as exc:
        # Kept for the page the redirect shows: the refused form comes back with what was typed.
        request.session[CORRECTION_ATTEMPT] = {
            "field": field_name,
            "value": request.POST.get("value", ""),
            "reason": reason,
        }
        return refuse(request, exc, redirect_to=reverse("image", args=[question.image.source_id]))
    messages.success(
        request,
        {
            "drop": "Question dropped.",
            "restore": "Question restored.",
        }.get(field_name, "Correction saved."),
    )
    return redirect("image", source_id=question.image.source_id)
