"""The home page (each role's counts), an annotator's own figures (/me/) and the single-key
shortcuts' switch."""

from __future__ import annotations

import statistics
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, F, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from core import access
from core.http import safe_next
from rubrics.services import revision_queue

from ..models import (
    Candidate,
    Image,
    Review,
)
from ..questions.pipeline import pipeline_counts
from ..review.selectors import review_progress
from . import preferences


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    context: dict = {}
    if access.is_annotator(user):
        context["annotator"] = review_progress(user)
        # Proposed entities come first: their images' candidates wait for them.
        context["entities_waiting"] = Image.objects.entity_proposed().count()
    if access.is_adjudicator(user):
        context["adjudicator"] = {
            "waiting": Candidate.objects.adjudicable_by(user).count(),
            "done_today": user.adjudications.filter(
                created_at__gte=timezone.now() - timedelta(hours=24)
            ).count(),
        }
    if access.is_reviser(user):
        context["reviser"] = {"waiting": len(revision_queue())}
    if access.is_admin(user):
        context["admin"] = pipeline_counts()
    return render(request, "annotation/home/home.html", context)


@access.role_required(access.MEMBER)
@require_POST
def preference_shortcuts(request: HttpRequest) -> HttpResponse:
    """Turn single-key shortcuts on or off for this person (on=1 or on=0)."""
    value = request.POST.get("on")
    if value not in ("0", "1"):
        return HttpResponse("on must be 0 or 1.", status=400)
    preferences.preference_set(user=request.user, single_key_shortcuts=value == "1")
    messages.success(
        request,
        "Single-key shortcuts are on."
        if value == "1"
        else "Single-key shortcuts are off: Enter still submits; use the buttons, Tab "
        "and Space for the rest.",
    )
    return redirect(request.POST["next"] if safe_next(request) else "home")


@access.role_required(access.ANNOTATOR)
def my_work(request: HttpRequest) -> HttpResponse:
    """An annotator's own figures: done today and this week, median seconds, how often the
    adjudicator took the same decision on the candidates that reached one, the session's bar."""
    user = request.user
    now = timezone.localtime()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    week = today - timedelta(days=today.weekday())  # since Monday
    mine = Review.objects.filter(annotator=user)
    figures = mine.aggregate(
        today=Count("id", filter=Q(created_at__gte=today)),
        week=Count("id", filter=Q(created_at__gte=week)),
        total=Count("id"),
        adjudicated=Count("id", filter=Q(candidate__adjudication__isnull=False)),
        agreed=Count("id", filter=Q(candidate__adjudication__decision=F("decision"))),
    )
    seconds = sorted(
        mine.filter(created_at__gte=week, seconds__isnull=False).values_list("seconds", flat=True)
    )
    waiting = Candidate.objects.waiting_counts(user)["waiting"]
    session = figures["today"] + waiting
    return render(
        request,
        "annotation/home/me.html",
        {
            "figures": figures,
            "median_seconds": statistics.median(seconds) if seconds else None,
            "agreement": (
                figures["agreed"] / figures["adjudicated"] if figures["adjudicated"] else None
            ),
            "waiting": waiting,
            # Today's session: the reviews done against those done plus those still waiting.
            "session": {
                "done": figures["today"],
                "total": session,
                "percent": round(100 * figures["today"] / session) if session else 0,
            },
        },
    )
