"""The review pages of stage 1: an annotator's review (with undo, skip and today's list) and an
adjudicator's settling of a dispute. Each view checks the role, calls one service, renders.

htmx requests get the page's partial (the review panel, the adjudication panel); plain form
posts get post-redirect-get, so every page also works without JavaScript.
"""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from core import access
from core.errors import DomainError
from core.http import refuse

from .. import candidates
from ..home.preferences import single_keys
from ..models import (
    REASON_TAGS,
    Candidate,
    Review,
)
from ..training.views import GOLD_FEEDBACK, gold_feedback, training_notice
from . import services
from .selectors import review_progress, today_start
from .word_diff import word_diff


def _revision(request: HttpRequest) -> str:
    """The page's form always has the revision box (hidden unless revising, and prefilled, so a
    page without JavaScript still works): only a revise decision uses its text."""
    return request.POST.get("revised_text", "") if request.POST.get("decision") == "revise" else ""


# --- annotators ---------------------------------------------------------------------------


SKIPPED = "review_skipped"  # session key: candidates this person handed back in this sitting
REOPENED = "review_reopened"  # session key: what an undo from the list took back, for the form


def _review_context(
    request: HttpRequest,
    *,
    error: DomainError | None = None,
    previous: dict | None = None,
    claim: bool = True,
) -> dict:
    """The review panel. `claim`: reserve the next candidate (the answers to POSTs); without
    it (a GET of the page) only the candidate the person holds is shown, and a page without
    one claims on load (review.html's claim form): a visit changes nothing."""
    skip = request.session.get(SKIPPED, [])
    if claim:
        claimed = services.review_claim(user=request.user, skip=skip)
    else:
        claimed = services.review_held(user=request.user, skip=skip)
    last = (
        Review.objects.filter(annotator=request.user, created_at__gte=today_start())
        .select_related("candidate")
        .order_by("-created_at", "-id")
        .first()
    )
    return {
        "claimed": claimed,
        "candidate": claimed.candidate if claimed else None,
        "claim_on_load": not claim and claimed is None,
        "reason_tags": REASON_TAGS,
        "progress": review_progress(request.user),
        "training": training_notice(request.user),
        "error": error,
        "previous": previous or {},
        # A fresh key for each form drawn: the same form sent twice carries the same key.
        "submission_key": uuid.uuid4(),
        # Offered until the candidate is resolved: a disputed one looks open to its annotators.
        "undoable": last if last and last.candidate.status in candidates.UNRESOLVED else None,
        "skipped": len(skip),
        "single_keys": single_keys(request.user),
    }


@access.role_required(access.ANNOTATOR)
@require_http_methods(["GET", "POST"])
@never_cache
def review_page(request: HttpRequest) -> HttpResponse:
    """GET shows the candidate the person holds (a visit changes nothing: a link from another
    site cannot claim); POST claims the next one, which the page does on load with htmx when
    nothing is held, and the buttons "Check again" and "Show the skipped ones again" without
    JavaScript. Never kept in the browser's cache: Back and Forward ask for the page anew
    instead of bringing back a form already sent."""
    if request.method == "POST":
        if request.POST.get("skipped") == "clear":
            request.session.pop(SKIPPED, None)
        context = _review_context(request)
        if request.htmx:
            return render(request, "annotation/review/review.html#panel", context)
        if context["claimed"] is not None:
            return redirect("review")
        return render(request, "annotation/review/review.html", context)  # nothing left: said here
    context = _review_context(request, claim=False)
    reopened = request.session.pop(REOPENED, None)
    if reopened and context["candidate"] and reopened.get("candidate") == context["candidate"].pk:
        context["previous"] = reopened
    context["gold_feedback"] = request.session.pop(GOLD_FEEDBACK, None)
    if context["gold_feedback"]:
        context["claim_on_load"] = False  # read first: Continue claims the next
    return render(request, "annotation/review/review.html", context)


