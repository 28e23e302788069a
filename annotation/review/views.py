"""Pages of stage 1. Each view checks the role, calls one service, renders.

htmx requests get the page's partial (the review panel, the adjudication panel); plain form
posts get post-redirect-get, so every page also works without JavaScript.
"""

from __future__ import annotations

import difflib
import math
import statistics
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import PurePosixPath

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Exists, F, Max, OuterRef, Q
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from core import access
from core.errors import DomainError, TooLarge
from core.http import refuse
from core.middleware import takes_upload
from judging.csv_export import csv_response
from rubrics.models import Rubric, RubricVersion
from rubrics.services import revision_queue

from . import services, views_training
from .agreement import agreement_report
from .importing import (
    CONTENT_TYPES,
    ImportProblems,
    import_from_upload,
    problems_shown,
    read_manifest,
)
from .models import (
    REASON_TAGS,
    AuditEvent,
    Candidate,
    CandidateStatus,
    FinalQuestion,
    Image,
    ImageStatus,
    ImportBatch,
    Popularity,
    Preference,
    Review,
    image_status,
)
from .quality_report import ANNOTATOR_COLUMNS, WEEK_COLUMNS, quality_report, trend_chart

# A photo opened on its own: nothing may load or run, and it has no origin of its own.
PHOTO_CSP = "default-src 'none'; sandbox"

# --- login: django-axes limits failed attempts (settings AXES_*); this is its lockout page ---


def login_username(request: HttpRequest, credentials: dict | None = None) -> str | None:
    """The user name axes counts a failure under (AXES_USERNAME_CALLABLE): the one posted, cut
    to the longest a user name can be. Django's login form does not enforce that length, and
    axes' attempt table would refuse a longer one (a 500 on PostgreSQL); no user has it anyway."""
    from django.contrib.auth import get_user_model

    username = (credentials or {}).get("username")
    if username is None:
        username = request.POST.get("username")
    longest = get_user_model()._meta.get_field("username").max_length
    return None if username is None else str(username)[:longest]


def login_locked_out(
    request: HttpRequest, original_response=None, credentials: dict | None = None
) -> HttpResponse:
    """What axes answers, on our login page and the admin's, for a (user name, address) pair
    with too many failures: 429, and when the lock lifts (the cool-off after the last failure;
    attempts during the lock are not counted, settings.AXES_RESET_COOL_OFF_ON_FAILURE_...)."""
    from axes.helpers import get_client_username, get_cool_off
    from axes.models import AccessAttempt

    from gamut_site.proxies import client_ip

    username = get_client_username(request, credentials) or ""
    address = getattr(request, "axes_ip_address", None) or client_ip(request)
    now = timezone.now()
    last = (
        AccessAttempt.objects.filter(username=username, ip_address=address).aggregate(
            last=Max("attempt_time")
        )["last"]
        or now
    )
    retry_at = last + (get_cool_off(request) or timedelta(0))
    seconds = max(1, math.ceil((retry_at - now).total_seconds()))
    response = render(
        request,
        "registration/locked_out.html",
        {
            "username": username,
            "retry_at": retry_at,
            "minutes": math.ceil(seconds / 60),
        },
        status=429,
    )
    response["Retry-After"] = str(seconds)
    return response


# --- helpers ------------------------------------------------------------------------------


def _progress(user) -> dict:
    start = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return {
        "done_today": Review.objects.filter(annotator=user, created_at__gte=start).count(),
        "waiting": Candidate.objects.waiting_for(user).count(),
    }


def _revision(request: HttpRequest) -> str:
    """The page's form always has the revision box (hidden unless revising, and prefilled, so a
    page without JavaScript still works): only a revise decision uses its text."""
    return request.POST.get("revised_text", "") if request.POST.get("decision") == "revise" else ""


