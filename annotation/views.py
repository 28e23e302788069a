"""Pages of stage 1. Each view checks the role, calls one service, renders.

htmx requests get the page's partial (the review panel, the adjudication panel); plain form
posts get post-redirect-get, so every page also works without JavaScript.
"""

from __future__ import annotations

import difflib
import statistics
from collections import Counter
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Exists, F, OuterRef, Q, Subquery
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_POST

from rubrics.models import Rubric, RubricVersion, Stage
from rubrics.services import revision_queue

from . import access, services
from .agreement import agreement_report
from .importing import ImportProblems, import_from_upload
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
    Review,
    image_status,
)

# --- login, with a limit on failed attempts ----------------------------------------------


def _client_address(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "unknown")


def _login_keys(request: HttpRequest) -> list[str]:
    username = (request.POST.get("username") or "").strip().lower()
    return [f"login-fail:addr:{_client_address(request)}", f"login-fail:user:{username}"]


class RateLimitedLoginView(auth_views.LoginView):
    """Django's login, refusing further attempts after too many failures from one address or
    for one user name within the window."""

    def post(self, request, *args, **kwargs):
        from django.conf import settings

        keys = _login_keys(request)
        if any((cache.get(key) or 0) >= settings.LOGIN_RATE_LIMIT for key in keys):
            minutes = max(1, settings.LOGIN_RATE_WINDOW // 60)
            form = self.get_form()
            form.errors.clear()
            response = self.render_to_response(
                self.get_context_data(
                    form=form,
                    locked=f"Too many failed attempts. Try again in {minutes} minutes.",
                )
            )
            response.status_code = 429
            return response
        response = super().post(request, *args, **kwargs)
        if response.status_code != 302:  # failed
            for key in keys:
                cache.add(key, 0, settings.LOGIN_RATE_WINDOW)
                try:
                    cache.incr(key)
                except ValueError:
                    cache.set(key, 1, settings.LOGIN_RATE_WINDOW)
        return response


# --- helpers ------------------------------------------------------------------------------


def _require(check, request: HttpRequest, what: str) -> None:
    if not check(request.user):
        raise PermissionDenied(f"This page is for {what}.")


def _progress(user) -> dict:
    start = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return {
        "done_today": Review.objects.filter(annotator=user, created_at__gte=start).count(),
        "waiting": Candidate.objects.reviewable_by(user).count(),
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
    if access.is_adjudicator(user):
        context["adjudicator"] = {
            "waiting": Candidate.objects.adjudicable_by(user).count(),
            "done_today": user.adjudications.filter(
                created_at__gte=timezone.now() - timedelta(hours=24)
            ).count(),
        }
    if access.RUBRIC_REVISER in access.roles(user):
        context["reviser"] = {"waiting": len(revision_queue())}
    if access.is_admin(user):
        context["admin"] = _pipeline_counts()
    return render(request, "annotation/home.html", context)


@login_required
def image_file(request: HttpRequest, source_id: str) -> FileResponse:
    if not access.is_member(request.user):
        raise PermissionDenied("You have no role in this project.")
    image = get_object_or_404(Image, source_id=source_id)
    try:
        handle = image.file.open("rb")
    except FileNotFoundError as exc:
        raise Http404("the photo's file is missing") from exc
    response = FileResponse(handle)
    response["Cache-Control"] = "private, max-age=3600"
    return response


# --- annotators ---------------------------------------------------------------------------


def _review_context(
    request: HttpRequest, *, error: services.ReviewError | None = None, previous: dict | None = None
) -> dict:
    claimed = services.review_claim(user=request.user)
    return {
        "claimed": claimed,
        "candidate": claimed.candidate if claimed else None,
        "reason_tags": REASON_TAGS,
        "progress": _progress(request.user),
        "error": error,
        "previous": previous or {},
    }


@login_required
def review_page(request: HttpRequest) -> HttpResponse:
    _require(access.is_annotator, request, "annotators")
    return render(request, "annotation/review.html", _review_context(request))


@login_required
@require_POST
def review_submit(request: HttpRequest, candidate_id: int) -> HttpResponse:
    _require(access.is_annotator, request, "annotators")
    form = {
        "decision": request.POST.get("decision", ""),
        "revised_text": _revision(request),
        "reasons": request.POST.getlist("reasons"),
        "comment": request.POST.get("comment", ""),
        "seconds": request.POST.get("seconds") or None,
    }
    try:
        services.review_submit(user=request.user, candidate_id=candidate_id, **form)
    except services.ReviewError as exc:
        if exc.status == 404:
            raise Http404(exc.message) from exc
        if not request.htmx:
            messages.error(request, exc.message)
            return redirect("review")
        context = _review_context(request, error=exc, previous=form)
        if exc.status in (403, 409):  # the candidate is gone for this person: show the next
            context["notice"] = exc.message
            context["error"] = None
        return render(request, "annotation/review.html#panel", context)
    if not request.htmx:
        messages.success(request, "Review saved.")
        return redirect("review")
    context = _review_context(request)
    context["notice"] = "Review saved."
    return render(request, "annotation/review.html#panel", context)


@login_required
def my_work(request: HttpRequest) -> HttpResponse:
    """An annotator's own figures: done today and this week, median seconds, how often the
    adjudicator took the same decision on the candidates that reached one, the session's bar."""
    _require(access.is_annotator, request, "annotators")
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
    waiting = Candidate.objects.reviewable_by(user).count()
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


def _adjudication_context(request: HttpRequest, *, error=None, previous=None) -> dict:
    claimed = services.adjudication_claim(user=request.user)
    context = {
        "claimed": claimed,
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
    return context


@login_required
def adjudicate_page(request: HttpRequest) -> HttpResponse:
    _require(access.is_adjudicator, request, "adjudicators")
    return render(request, "annotation/adjudicate.html", _adjudication_context(request))


@login_required
@require_POST
def adjudicate_submit(request: HttpRequest, candidate_id: int) -> HttpResponse:
    _require(access.is_adjudicator, request, "adjudicators")
    form = {
        "decision": request.POST.get("decision", ""),
        "revised_text": _revision(request),
        "comment": request.POST.get("comment", ""),
        "seconds": request.POST.get("seconds") or None,
    }
    try:
        services.adjudication_resolve(user=request.user, candidate_id=candidate_id, **form)
    except services.ReviewError as exc:
        if exc.status == 404:
            raise Http404(exc.message) from exc
        if not request.htmx:
            messages.error(request, exc.message)
            return redirect("adjudicate")
        context = _adjudication_context(request, error=exc, previous=form)
        return render(request, "annotation/adjudicate.html#panel", context)
    if not request.htmx:
        messages.success(request, "Decision saved.")
        return redirect("adjudicate")
    context = _adjudication_context(request)
    context["notice"] = "Decision saved."
    return render(request, "annotation/adjudicate.html#panel", context)


# --- admins -------------------------------------------------------------------------------


def _pipeline_counts() -> dict:
    images: Counter = Counter()
    guard = 0  # accepted candidates and no question, whether or not others are in review
    for n_pending, n_accepted, has_question in Image.objects.with_counts().values_list(
        "n_pending", "n_accepted", "has_question"
    ):
        images[
            image_status(n_pending=n_pending, n_accepted=n_accepted, has_question=has_question)
        ] += 1
        guard += bool(n_accepted and not has_question)
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
    }


def _pipeline_waits(counts: dict) -> list[tuple[str, str, int, str]]:
    """What each stage waits for: (label, key, count, launcher key or "" for a human round).
    Two queries (besides the counts) whatever the number of images or rubrics."""
    by_status = {key: n for _, key, n in counts["images"]}
    guard = counts["guard"]
    live = FinalQuestion.objects.filter(dropped_at__isnull=True)
    build = live.filter(~Exists(RubricVersion.objects.filter(rubric__question=OuterRef("pk"))))
    versions = RubricVersion.objects.filter(rubric=OuterRef("pk")).order_by("-id")
    rubrics = (
        Rubric.objects.filter(question__dropped_at__isnull=True)
        .annotate(
            latest=Subquery(versions.values("stage")[:1]),
            latest_open=Exists(versions.filter(frozen_at__isnull=True)),
            final=Subquery(versions.filter(frozen_at__isnull=False).values("stage")[:1]),
        )
        .values_list("latest", "latest_open", "final")
    )
    waits: Counter = Counter()
    for latest, open_draft, final in rubrics:
        if latest == Stage.LLM_DRAFT:
            waits["refine1"] += 1  # as eligible_for_refine(1): the draft is the latest
        elif open_draft:
            waits["human1" if latest == Stage.HUMAN_1 else "human2"] += 1
        elif final in (Stage.LLM_REFINED_1, Stage.IMPORTED):
            waits["human1"] += 1
        elif final == Stage.HUMAN_1:
            waits["refine2"] += 1
        elif final == Stage.LLM_REFINED_2:
            waits["human2"] += 1
        elif final == Stage.HUMAN_2:
            waits["final"] += 1
    return [
        (
            "Images needing candidates (generation, A.1)",
            "generate",
            by_status.get(ImageStatus.NEEDS_CANDIDATES.value, 0),
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


@login_required
def pipeline(request: HttpRequest) -> HttpResponse:
    _require(access.is_admin, request, "admins")
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


@login_required
def agreement(request: HttpRequest) -> HttpResponse:
    _require(access.is_admin, request, "admins")
    report = agreement_report()
    max_reviews = max((a.reviews for a in report.annotators), default=0) or 1
    for stats in report.annotators:
        stats.bar = round(100 * stats.reviews / max_reviews)
    for pair in report.pairs:
        # kappa in [-1, 1] drawn as a bar from the middle of the track
        pair.bar = round(50 * abs(pair.kappa)) if pair.kappa is not None else 0
        pair.negative = pair.kappa is not None and pair.kappa < 0
    return render(request, "annotation/agreement.html", {"report": report})


IMAGES_PER_PAGE = 50


@login_required
def image_list(request: HttpRequest) -> HttpResponse:
    """Every image, searchable by source id, entity or wording, filtered by domain, popularity,
    state and the state of a candidate; each row leads to the image's page."""
    _require(access.is_admin, request, "admins")
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


@login_required
def image_page(request: HttpRequest, source_id: str) -> HttpResponse:
    """An image's whole history: candidates by round, every review and adjudication, events."""
    _require(access.is_admin, request, "admins")
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


@login_required
@require_POST
def candidate_promote(request: HttpRequest, candidate_id: int) -> HttpResponse:
    _require(access.is_admin, request, "admins")
    try:
        question = services.final_question_promote(user=request.user, candidate_id=candidate_id)
    except services.ReviewError as exc:
        if exc.status == 404:
            raise Http404(exc.message) from exc
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{question.image.source_id} now has its question.")
    return redirect(request.POST["next"] if _safe_next(request) else "pipeline")


@login_required
@require_POST
def question_correct(request: HttpRequest, question_id: int) -> HttpResponse:
    """Correct the ground-truth entity or the wording (field=entity|text), or drop or restore
    the question (field=drop|restore), with a reason."""
    _require(access.is_admin, request, "admins")
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
    except services.ReviewError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            {
                "drop": "Question dropped.",
                "restore": "Question restored.",
            }.get(field_name, "Correction saved."),
        )
    return redirect("image", source_id=question.image.source_id)


def _safe_next(request: HttpRequest) -> bool:
    from django.utils.http import url_has_allowed_host_and_scheme

    target = request.POST.get("next")
    return bool(target) and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )


@login_required
@require_http_methods(["GET", "POST"])
def import_page(request: HttpRequest) -> HttpResponse:
    _require(access.is_admin, request, "admins")
    context: dict = {
        "batches": ImportBatch.objects.select_related("created_by").order_by("-id")[:10]
    }
    if request.method == "POST":
        manifest = request.FILES.get("manifest")
        if manifest is None:
            context["problems"] = ["Choose a manifest file (.jsonl)."]
        else:
            try:
                result = import_from_upload(
                    manifest.read(),
                    request.FILES.get("images"),
                    actor=request.user,
                    source=ImportBatch.Source.WEB,
                    file_name=manifest.name,
                )
            except ImportProblems as exc:
                context["problems"] = exc.problems
            else:
                context["result"] = result
        # htmx gets the result and, out of band, the recent imports with this one in it.
        context["oob"] = bool(request.htmx)
        template = "annotation/import.html#result" if request.htmx else "annotation/import.html"
        status = 400 if context.get("problems") and not request.htmx else 200
        return render(request, template, context, status=status)
    return render(request, "annotation/import.html", context)