@access.role_required(access.ANNOTATOR)
@require_POST
def review_undo(request: HttpRequest) -> HttpResponse:
    """Take back the latest review (or the one named by review_id, from the list of today's
    reviews) and show its candidate again with what was chosen."""
    review_id = request.POST.get("review_id") or None
    if review_id is not None and not review_id.isdigit():
        return HttpResponse("review_id must be a review's number.", status=400)
    try:
        values = services.review_undo(
            user=request.user, review_id=int(review_id) if review_id else None
        )
    except DomainError as exc:

        def panel(exc: DomainError) -> HttpResponse:
            context = _review_context(request)
            context["notice"] = exc.message
            return render(request, "annotation/review/review.html#panel", context)

        return refuse(
            request, exc, redirect_to="review_mine" if review_id else "review", partial=panel
        )
    candidate = values.pop("candidate")
    skipped = request.session.get(SKIPPED, [])
    if candidate.pk in skipped:
        request.session[SKIPPED] = [pk for pk in skipped if pk != candidate.pk]
    notice = "Review taken back: change it and submit again."
    if not request.htmx:
        request.session[REOPENED] = {**values, "candidate": candidate.pk}
        messages.success(request, notice)
        return redirect("review")
    context = _review_context(request, previous=values)
    context["notice"] = notice
    return render(request, "annotation/review/review.html#panel", context)


@access.role_required(access.ANNOTATOR)
@require_POST
def review_skip(request: HttpRequest, candidate_id: int) -> HttpResponse:
    """Hand the candidate back to the pool and show the next one."""
    services.review_skip(user=request.user, candidate_id=candidate_id)
    skipped = request.session.get(SKIPPED, [])
    if candidate_id not in skipped:
        request.session[SKIPPED] = [*skipped, candidate_id][-500:]
    notice = "Skipped: the candidate is back in the pool."
    if not request.htmx:
        # The next one is claimed here, in the POST: the page the redirect shows only reads.
        services.review_claim(user=request.user, skip=request.session.get(SKIPPED, []))
        messages.success(request, notice)
        return redirect("review")
    context = _review_context(request)
    context["notice"] = notice
    return render(request, "annotation/review/review.html#panel", context)


@access.role_required(access.ANNOTATOR)
@never_cache
def review_mine(request: HttpRequest) -> HttpResponse:
    """This person's reviews of today, newest first; each can be changed until its candidate
    is resolved."""
    reviews = (
        Review.objects.filter(annotator=request.user, created_at__gte=today_start())
        .select_related("candidate__image")
        .order_by("-created_at", "-id")
    )
    labels = dict(REASON_TAGS)
    rows = [
        {
            "review": r,
            # A disputed candidate reads as one still in review: changeable, as an open one.
            "editable": r.candidate.status in candidates.UNRESOLVED,
            "reason_labels": [labels.get(t, t) for t in r.reasons],
        }
        for r in reviews
    ]
    return render(request, "annotation/review/mine.html", {"rows": rows})


@access.role_required(access.ANNOTATOR)
@require_POST
def review_submit(request: HttpRequest, candidate_id: int) -> HttpResponse:
    form = {
        "decision": request.POST.get("decision", ""),
        "revised_text": _revision(request),
        "reasons": request.POST.getlist("reasons"),
        "comment": request.POST.get("comment", ""),
        "seconds": request.POST.get("seconds") or None,
    }
    key = request.POST.get("submission_key") or None
    try:
        answer = services.review_submit(
            user=request.user, candidate_id=candidate_id, submission_key=key, **form
        )
    except DomainError as exc:

        def panel(exc: DomainError) -> HttpResponse:
            context = _review_context(request, error=exc, previous=form)
            if exc.status in (403, 409):  # the candidate is gone for this person: the next
                context["notice"] = exc.message
                context["refused"] = True  # said in the warning colour, not as a success
                context["error"] = None
                # An answer sent again under its key with another choice: what is recorded,
                # and the way to change it.
                context["conflict"] = exc if isinstance(exc, services.SubmissionConflict) else None
                return render(request, "annotation/review/review.html#panel", context)
            # htmx swaps a 400 in (base.html's responseHandling): the form again, the field named
            return render(request, "annotation/review/review.html#panel", context, status=400)

        if isinstance(exc, services.SubmissionConflict) and not request.htmx:
            # Without JavaScript, the list of today's reviews is where Change is.
            messages.error(request, exc.message)
            return redirect("review_mine" if exc.changeable else "review")
        return refuse(request, exc, redirect_to="review", partial=panel)
    feedback = gold_feedback(answer)  # the expert's answer, after a gold item
    if not request.htmx:
        if feedback:
            # Shown alone with Continue: the next candidate is claimed when the person goes on.
            request.session[GOLD_FEEDBACK] = feedback
        else:
            # The next one is claimed here, in the POST: the page the redirect shows only reads.
            services.review_claim(user=request.user, skip=request.session.get(SKIPPED, []))
        messages.success(request, "Review saved.")
        return redirect("review")
    if feedback:
        # The expert's answer alone, read before the next question (Continue claims it).
        context = _review_context(request, claim=False)
        context.update(gold_feedback=feedback, candidate=None, claimed=None, claim_on_load=False)
    else:
        context = _review_context(request)
    context["notice"] = "Review saved."
    return render(request, "annotation/review/review.html#panel", context)


