"""Pages of training and auditing: where each annotator stands in training (admins: reset, let
through, import gold items), the audit of drawn reviews (adjudicators) and of drawn rubric
rounds (revisers). The review page asks `training_notice` and `gold_feedback` here."""

from __future__ import annotations

from collections import defaultdict

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from core import access
from core.errors import DomainError, TooLarge
from core.http import refuse
from core.middleware import takes_upload
from rubrics.services import version_diff

from ..home.preferences import single_keys
from ..images.importing import upload_within_cap
from ..models import (
    REASON_TAGS,
    Decision,
    GoldItem,
    GoldReview,
    QualityConfig,
    Review,
    TrainingState,
)
from ..review.word_diff import word_diff
from . import audits, gold

GOLD_FEEDBACK = "gold_feedback"  # session key: the expert's answer, shown after the redirect


def training_notice(user) -> gold.Standing | None:
    """The person's standing while a training set waits for them; None once passed (or when
    there is no training set)."""
    return gold.training_standing(user) if gold.must_train(user) else None


def gold_feedback(answer) -> dict | None:
    """What the annotator sees after submitting a gold item: their decision and the expert's,
    with the expert's reasons and note. None for a real review."""
    if not isinstance(answer, GoldReview):
        return None
    item: GoldItem = answer.feedback
    labels = dict(REASON_TAGS)
    return {
        "question": item.candidate.text,
        "yours": Decision(answer.decision).label,
        "expert": Decision(item.decision).label,
        "revised_text": item.revised_text,
        "reasons": [labels.get(r, r) for r in item.reasons],
        "note": item.note,
        "agrees": answer.agrees,
        "training": item.training,
    }


# --- training (admins) ------------------------------------------------------------------------


def training_rows() -> list[dict]:
    """Every annotator with their standing, in four queries whatever their number."""
    annotators = list(
        get_user_model()
        .objects.filter(groups__name=access.ANNOTATOR)
        .order_by("username")
        .distinct()
    )
    states = {s.user_id: s for s in TrainingState.objects.all()}
    answers: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    overall: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for user_id, attempt, training, agreed, n in (
        GoldReview.objects.filter(gold__active=True)
        .values_list("annotator_id", "attempt", "gold__training")
        .annotate(agreed=Count("id", filter=Q(agrees=True)), n=Count("id"))
        .values_list("annotator_id", "attempt", "gold__training", "agreed", "n")
        .order_by()
    ):
        if training:
            answers[(user_id, attempt)][0] += agreed
            answers[(user_id, attempt)][1] += n
        else:
            overall[user_id][0] += agreed
            overall[user_id][1] += n
    rows = []
    for person in annotators:
        state = states.get(person.pk)
        attempt = state.attempt if state else 1
        agreed, answered = answers[(person.pk, attempt)]
        gold_agreed, gold_answered = overall[person.pk]
        if state and state.passed_at:
            standing = "passed"
        elif state and state.failed_at:
            standing = "failed"
        elif answered:
            standing = "in training"
        else:
            standing = "not started"
        rows.append(
            {
                "person": person,
                "state": state,
                "attempt": attempt,
                "standing": standing,
                "answered": answered,
                "agreed": agreed,
                "share": agreed / answered if answered else None,
                "gold_answered": gold_answered,
                "gold_share": gold_agreed / gold_answered if gold_answered else None,
            }
        )
    return rows


@takes_upload("IMPORT_MAX_MANIFEST_BYTES")
@access.role_required(access.ADMIN)
@require_http_methods(["GET", "POST"])
def training_page(request: HttpRequest) -> HttpResponse:
    """Where each annotator stands in training; a JSONL file of gold items can be imported."""
    problems: list[str] = []
    status = 200
    if request.method == "POST":
        upload = request.FILES.get("gold")
        if upload is None:
            problems, status = ["Choose a JSON Lines file of gold items."], 400
        else:
            try:
                upload_within_cap(upload, "gold", "file of gold items")
                made = gold.gold_import(user=request.user, data=upload.read())
            except gold.GoldImportProblems as exc:
                problems, status = [str(p) for p in exc.problems], 400
            except TooLarge as exc:
                problems, status = [str(exc)], exc.status
            else:
                messages.success(
                    request, f"{len(made)} gold item{'s' * (len(made) != 1)} imported."
                )
                return redirect("training")
    items = GoldItem.objects.aggregate(
        total=Count("id", filter=Q(active=True)),
        training=Count("id", filter=Q(active=True, training=True)),
    )
    return render(
        request,
        "annotation/training/training.html",
        {
            "rows": training_rows(),
            "items": items,
            "config": QualityConfig.current(),
            "problems": problems,
        },
        status=status,
    )