def word_diff(original: str, revised: str):
    """The revision against the original, word by word, as safe HTML with <del> and <ins>."""
    a, b = original.split(), revised.split()
    parts = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            parts.append(escape(" ".join(a[i1:i2])))
        if op in ("delete", "replace"):
            parts.append(f"<del>{escape(' '.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            parts.append(f"<ins>{escape(' '.join(b[j1:j2]))}</ins>")
    return mark_safe(" ".join(parts))


# --- home, photos -------------------------------------------------------------------------


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    context: dict = {}
    if access.is_annotator(user):
        context["annotator"] = _progress(user)
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
        context["admin"] = _pipeline_counts()
    return render(request, "annotation/home.html", context)


@access.role_required(access.MEMBER, api_token=True)
def image_file(request: HttpRequest, source_id: str) -> FileResponse:
    image = get_object_or_404(Image, source_id=source_id)
    # The content type comes from the stored extension, which the import took from the decoded
    # format; a file with any other extension (stored before that, or quarantined by
    # recheck_images) is never served, whatever its bytes.
    content_type = CONTENT_TYPES.get(PurePosixPath(image.file.name).suffix.lower())
    if content_type is None:
        raise Http404("the photo is not a JPEG, PNG, WebP or GIF file; run recheck_images")
    try:
        handle = image.file.open("rb")
    except FileNotFoundError as exc:
        raise Http404("the photo's file is missing") from exc
    response = FileResponse(handle, content_type=content_type)
    response["Cache-Control"] = "private, max-age=3600"
    # Even bytes that are also a script or a page (a polyglot) stay an image: no sniffing, and
    # opened on their own they get a sandbox with no origin and nothing allowed to load or run.
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = PHOTO_CSP
    return response


# --- annotators ---------------------------------------------------------------------------


SKIPPED = "review_skipped"  # session key: candidates this person handed back in this sitting
REOPENED = "review_reopened"  # session key: what an undo from the list took back, for the form


def single_keys(user) -> bool:
    """Whether this person's pages answer single-key shortcuts (on unless turned off). The
    preference is read once per request: Django keeps it on the user object."""
    try:
        return user.preference.single_key_shortcuts
    except Preference.DoesNotExist:
        return True


def _today_start():
    return timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)


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
        Review.objects.filter(annotator=request.user, created_at__gte=_today_start())
        .select_related("candidate")
        .order_by("-created_at", "-id")
        .first()
    )
    return {
        "claimed": claimed,
        "candidate": claimed.candidate if claimed else None,
        "claim_on_load": not claim and claimed is None,
        "reason_tags": REASON_TAGS,
        "progress": _progress(request.user),
        "training": views_training.training_notice(request.user),
        "error": error,
        "previous": previous or {},
        # A fresh key for each form drawn: the same form sent twice carries the same key.
        "submission_key": uuid.uuid4(),
        # Offered until the candidate is resolved: a disputed one looks open to its annotators.
        "undoable": last if last and last.candidate.status in services.UNRESOLVED else None,
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
            return render(request, "annotation/review.html#panel", context)
        if context["claimed"] is not None:
            return redirect("review")
        return render(request, "annotation/review.html", context)  # nothing left: said here
    context = _review_context(request, claim=False)
    reopened = request.session.pop(REOPENED, None)
    if reopened and context["candidate"] and reopened.get("candidate") == context["candidate"].pk:
        context["previous"] = reopened
    context["gold_feedback"] = request.session.pop(views_training.GOLD_FEEDBACK, None)
    return render(request, "annotation/review.html", context)


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
            return render(request, "annotation/review.html#panel", context)

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
    return render(request, "annotation/review.html#panel", context)


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
    return render(request, "annotation/review.html#panel", context)


@access.role_required(access.ANNOTATOR)
@never_cache
def review_mine(request: HttpRequest) -> HttpResponse:
    """This person's reviews of today, newest first; each can be changed until its candidate
    is resolved."""
    reviews = (
        Review.objects.filter(annotator=request.user, created_at__gte=_today_start())
        .select_related("candidate__image")
        .order_by("-created_at", "-id")
    )
    labels = dict(REASON_TAGS)
    rows = [
        {
            "review": r,
            # A disputed candidate reads as one still in review: changeable, as an open one.
            "editable": r.candidate.status in services.UNRESOLVED,
            "reason_labels": [labels.get(t, t) for t in r.reasons],
        }
        for r in reviews
    ]
    return render(request, "annotation/mine.html", {"rows": rows})


@access.role_required(access.MEMBER)
@require_POST
def preference_shortcuts(request: HttpRequest) -> HttpResponse:
    """Turn single-key shortcuts on or off for this person (on=1 or on=0)."""
    value = request.POST.get("on")
    if value not in ("0", "1"):
        return HttpResponse("on must be 0 or 1.", status=400)
    services.preference_set(user=request.user, single_key_shortcuts=value == "1")
    messages.success(
        request,
        "Single-key shortcuts are on."
        if value == "1"
        else "Single-key shortcuts are off: Enter still submits; use the buttons, Tab "
        "and Space for the rest.",
    )
    return redirect(request.POST["next"] if _safe_next(request) else "home")


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
                context["error"] = None
                # An answer sent again under its key with another choice: what is recorded,
                # and the way to change it.
                context["conflict"] = exc if isinstance(exc, services.SubmissionConflict) else None
                return render(request, "annotation/review.html#panel", context)
            # htmx swaps a 400 in (base.html's responseHandling): the form again, the field named
            return render(request, "annotation/review.html#panel", context, status=400)

        if isinstance(exc, services.SubmissionConflict) and not request.htmx:
            # Without JavaScript, the list of today's reviews is where Change is.
            messages.error(request, exc.message)
            return redirect("review_mine" if exc.changeable else "review")
        return refuse(request, exc, redirect_to="review", partial=panel)
    feedback = views_training.gold_feedback(answer)  # the expert's answer, after a gold item
    if not request.htmx:
        if feedback:
            request.session[views_training.GOLD_FEEDBACK] = feedback
        # The next one is claimed here, in the POST: the page the redirect shows only reads.
        services.review_claim(user=request.user, skip=request.session.get(SKIPPED, []))
        messages.success(request, "Review saved.")
        return redirect("review")
    context = _review_context(request)
    context["notice"] = "Review saved."
    context["gold_feedback"] = feedback
    return render(request, "annotation/review.html#panel", context)


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
    waiting = Candidate.objects.waiting_for(user).count()
    session = figures["today"] + waiting
    return render(
        request,
        "annotation/me.html",
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
        return render(request, "annotation/adjudicate.html", context)
    context = _adjudication_context(request)
    if request.htmx:
        return render(request, "annotation/adjudicate.html#panel", context)
    if context["claimed"] is not None:
        return redirect("adjudicate")
    return render(request, "annotation/adjudicate.html", context)


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
                "annotation/adjudicate.html#panel",
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
    return render(request, "annotation/adjudicate.html#panel", context)


# --- admins -------------------------------------------------------------------------------


def _pipeline_counts() -> dict:
    images: Counter = Counter()
    guard = 0  # accepted candidates and no question, whether or not others are in review
    generate = 0  # needing candidates, with a confirmed entity (generation waits for it)
    entities: Counter = Counter()  # unconfirmed: "propose" (none yet) or "confirm" (proposed)
    for (
        n_pending,
        n_accepted,
        has_question,
        confirmed,
        entity,
    ) in Image.objects.with_counts().values_list(
        "n_pending", "n_accepted", "has_question", "entity_confirmed", "entity"
    ):
        status = image_status(n_pending=n_pending, n_accepted=n_accepted, has_question=has_question)
        images[status] += 1
        guard += bool(n_accepted and not has_question)
        generate += status == ImageStatus.NEEDS_CANDIDATES and confirmed
        if not confirmed:
            entities["confirm" if entity else "propose"] += 1
    candidates = dict(Candidate.objects.order_by().values_list("status").annotate(n=Count("id")))
    return {
        "images": [(status.label, status.value, images.get(status, 0)) for status in ImageStatus],
        "images_total": sum(images.values()),
        "candidates": [
            (status.label, status.value, candidates.get(status.value, 0))
            for status in CandidateStatus
        ],
        "candidates_total": sum(candidates.values()),
        "questions": FinalQuestion.objects.count(),
        "guard": guard,
        "generate": generate,
        "entities": entities,
    }


def _pipeline_waits(counts: dict) -> list[tuple[str, str, int, str]]:
    """What each stage waits for: (label, key, count, launcher key or "" for a human round).
    Two queries (besides the counts) whatever the number of images or rubrics."""
    guard = counts["guard"]
    live = FinalQuestion.objects.filter(dropped_at__isnull=True)
    build = live.filter(~Exists(RubricVersion.objects.filter(rubric__question=OuterRef("pk"))))
    # The same rule as the launchers' (RubricQuerySet.with_waits), counted in SQL.
    waits: Counter = Counter(
        dict(
            Rubric.objects.live()
            .with_waits()
            .values("waits_for")
            .annotate(n=Count("pk"))
            .values_list("waits_for", "n")
            .order_by()
        )
    )
    return [
        (
            "CRAG-MM images without an entity (propose entities)",
            "propose_entities",
            counts["entities"]["propose"],
            "propose_entities",
        ),
        (
            "Proposed entities waiting for an annotator (/entities/)",
            "confirm_entities",
            counts["entities"]["confirm"],
            "",
        ),
        (
            "Images needing candidates, entity confirmed (generation, A.1)",
            "generate",
            counts["generate"],
            "generate",
        ),
        ("Images with accepted candidates and no question (guard, A.2)", "guard", guard, "guard"),
        ("Questions without a rubric (build, A.3)", "build", build.count(), "build"),
        (
            "Rubrics waiting for refinement 1 (latest: LLM draft)",
            "refine1",
            waits["refine1"],
            "refine1",
        ),
        ("Rubrics waiting for human round 1", "human1", waits["human1"], ""),
        (
            "Rubrics waiting for refinement 2 (latest frozen: human round 1)",
            "refine2",
            waits["refine2"],
            "refine2",
        ),
        ("Rubrics waiting for human round 2", "human2", waits["human2"], ""),
        ("Final rubrics (human round 2 done)", "final", waits["final"], ""),
    ]


@access.role_required(access.ADMIN)
def pipeline(request: HttpRequest) -> HttpResponse:
    awaiting = (
        Candidate.objects.filter(status=CandidateStatus.ACCEPTED, image__question__isnull=True)
        .select_related("image")
        .order_by("image_id", "id")[:100]
    )
    counts = _pipeline_counts()
    return render(
        request,
        "annotation/pipeline.html",
        {
            "counts": counts,
            "waits": _pipeline_waits(counts),
            "awaiting": awaiting,
            "recent": AuditEvent.objects.select_related("actor", "image").order_by("-id")[:20],
        },
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
        "annotation/agreement.html",
        {"report": report, "quality": quality, "trend": trend_chart(quality["weeks"])},
    )


IMAGES_PER_PAGE = 50


@access.role_required(access.ADMIN)
def image_list(request: HttpRequest) -> HttpResponse:
    """Every image, searchable by source id, entity or wording, filtered by domain, popularity,
    state and the state of a candidate; each row leads to the image's page."""
    params = request.GET
    filters = {
        name: params.get(name, "").strip()
        for name in ("q", "domain", "popularity", "state", "candidates")
    }
    problems = []
    images = Image.objects.with_counts().select_related("question").search(filters["q"])
    if filters["domain"]:
        images = images.filter(domain=filters["domain"])
    for name, choices in (
        ("popularity", Popularity),
        ("state", ImageStatus),
        ("candidates", CandidateStatus),
    ):
        if filters[name] and filters[name] not in choices.values:
            problems.append(f"{name}: {filters[name]!r} is not one of {', '.join(choices.values)}.")
            filters[name] = ""
    if filters["popularity"]:
        images = images.filter(popularity=filters["popularity"])
    if filters["state"]:
        images = images.in_state(filters["state"])
    if filters["candidates"]:
        images = images.filter(
            Exists(Candidate.objects.filter(image=OuterRef("pk"), status=filters["candidates"]))
        )
    page = Paginator(images.order_by("source_id"), IMAGES_PER_PAGE).get_page(params.get("page"))
    for image in page.object_list:
        image.state = image_status(
            n_pending=image.n_pending, n_accepted=image.n_accepted, has_question=image.has_question
        )
    query = params.copy()
    query.pop("page", None)
    return render(
        request,
        "annotation/images.html",
        {
            "page": page,
            "filters": filters,
            "problems": problems,
            "query": query.urlencode(),
            "domains": Image.objects.order_by("domain").values_list("domain", flat=True).distinct(),
            "popularities": Popularity.choices,
            "states": ImageStatus.choices,
            "candidate_states": CandidateStatus.choices,
        },
        status=400 if problems else 200,
    )


@access.role_required(access.ADMIN)
def image_page(request: HttpRequest, source_id: str) -> HttpResponse:
    """An image's whole history: candidates by round, every review and adjudication, events."""
    image = get_object_or_404(Image.objects.select_related("question"), source_id=source_id)
    candidates = list(
        image.candidates.select_related("author", "co_author", "adjudication__adjudicator")
        .prefetch_related("reviews__annotator")
        .order_by("round", "id")
    )
    events = image.events.select_related("actor", "candidate").order_by("id")
    question = FinalQuestion.objects.filter(image=image).first()
    return render(
        request,
        "annotation/image.html",
        {
            "image": image,
            "question": question,
            "corrections": question.corrections.select_related("made_by") if question else [],
            "candidates": candidates,
            "events": events,
        },
    )


@access.role_required(access.ADMIN)
@require_POST
def candidate_promote(request: HttpRequest, candidate_id: int) -> HttpResponse:
    try:
        question = services.final_question_promote(user=request.user, candidate_id=candidate_id)
    except DomainError as exc:
        return refuse(
            request, exc, redirect_to=request.POST["next"] if _safe_next(request) else "pipeline"
        )
    messages.success(request, f"{question.image.source_id} now has its question.")
    return redirect(request.POST["next"] if _safe_next(request) else "pipeline")


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
        return refuse(request, exc, redirect_to=reverse("image", args=[question.image.source_id]))
    messages.success(
        request,
        {
            "drop": "Question dropped.",
            "restore": "Question restored.",
        }.get(field_name, "Correction saved."),
    )
    return redirect("image", source_id=question.image.source_id)


def _safe_next(request: HttpRequest) -> bool:
    """Whether `next` is a path on this site. Only a path that starts with "/": redirect()
    takes a bare word for a URL name (`next=id` raised NoReverseMatch) and a relative one
    would land beneath the address that was posted to."""
    from django.utils.http import url_has_allowed_host_and_scheme

    target = request.POST.get("next") or ""
    return target.startswith("/") and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )


@takes_upload("IMPORT_MAX_TOTAL_BYTES", "IMPORT_MAX_MANIFEST_BYTES")
@access.role_required(access.ADMIN)
@require_http_methods(["GET", "POST"])
def import_page(request: HttpRequest) -> HttpResponse:
    context: dict = {
        "batches": ImportBatch.objects.select_related("created_by").order_by("-id")[:10]
    }
    if request.method == "POST":
        status = 200
        manifest = request.FILES.get("manifest")
        if manifest is None:
            context["problems"] = ["Choose a manifest file (.jsonl)."]
            context["problem_count"] = 1
        else:
            try:
                result = import_from_upload(
                    read_manifest(manifest),
                    request.FILES.get("images"),
                    actor=request.user,
                    source=ImportBatch.Source.WEB,
                    file_name=manifest.name,
                )
            except ImportProblems as exc:
                context["problems"] = problems_shown(exc.problems)
                context["problem_count"] = len(exc.problems)
            except TooLarge as exc:
                context["problems"] = [exc.message]
                context["problem_count"] = 1
                status = 413
            else:
                context["result"] = result
        # htmx gets the result and, out of band, the recent imports with this one in it.
        context["oob"] = bool(request.htmx)
        template = "annotation/import.html#result" if request.htmx else "annotation/import.html"
        if request.htmx:
            status = 200  # htmx shows the problems in place
        elif status == 200 and context.get("problems"):
            status = 400
        return render(request, template, context, status=status)
    return render(request, "annotation/import.html", context)