# --- adjudicators -------------------------------------------------------------------------


def _adjudication_context(
    request: HttpRequest, *, error=None, previous=None, claim: bool = True
) -> dict:
    """The adjudication panel; without `claim` (a GET) only the dispute held, as on /review/."""
    if claim:
        claimed = services.adjudication_claim(user=request.user)
    else:
        claimed = services.adjudication_held(user=request.user)
    context = {
        "claimed": claimed,
        "claim_on_load": not claim and claimed is None,
        "candidate": None,
        "error": error,
        "previous": previous or {},
        "reason_labels": dict(REASON_TAGS),
    }
    if claimed:
        candidate = claimed.candidate
        reviews = list(candidate.reviews.select_related("annotator").order_by("slot"))
        for review in reviews:
            review.diff = (
                word_diff(candidate.text, review.revised_text) if review.revised_text else None
            )
            review.reason_labels = [dict(REASON_TAGS).get(r, r) for r in review.reasons]
        context.update(
            candidate=candidate,
            reviews=reviews,
            can_accept=any(r.decision == "accept" for r in reviews),
            revisions=[r for r in reviews if r.decision == "revise"],
        )
    context["waiting"] = Candidate.objects.adjudicable_by(request.user).count()
    context["submission_key"] = uuid.uuid4()
    context["single_keys"] = single_keys(request.user)
    return context


@access.role_required(access.ADJUDICATOR)
@require_http_methods(["GET", "POST"])
@never_cache
def adjudicate_page(request: HttpRequest) -> HttpResponse:
    """As the review page: GET shows the dispute held, POST claims the next."""
    if request.method == "GET":
        context = _adjudication_context(request, claim=False)
        return render(request, "annotation/review/adjudicate.html", context)
    context = _adjudication_context(request)
    if request.htmx:
        return render(request, "annotation/review/adjudicate.html#panel", context)
    if context["claimed"] is not None:
        return redirect("adjudicate")
    return render(request, "annotation/review/adjudicate.html", context)


@access.role_required(access.ADJUDICATOR)
@require_POST
def adjudicate_submit(request: HttpRequest, candidate_id: int) -> HttpResponse:
    form = {
        "decision": request.POST.get("decision", ""),
        "revised_text": _revision(request),
        "comment": request.POST.get("comment", ""),
        "seconds": request.POST.get("seconds") or None,
    }
    key = request.POST.get("submission_key") or None
    try:
        adjudication = services.adjudication_resolve(
            user=request.user, candidate_id=candidate_id, submission_key=key, **form
        )
    except DomainError as exc:
        return refuse(
            request,
            exc,
            redirect_to="adjudicate",
            # htmx swaps a 400 in (base.html's responseHandling): the form again, the field named
            partial=lambda exc: render(
                request,
                "annotation/review/adjudicate.html#panel",
                _adjudication_context(request, error=exc, previous=form),
                status=400 if exc.status == 400 else 200,
            ),
        )
    notice = "Decision saved."
    if adjudication.decision == "revise":
        notice = (
            f"Decision saved: “{adjudication.revised_text}” is a new candidate of the next round."
        )
    if not request.htmx:
        services.adjudication_claim(user=request.user)  # the next, claimed in the POST
        messages.success(request, notice)
        return redirect("adjudicate")
    context = _adjudication_context(request)
    context["notice"] = notice
    return render(request, "annotation/review/adjudicate.html#panel", context)