@access.role_required(access.ADMIN)
@require_POST
def training_change(request: HttpRequest, user_id: int) -> HttpResponse:
    """Reset a person's training (action=reset) or let them through it (action=pass)."""
    action = request.POST.get("action")
    if action not in ("reset", "pass"):
        return HttpResponse("action must be reset or pass.", status=400)
    change = gold.training_reset if action == "reset" else gold.training_pass
    try:
        state = change(user=request.user, annotator_id=user_id)
    except DomainError as exc:
        return refuse(request, exc, redirect_to="training")
    messages.success(
        request,
        f"{state.user.username} starts the training again (attempt {state.attempt})."
        if action == "reset"
        else f"{state.user.username} may start real work.",
    )
    return redirect("training")


# --- audits of reviews (adjudicators) ---------------------------------------------------------


def _review_audit_context(request: HttpRequest, *, error=None, previous=None, draw=True) -> dict:
    if draw:
        audits.review_audits_draw()
    open_to = audits.review_audits_open_to(request.user)
    audit = (
        open_to.select_related(
            "review__candidate__image",
            "review__candidate__adjudication",
            "review__annotator",
        )
        .order_by("id")
        .first()
    )
    context = {
        "audit": audit,
        "claim_on_load": not draw and audit is None,
        "waiting": open_to.count(),
        "error": error,
        "previous": previous or {},
        "single_keys": single_keys(request.user),
    }
    if audit:
        review = audit.review
        labels = dict(REASON_TAGS)
        context.update(
            review=review,
            candidate=review.candidate,
            diff=word_diff(review.candidate.text, review.revised_text)
            if review.revised_text
            else None,
            reason_labels=[labels.get(r, r) for r in review.reasons],
            others=list(Review.objects.filter(candidate=review.candidate_id).exclude(pk=review.pk)),
        )
    return context


@access.role_required(access.ADJUDICATOR)
@require_http_methods(["GET", "POST"])
@never_cache
def audit_page(request: HttpRequest) -> HttpResponse:
    return _drawn_page(request, "audit", _review_audit_context)


def _drawn_page(request: HttpRequest, page: str, make_context) -> HttpResponse:
    """An audit page: GET shows the audits drawn already and draws none (a link from another
    site cannot draw); POST draws those due, then shows the next (the page sends it on load
    when none waits, and "Check again" sends it)."""
    if request.method == "GET":
        return render(
            request, f"annotation/training/{page}.html", make_context(request, draw=False)
        )
    context = make_context(request)
    if request.htmx:
        return render(request, f"annotation/training/{page}.html#panel", context)
    if context["audit"] is not None:
        return redirect(page)
    return render(request, f"annotation/training/{page}.html", context)  # nothing due: said here


@access.role_required(access.ADJUDICATOR)
@require_POST
def audit_submit(request: HttpRequest, audit_id: int) -> HttpResponse:
    return _audit_submit(
        request,
        audit_id,
        audits.review_audit_give,
        _review_audit_context,
        page="audit",
        notice="Audit saved.",
    )


def _audit_submit(request, audit_id, give, make_context, *, page: str, notice: str):
    """Record one audit verdict (agree/overturn or accept/flag, with its note), then the next
    audit in place; a refusal shows the same audit again with what was typed."""
    template = f"annotation/training/{page}.html#panel"
    form = {"verdict": request.POST.get("decision", ""), "note": request.POST.get("comment", "")}
    try:
        give(user=request.user, audit_id=audit_id, **form)
    except DomainError as exc:
        return refuse(
            request,
            exc,
            redirect_to=page,
            partial=lambda exc: render(
                request,
                template,
                make_context(request, error=exc, previous=form),
                status=400 if exc.status == 400 else 200,
            ),
        )
    if not request.htmx:
        messages.success(request, notice)
        return redirect(page)
    context = make_context(request)
    context["notice"] = notice
    return render(request, template, context)


# --- audits of rubric rounds (revisers) -------------------------------------------------------


def _round_audit_context(request: HttpRequest, *, error=None, previous=None, draw=True) -> dict:
    if draw:
        audits.round_audits_draw()
    open_to = audits.round_audits_open_to(request.user)
    audit = (
        open_to.select_related(
            "version__rubric__question__image", "version__made_by", "version__parent"
        )
        .order_by("id")
        .first()
    )
    context = {
        "audit": audit,
        "claim_on_load": not draw and audit is None,
        "waiting": open_to.count(),
        "error": error,
        "previous": previous or {},
        "single_keys": single_keys(request.user),
    }
    if audit:
        version = audit.version
        rows = list(version.checks.order_by("position"))
        parent = version.parent
        context.update(
            version=version,
            question=version.rubric.question,
            checks=[row for row in rows if row.deleted_at is None],
            diff=version_diff(list(parent.checks.all()), rows) if parent else None,
            parent=parent,
        )
    return context


@access.role_required(access.RUBRIC_REVISER)
@require_http_methods(["GET", "POST"])
@never_cache
def round_audit_page(request: HttpRequest) -> HttpResponse:
    return _drawn_page(request, "round_audit", _round_audit_context)


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def round_audit_submit(request: HttpRequest, audit_id: int) -> HttpResponse:
    return _audit_submit(
        request,
        audit_id,
        audits.round_audit_give,
        _round_audit_context,
        page="round_audit",
        notice="Audit saved: a flag shows in the rubric's history.",
    )
