"""Every write of stage 1 goes through these functions.

Each checks the current state inside a transaction and raises a `ReviewError` subclass when
the request is wrong; the web views and the API translate those into messages and status codes.
The database constraints on `Review` are the last line: if two writers slip past the checks,
the second insert fails and is reported as a conflict.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from core import access
from core.errors import Conflict, DomainError, InvalidInput, NotAllowed, NotFound
from core.text import clean_text

from . import gold
from .models import (
    REASON_KEYS,
    Adjudication,
    AdjudicationClaim,
    AuditEvent,
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    Decision,
    FinalQuestion,
    Image,
    Preference,
    QuestionCorrection,
    Review,
    ReviewClaim,
)

log = logging.getLogger(__name__)

MAX_SECONDS = 24 * 3600
MAX_TEXT = 2000
MAX_COMMENT = 5000
ENTITY_MAX = 500  # Image.entity's max_length


# A candidate whose reviews may still change: to an annotator, both look alike (blind review).
UNRESOLVED = (CandidateStatus.OPEN, CandidateStatus.DISPUTED)

# Kept until the in-flight branches are merged: the error classes live in core.errors now.
ReviewError = DomainError


def normalize_text(text: str) -> str:
    """Two revisions are the same when they differ only in case and spacing."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def _lock_candidate(candidate_id: int) -> Candidate:
    # select_for_update serializes writers of one candidate on PostgreSQL; on SQLite the
    # IMMEDIATE transaction already holds the write lock.
    candidate = Candidate.objects.select_for_update().filter(pk=candidate_id).first()
    if candidate is None:
        raise NotFound(f"There is no candidate {candidate_id}.")
    return candidate


def _set_status(
    candidate: Candidate, new: CandidateStatus, *, actor, reason: str, now: datetime
) -> None:
    old = candidate.status
    resolved_at = (
        now
        if new in (CandidateStatus.ACCEPTED, CandidateStatus.DISCARDED, CandidateStatus.REVISED)
        else None
    )
    changed = Candidate.objects.filter(pk=candidate.pk, status=old).update(
        status=new, resolved_at=resolved_at
    )
    if changed != 1:
        raise Conflict("The candidate changed while you were deciding; reload it.")
    candidate.status = new
    candidate.resolved_at = resolved_at
    AuditEvent.objects.create(
        actor=actor,
        action="candidate.status",
        candidate=candidate,
        image_id=candidate.image_id,
        data={"from": old, "to": new, "reason": reason},
        at=now,
    )


def _generate_if_left_without_candidates(image_id: int) -> None:
    """Called by the services that resolve a candidate (review, adjudication), last: with
    LLM_AUTO_GENERATE on, an image that the resolution leaves without candidates gets a
    generation job once the change commits. Never fails the review: a missing model is logged
    and skipped, and any other error of the launch is logged by the robust on_commit."""
    if not getattr(settings, "LLM_AUTO_GENERATE", False):
        return
    transaction.on_commit(lambda: _auto_generate(image_id), robust=True)


def _auto_generate(image_id: int) -> None:
    # Lazy: stage-1 services must not depend on the LLM layer when it is unused.
    from llm.jobs import JobError

    from .llm_jobs import auto_generation_launch

    try:
        job = auto_generation_launch(image_id=image_id)
    except JobError as exc:
        log.warning("auto-generation for image %s skipped: %s", image_id, exc)
        return
    if job is not None:
        log.info("auto-generation for image %s: job %s", image_id, job.pk)


# Fields in words for messages a person reads; `field` on the error keeps the input's name.
FIELD_WORDS = {
    "revised_text": "The revision",
    "comment": "The comment",
    "reason": "The reason",
    "value": "The new value",
}


def _clean_text(value, field: str, *, required: bool, limit: int = MAX_TEXT) -> str:
    if required and (value is None or (isinstance(value, str) and not value.strip())):
        what = FIELD_WORDS.get(field, field)
        raise InvalidInput(
            f"{what} is empty: write it, or choose another decision."
            if field == "revised_text"
            else f"{what} is required.",
            field,
        )
    return clean_text(value, field, limit=limit, required=required)


def _clean_decision(decision) -> str:
    if decision not in Decision.values:
        raise InvalidInput(
            f"Choose a decision: {', '.join(Decision.values)} (the form sent {decision!r}).",
            "decision",
        )
    return decision


def _clean_seconds(seconds) -> int | None:
    if seconds is None or seconds == "":
        return None
    if isinstance(seconds, bool):
        raise InvalidInput("The time spent must be a whole number of seconds.", "seconds")
    try:
        value = int(seconds)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("The time spent must be a whole number of seconds.", "seconds") from exc
    if not 0 <= value <= MAX_SECONDS:
        raise InvalidInput(
            f"The time spent must be between 0 and {MAX_SECONDS} seconds.", "seconds"
        )
    return value


def _clean_reasons(reasons) -> list[str]:
    if reasons is None:
        return []
    if not isinstance(reasons, list | tuple) or not all(isinstance(r, str) for r in reasons):
        raise InvalidInput("The reasons must be a list of reason tags.", "reasons")
    unknown = sorted(set(reasons) - set(REASON_KEYS))
    if unknown:
        raise InvalidInput(
            f"Unknown reason tag {unknown[0]!r}; the tags are {', '.join(REASON_KEYS)}.",
            "reasons",
        )
    return sorted(set(reasons), key=REASON_KEYS.index)


def _child_candidate(
    parent: Candidate, *, text: str, origin: str, author, co_author=None, now: datetime
) -> Candidate:
    child = Candidate.objects.create(
        image_id=parent.image_id,
        text=text,
        round=parent.round + 1,
        parent=parent,
        origin=origin,
        author=author,
        co_author=co_author,
        created_at=now,
    )
    AuditEvent.objects.create(
        actor=author,
        action="candidate.create",
        candidate=child,
        image_id=parent.image_id,
        data={"origin": origin, "parent": parent.pk, "round": child.round},
        at=now,
    )
    return child


# --- claims -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    candidate: Candidate
    expires_at: datetime


def review_claim(
    *, user, skip: list[int] | tuple[int, ...] = (), now: datetime | None = None
) -> Claimed | None:
    """Reserve one of the two review slots of the next candidate this person may review.

    Returns the person's current claim if they hold one. A slot is free when the candidate's
    reviews plus other people's unexpired claims number fewer than two. `skip`: candidates the
    person handed back (review_skip) in this sitting, not offered to them again.
    """
    if not access.is_annotator(user):
        raise NotAllowed("Only annotators review candidates.")
    now = now or timezone.now()
    expires_at = now + settings.REVIEW_LEASE
    skip = [int(pk) for pk in skip]
    with transaction.atomic():
        held = (
            ReviewClaim.objects.filter(annotator=user, expires_at__gt=now)
            .filter(candidate__in=Candidate.objects.reviewable_by(user))
            .exclude(candidate_id__in=skip)
            .select_related("candidate__image")
            .order_by("created_at")
            .first()
        )
        # Renewing can lose to the sweeper deleting the lease at this very moment: then claim anew.
        if held is not None and ReviewClaim.objects.filter(pk=held.pk).update(
            expires_at=expires_at
        ):
            return Claimed(held.candidate, expires_at)
        # Gold items: the training set first, then mixed in at the configured rate.
        gold_claimed = gold.gold_claim(user=user, skip=skip, now=now)
        if gold_claimed is gold.TRAINING_GATE:
            return None
        if gold_claimed is not None:
            return gold_claimed

        others_claims = ReviewClaim.objects.filter(
            candidate=OuterRef("pk"), expires_at__gt=now
        ).exclude(annotator=user)
        queryset = (
            Candidate.objects.reviewable_by(user)
            .alias(
                n_taken=_count(Review.objects.filter(candidate=OuterRef("pk")))
                + _count(others_claims)
            )
            .filter(n_taken__lt=2)
            .exclude(pk__in=skip)
            .select_related("image")
            .order_by("id")
        )
        if connection.vendor == "postgresql":
            queryset = queryset.select_for_update(skip_locked=True, of=("self",))
        passed: list[int] = []
        for _ in range(20):
            # One row at a time: a locked row holds up other claimers and submitters.
            candidate = queryset.exclude(pk__in=passed).first()
            if candidate is None:
                return None
            # Re-count under the row lock: the subqueries above ran before it was taken.
            if _slots_taken(candidate, user, now) >= 2:
                passed.append(candidate.pk)
                continue
            # One INSERT ... ON CONFLICT: an expired claim of this person's is renewed.
            ReviewClaim.objects.bulk_create(
                [
                    ReviewClaim(
                        candidate=candidate, annotator=user, expires_at=expires_at, created_at=now
                    )
                ],
                update_conflicts=True,
                unique_fields=["candidate", "annotator"],
                update_fields=["expires_at", "created_at"],
            )
            return Claimed(candidate, expires_at)
    return None


def review_held(
    *, user, skip: list[int] | tuple[int, ...] = (), now: datetime | None = None
) -> Claimed | None:
    """The candidate this person holds and may still answer, read only: what a visit of the
    review page shows (review_claim renews the hold, and takes a new one when there is none)."""
    now = now or timezone.now()
    held = (
        ReviewClaim.objects.filter(annotator=user, expires_at__gt=now)
        .filter(
            Q(candidate__in=Candidate.objects.reviewable_by(user))
            | Q(candidate__status=CandidateStatus.GOLD, candidate__gold__active=True)
        )
        .exclude(candidate_id__in=[int(pk) for pk in skip])
        .select_related("candidate__image")
        .order_by("created_at")
        .first()
    )
    return Claimed(held.candidate, held.expires_at) if held else None


def _slots_taken(candidate: Candidate, user, now: datetime) -> int:
    """Reviews plus other people's unexpired claims: at two, the candidate has no slot left."""
    return Review.objects.filter(candidate=candidate).count() + (
        ReviewClaim.objects.filter(candidate=candidate, expires_at__gt=now)
        .exclude(annotator=user)
        .count()
    )


def _count(queryset):
    counted = queryset.order_by().values("candidate").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def review_claims_sweep(*, now: datetime | None = None) -> int:
    """Delete expired leases (they are ignored anyway; this keeps the table small)."""
    now = now or timezone.now()
    deleted, _ = ReviewClaim.objects.filter(expires_at__lte=now).delete()
    deleted_adj, _ = AdjudicationClaim.objects.filter(expires_at__lte=now).delete()
    return deleted + deleted_adj


# --- reviews ------------------------------------------------------------------------------


# What a refused review says whenever the candidate takes no review from this person, whatever
# the reason (two reviews in, disputed, resolved, both slots held by others, or a gold item not
# drawn for them): a different answer for each would tell an annotator what the other review
# was, or which candidates are gold items (../shared/spec/review-workflow.md, step 2).
NO_SLOT = (
    "This candidate has no review slot left for you (other annotators hold or have taken "
    "its slots), so your review was not recorded. Here is the next candidate."
)
LAPSED = (
    "Your hold on this candidate ran out and other annotators took its review slots, so your "
    "review was not recorded. Here is the next candidate."
)


class SubmissionConflict(Conflict):
    """A form sent again under its submission key with a different answer: nothing new is
    recorded. `recorded` is the answer the key holds (a Review or a GoldReview), `changeable`
    whether it may still be taken back (review_undo)."""

    def __init__(self, recorded, *, changeable: bool):
        self.recorded = recorded
        self.changeable = changeable
        chosen = Decision(recorded.decision).label
        if recorded.revised_text:
            chosen += f" as “{recorded.revised_text}”"
        question = _answered_candidate(recorded).text
        then = (
            " To change it, take it back (Change) and answer again."
            if changeable
            else " It can no longer be changed."
        )
        super().__init__(
            "This form was sent before, and what it recorded stands: your answer to "
            f"“{question}” is {chosen}. What you chose now was not recorded.{then}",
            "submission_key",
        )


def _answered_candidate(answer) -> Candidate:
    return answer.candidate if isinstance(answer, Review) else answer.gold.candidate


def _answer_with_key(user, key: uuid.UUID):
    """This person's answer sent under `key`, a review or an answer to a gold item: one lookup
    over both, so that a key answers the same whichever candidate it is sent to."""
    return (
        Review.objects.filter(annotator=user, submission_key=key)
        .select_related("candidate")
        .first()
    ) or gold.answer_with_key(user, key)


def _same_answer(answer, *, decision, revised_text, reasons, comment) -> bool:
    """Whether a repeated form carries the answer recorded under its key, read as the first
    was read (the seconds are left out: a form sent twice is timed twice)."""
    try:
        revised = _clean_text(revised_text, "revised_text", required=False)
        reasons = _clean_reasons(reasons)
        comment = _clean_text(comment, "comment", required=False, limit=MAX_COMMENT)
    except InvalidInput:
        return False  # not what was recorded, which was read without a fault
    return (decision, revised, reasons, comment) == (
        answer.decision,
        answer.revised_text,
        list(answer.reasons),
        answer.comment,
    )


def _replay(answer, candidate: Candidate, **form):
    """The first answer again for the same form sent twice; a conflict for another answer (or
    another candidate) under the same key."""
    if _answered_candidate(answer).pk == candidate.pk and _same_answer(answer, **form):
        answer.repeated = True
        if not isinstance(answer, Review):
            answer.feedback = answer.gold
        return answer
    changeable = isinstance(answer, Review) and _answered_candidate(answer).status in UNRESOLVED
    raise SubmissionConflict(answer, changeable=changeable)


@transaction.atomic
def review_submit(
    *,
    user,
    candidate_id: int,
    decision: str,
    revised_text: str | None = "",
    reasons: list[str] | None = None,
    comment: str | None = "",
    seconds: int | None = None,
    submission_key: str | uuid.UUID | None = None,
    now: datetime | None = None,
) -> Review:
    """Record one annotator's review; the second review resolves or disputes the candidate.

    With a `submission_key`, the same form sent again returns the answer that the first
    recorded (its `repeated` attribute set) instead of recording or refusing anything; another
    answer under the same key is a `SubmissionConflict` that says what is recorded.

    The checks come in one order for every candidate, gold items included, and a candidate that
    takes no review from this person is refused in the same words whatever the reason (NO_SLOT).
    A gold item is answered only by a person it was drawn for (gold.drawn_for).
    """
    now = now or timezone.now()
    if not access.is_annotator(user):
        raise NotAllowed("Only annotators review candidates.")
    key = _clean_key(submission_key)
    candidate = _lock_candidate(candidate_id)
    if key is not None:
        # Under the candidate's lock: a twin request that raced this one has committed.
        prior = _answer_with_key(user, key)
        if prior is not None:
            return _replay(
                prior,
                candidate,
                decision=decision,
                revised_text=revised_text,
                reasons=reasons,
                comment=comment,
            )
    gold_item = candidate.status == CandidateStatus.GOLD
    if gold_item and gold.drawn_for(candidate, user):  # recorded apart: never a review slot
        return gold.gold_review_submit(
            user=user,
            candidate=candidate,
            decision=decision,
            revised_text=revised_text,
            reasons=reasons,
            comment=comment,
            seconds=seconds,
            key=key,
            now=now,
        )
    if gold.must_train(user):
        raise NotAllowed("Finish the training first: real candidates come after it.")
    if user.pk in (candidate.author_id, candidate.co_author_id):
        raise NotAllowed("You wrote this question, so you may not review it.")

    decision = _clean_decision(decision)
    revised = _clean_text(revised_text, "revised_text", required=decision == Decision.REVISE)
    if decision != Decision.REVISE and revised:
        raise InvalidInput("A revised text goes only with the decision revise.", "revised_text")
    if decision == Decision.REVISE and normalize_text(revised) == normalize_text(candidate.text):
        raise InvalidInput(
            "Your revision is the same as the question; choose accept instead.", "revised_text"
        )
    reasons = _clean_reasons(reasons)
    comment = _clean_text(comment, "comment", required=False, limit=MAX_COMMENT)
    seconds = _clean_seconds(seconds)

    existing = list(candidate.reviews.all())
    if any(r.annotator_id == user.pk for r in existing) or (
        gold_item and gold.answered_by(candidate, user)
    ):
        raise Conflict("You have reviewed this candidate already.")
    # Submitting without a claim is allowed, but not into a slot that someone else holds.
    holds_claim = ReviewClaim.objects.filter(
        candidate=candidate, annotator=user, expires_at__gt=now
    ).exists()
    if (
        candidate.status != CandidateStatus.OPEN
        or len(existing) >= 2
        or (not holds_claim and _slots_taken(candidate, user, now) >= 2)
    ):
        lapsed = ReviewClaim.objects.filter(
            candidate=candidate, annotator=user, expires_at__lte=now
        ).exists()
        raise Conflict(LAPSED if lapsed else NO_SLOT)

    try:
        with transaction.atomic():
            review = Review.objects.create(
                candidate=candidate,
                annotator=user,
                # The free one: after an undo the review left may hold either.
                slot=min({1, 2} - {r.slot for r in existing}),
                candidate_author_id=candidate.author_id,
                candidate_co_author_id=candidate.co_author_id,
                decision=decision,
                revised_text=revised,
                reasons=reasons,
                comment=comment,
                seconds=seconds,
                submission_key=key,
                created_at=now,
            )
    except IntegrityError as exc:
        raise Conflict("Another review was recorded at the same moment; reload.") from exc
    ReviewClaim.objects.filter(candidate=candidate, annotator=user).delete()
    if len(existing) == 1:
        _resolve_pair(candidate, existing[0], review, now=now)
        _generate_if_left_without_candidates(candidate.image_id)
    return review


def _clean_key(value) -> uuid.UUID | None:
    if value is None or value == "":
        return None
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError as exc:
        raise InvalidInput("submission_key must be a UUID.", "submission_key") from exc


@transaction.atomic
def review_undo(*, user, review_id: int | None = None, now: datetime | None = None) -> dict:
    """Take back one of this person's reviews (by default the latest) until its candidate is
    resolved: nobody else has seen it, so the blind rules hold. A disputed candidate counts as
    not resolved: refusing there (or hiding the Undo button) would tell the annotator that the
    other review disagreed; it goes back to open, out of the adjudicators' queue, and the other
    review waits for this person's new one. The review's content is kept in a `review.undo`
    event, and the person holds the candidate again (first in their queue) to review it anew.

    Returns the withdrawn values (decision, revised_text, reasons, comment) and the candidate.
    """
    now = now or timezone.now()
    if not access.is_annotator(user):
        raise NotAllowed("Only annotators review candidates.")
    reviews = Review.objects.filter(annotator=user)
    if review_id is not None:
        review = reviews.filter(pk=review_id).first()
        if review is None:
            raise NotFound(f"You have no review {review_id}.")
    else:
        review = reviews.order_by("-created_at", "-id").first()
        if review is None:
            raise Conflict("You have no review to take back.")
    candidate = _lock_candidate(review.candidate_id)
    if candidate.status not in UNRESOLVED:
        raise Conflict(
            "That review can no longer be changed: its candidate is "
            f"{candidate.get_status_display().lower()} already."
        )
    if candidate.status == CandidateStatus.DISPUTED:
        _set_status(
            candidate, CandidateStatus.OPEN, actor=user, reason="a review was taken back", now=now
        )
        AdjudicationClaim.objects.filter(candidate=candidate).delete()
    values = {
        "decision": review.decision,
        "revised_text": review.revised_text,
        "reasons": list(review.reasons),
        "comment": review.comment,
    }
    AuditEvent.objects.create(
        actor=user,
        action="review.undo",
        candidate=candidate,
        image_id=candidate.image_id,
        data={
            **values,
            "slot": review.slot,
            "seconds": review.seconds,
            "reviewed_at": review.created_at.isoformat(),
        },
        at=now,
    )
    review.delete()
    # Dated as the review was, so that it comes before the claim the person holds now.
    ReviewClaim.objects.bulk_create(
        [
            ReviewClaim(
                candidate=candidate,
                annotator=user,
                expires_at=now + settings.REVIEW_LEASE,
                created_at=review.created_at,
            )
        ],
        update_conflicts=True,
        unique_fields=["candidate", "annotator"],
        update_fields=["expires_at", "created_at"],
    )
    return {**values, "candidate": candidate}


@transaction.atomic
def review_skip(*, user, candidate_id: int) -> None:
    """Hand a claimed candidate back to the pool (the caller keeps it out of this person's
    next claims for the sitting)."""
    if not access.is_annotator(user):
        raise NotAllowed("Only annotators review candidates.")
    ReviewClaim.objects.filter(candidate_id=candidate_id, annotator=user).delete()


@transaction.atomic
def preference_set(*, user, single_key_shortcuts: bool) -> Preference:
    if not user.is_authenticated:
        raise NotAllowed("Log in first.")
    preference, _ = Preference.objects.update_or_create(
        user=user, defaults={"single_key_shortcuts": bool(single_key_shortcuts)}
    )
    # Kept on the user object, so that anything drawn later in the same request shows the new
    # setting, not the one read before.
    user.preference = preference
    return preference


def _resolve_pair(candidate: Candidate, first: Review, second: Review, *, now: datetime) -> None:
    decisions = {first.decision, second.decision}
    if decisions == {Decision.ACCEPT}:
        _set_status(
            candidate,
            CandidateStatus.ACCEPTED,
            actor=second.annotator,
            reason="two acceptances",
            now=now,
        )
    elif decisions == {Decision.DISCARD}:
        _set_status(
            candidate,
            CandidateStatus.DISCARDED,
            actor=second.annotator,
            reason="two discards",
            now=now,
        )
    elif decisions == {Decision.REVISE} and normalize_text(first.revised_text) == normalize_text(
        second.revised_text
    ):
        _set_status(
            candidate,
            CandidateStatus.REVISED,
            actor=second.annotator,
            reason="two identical revisions",
            now=now,
        )
        _child_candidate(
            candidate,
            text=first.revised_text,
            origin=CandidateOrigin.REVISION,
            author=first.annotator,
            co_author=second.annotator,
            now=now,
        )
    else:
        _set_status(
            candidate,
            CandidateStatus.DISPUTED,
            actor=second.annotator,
            reason=f"{first.decision} against {second.decision}",
            now=now,
        )


# --- adjudication -------------------------------------------------------------------------


def adjudication_held(*, user, now: datetime | None = None) -> Claimed | None:
    """The disputed candidate this adjudicator holds, read only (what a visit of the page
    shows; adjudication_claim renews it, or takes the next)."""
    now = now or timezone.now()
    held = (
        AdjudicationClaim.objects.filter(adjudicator=user, expires_at__gt=now)
        .filter(candidate__in=Candidate.objects.adjudicable_by(user))
        .select_related("candidate__image")
        .first()
    )
    return Claimed(held.candidate, held.expires_at) if held else None


def adjudication_claim(*, user, now: datetime | None = None) -> Claimed | None:
    """Reserve the next disputed candidate that this adjudicator did not review."""
    if not access.is_adjudicator(user):
        raise NotAllowed("Only adjudicators resolve disputes.")
    now = now or timezone.now()
    expires_at = now + settings.REVIEW_LEASE
    with transaction.atomic():
        held = (
            AdjudicationClaim.objects.filter(adjudicator=user, expires_at__gt=now)
            .filter(candidate__in=Candidate.objects.adjudicable_by(user))
            .select_related("candidate__image")
            .first()
        )
        if held is not None:
            AdjudicationClaim.objects.filter(pk=held.pk).update(expires_at=expires_at)
            return Claimed(held.candidate, expires_at)
        free = (
            Candidate.objects.adjudicable_by(user)
            .filter(Q(adjudication_claim__isnull=True) | Q(adjudication_claim__expires_at__lte=now))
            .order_by("id")
        )
        for candidate in free[:20]:
            # The conditional update takes an expired lease; the unique constraint refuses a
            # second live one.
            taken = AdjudicationClaim.objects.filter(
                candidate=candidate, expires_at__lte=now
            ).update(adjudicator=user, expires_at=expires_at)
            if not taken:
                try:
                    with transaction.atomic():
                        AdjudicationClaim.objects.create(
                            candidate=candidate, adjudicator=user, expires_at=expires_at
                        )
                except IntegrityError:
                    continue
            return Claimed(
                Candidate.objects.select_related("image").get(pk=candidate.pk), expires_at
            )
    return None


@transaction.atomic
def adjudication_resolve(
    *,
    user,
    candidate_id: int,
    decision: str,
    revised_text: str | None = "",
    comment: str | None = "",
    seconds: int | None = None,
    submission_key: str | uuid.UUID | None = None,
    now: datetime | None = None,
) -> Adjudication:
    """Settle a disputed candidate. Accept needs one annotator's acceptance; a revision becomes
    a new candidate of the next round (credited to the annotator whose revision was picked).
    A repeated `submission_key` returns the first answer, as in review_submit."""
    now = now or timezone.now()
    if not access.is_adjudicator(user):
        raise NotAllowed("Only adjudicators resolve disputes.")
    key = _clean_key(submission_key)
    candidate = _lock_candidate(candidate_id)
    if key is not None:
        prior = Adjudication.objects.filter(adjudicator=user, submission_key=key).first()
        if prior is not None:
            if prior.candidate_id != candidate.pk:
                raise InvalidInput("submission_key belongs to another decision.", "submission_key")
            prior.repeated = True
            return prior
    reviews = list(candidate.reviews.select_related("annotator"))
    if any(r.annotator_id == user.pk for r in reviews):
        raise NotAllowed("You reviewed this candidate, so another adjudicator must settle it.")
    if user.pk in (candidate.author_id, candidate.co_author_id):
        raise NotAllowed("You wrote this question, so another adjudicator must settle it.")
    if candidate.status != CandidateStatus.DISPUTED:
        raise Conflict(f"This candidate is {candidate.status}, not disputed.")
    # As in review: settling without a claim is allowed, but not a candidate another holds.
    if (
        AdjudicationClaim.objects.filter(candidate=candidate, expires_at__gt=now)
        .exclude(adjudicator=user)
        .exists()
    ):
        raise Conflict("Another adjudicator holds this candidate; it is theirs to settle.")

    decision = _clean_decision(decision)
    revised = _clean_text(revised_text, "revised_text", required=decision == Decision.REVISE)
    if decision != Decision.REVISE and revised:
        raise InvalidInput("A revised text goes only with the decision revise.", "revised_text")
    if decision == Decision.ACCEPT and not any(r.decision == Decision.ACCEPT for r in reviews):
        raise InvalidInput(
            "accept needs one annotator's acceptance; neither annotator accepted.", "decision"
        )
    comment = _clean_text(comment, "comment", required=False, limit=MAX_COMMENT)
    seconds = _clean_seconds(seconds)

    chosen = None
    if decision == Decision.REVISE:
        chosen = next(
            (
                r
                for r in reviews
                if r.decision == Decision.REVISE
                and normalize_text(r.revised_text) == normalize_text(revised)
            ),
            None,
        )
    try:
        with transaction.atomic():
            adjudication = Adjudication.objects.create(
                candidate=candidate,
                adjudicator=user,
                decision=decision,
                revised_text=revised,
                chosen_review=chosen,
                comment=comment,
                seconds=seconds,
                submission_key=key,
                created_at=now,
            )
    except IntegrityError as exc:
        raise Conflict("This candidate was adjudicated at the same moment.") from exc
    AdjudicationClaim.objects.filter(candidate=candidate).delete()
    reason = f"adjudicated: {decision}"
    if decision == Decision.ACCEPT:
        _set_status(candidate, CandidateStatus.ACCEPTED, actor=user, reason=reason, now=now)
    elif decision == Decision.DISCARD:
        _set_status(candidate, CandidateStatus.DISCARDED, actor=user, reason=reason, now=now)
    else:
        _set_status(candidate, CandidateStatus.REVISED, actor=user, reason=reason, now=now)
        _child_candidate(
            candidate,
            text=revised,
            origin=CandidateOrigin.ADJUDICATION,
            author=chosen.annotator if chosen else user,
            now=now,
        )
    _generate_if_left_without_candidates(candidate.image_id)
    return adjudication


# --- final questions ----------------------------------------------------------------------


@transaction.atomic
def final_question_promote(
    *,
    user,
    candidate_id: int,
    method: str = FinalQuestion.Method.MANUAL,
    now: datetime | None = None,
) -> FinalQuestion:
    """Make an accepted candidate its image's question. Until the guard job exists, admins do
    this by hand; the guard will call this with method=guard."""
    now = now or timezone.now()
    if method == FinalQuestion.Method.MANUAL and not access.is_admin(user):
        raise NotAllowed("Only admins promote a candidate to the image's question.")
    candidate = _lock_candidate(candidate_id)
    if candidate.status != CandidateStatus.ACCEPTED:
        raise Conflict(
            f"Only an accepted candidate can become the question; this one is {candidate.status}."
        )
    if FinalQuestion.objects.filter(image_id=candidate.image_id).exists():
        raise Conflict("This image has its question already.")
    try:
        with transaction.atomic():
            question = FinalQuestion.objects.create(
                image_id=candidate.image_id,
                candidate=candidate,
                text=candidate.text,
                method=method,
                promoted_by=user if user is not None and user.is_authenticated else None,
                created_at=now,
            )
    except IntegrityError as exc:
        raise Conflict("This image got its question at the same moment.") from exc
    AuditEvent.objects.create(
        actor=question.promoted_by,
        action="question.promote",
        candidate=candidate,
        image_id=candidate.image_id,
        data={"method": method, "text": candidate.text},
        at=now,
    )
    return question


# --- upstream corrections (admins) ---------------------------------------------------------


@transaction.atomic
def question_correct(
    *, user, question_id: int, field_name: str, value: str, reason: str, now: datetime | None = None
) -> QuestionCorrection:
    """Correct the ground-truth entity or the wording of a question, with a reason."""
    now = now or timezone.now()
    if not access.is_admin(user):
        raise NotAllowed("Only admins correct questions.")
    if field_name not in (QuestionCorrection.Field.ENTITY, QuestionCorrection.Field.TEXT):
        raise InvalidInput("Choose what to correct: the entity or the wording.", "field")
    # The entity is a column of 500 characters; a question's text has the review's limit.
    limit = ENTITY_MAX if field_name == QuestionCorrection.Field.ENTITY else MAX_TEXT
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("The new value is empty.", "value")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("Give a reason: it is kept in the history.", "reason")
    value = clean_text(value, "value", limit=limit, required=True)
    reason = clean_text(reason, "reason", limit=MAX_COMMENT, required=True)
    question = (
        FinalQuestion.objects.select_for_update()
        .select_related("image")
        .filter(pk=question_id)
        .first()
    )
    if question is None:
        raise NotFound(f"There is no question {question_id}.")
    value = " ".join(value.split())
    if field_name == QuestionCorrection.Field.ENTITY:
        old = question.image.entity
        if old == value:
            raise InvalidInput("The entity is that already.", "value")
        question.image.entity = value
        question.image.save(update_fields=["entity"])
    else:
        old = question.text
        if old == value:
            raise InvalidInput("The question reads that already.", "value")
        question.text = value
        question.save(update_fields=["text"])
    correction = QuestionCorrection.objects.create(
        question=question,
        field=field_name,
        old_value=old,
        new_value=value,
        reason=reason.strip(),
        made_by=user,
        at=now,
    )
    AuditEvent.objects.create(
        actor=user,
        action=f"question.correct.{field_name}",
        image_id=question.image_id,
        data={"old": old, "new": value, "reason": reason.strip()},
        at=now,
    )
    return correction


@transaction.atomic
def question_drop(
    *, user, question_id: int, reason: str, restore: bool = False, now: datetime | None = None
) -> QuestionCorrection:
    """Drop a question for which no sound rubric can be produced (it leaves the export and
    judging), or restore it."""
    now = now or timezone.now()
    if not access.is_admin(user):
        raise NotAllowed("Only admins drop or restore questions.")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("Give a reason: it is kept in the history.", "reason")
    reason = clean_text(reason, "reason", limit=MAX_COMMENT, required=True)
    question = FinalQuestion.objects.select_for_update().filter(pk=question_id).first()
    if question is None:
        raise NotFound(f"There is no question {question_id}.")
    if restore and question.dropped_at is None:
        raise Conflict("This question is not dropped.")
    if not restore and question.dropped_at is not None:
        raise Conflict("This question is dropped already.")
    question.dropped_at = None if restore else now
    question.drop_reason = "" if restore else reason.strip()
    question.save(update_fields=["dropped_at", "drop_reason"])
    field_name = QuestionCorrection.Field.RESTORE if restore else QuestionCorrection.Field.DROP
    AuditEvent.objects.create(
        actor=user,
        action=f"question.{field_name}",
        image_id=question.image_id,
        data={"reason": reason.strip()},
        at=now,
    )
    return QuestionCorrection.objects.create(
        question=question, field=field_name, reason=reason.strip(), made_by=user, at=now
    )


# --- entity proposals (annotation/llm_entities.py) -------------------------------------------


@transaction.atomic
def image_entity_confirm(
    *,
    user,
    image_id: int,
    proposed: str,
    corrected: str | None = None,
    now: datetime | None = None,
) -> AuditEvent:
    """Confirm an image's proposed entity (`corrected` None) or correct it, so that its
    candidates may be generated and reviewed. `proposed` is the proposal as the person saw it:
    a confirmation counts only for what was shown. Confirming twice (a double submit, two
    people at once) is refused with a conflict: the conditional update lets one through."""
    now = now or timezone.now()
    if not access.is_annotator(user):
        raise NotAllowed("Only annotators confirm entities.")
    image = Image.objects.filter(pk=image_id).only("entity", "entity_confirmed").first()
    if image is None:
        raise NotFound(f"There is no image {image_id}.")
    if corrected is not None:
        corrected = " ".join(
            clean_text(corrected, "entity", limit=ENTITY_MAX, required=True).split()
        )
    new = corrected if corrected is not None else image.entity
    changed = Image.objects.filter(
        pk=image_id, entity_confirmed=False, entity=str(proposed or "")
    ).exclude(entity="")
    if not changed.update(entity_confirmed=True, entity=new):
        if Image.objects.filter(pk=image_id, entity_confirmed=True).exists():
            raise Conflict("This image's entity was confirmed already: here is the next one.")
        raise Conflict("The proposal changed since the page was drawn: here it is again.")
    action = "entity.confirm" if new == image.entity else "entity.correct"
    # The image may go on to generation now (by itself with LLM_AUTO_GENERATE).
    _generate_if_left_without_candidates(image_id)
    return AuditEvent.objects.create(
        actor=user,
        action=action,
        image_id=image_id,
        at=now,
        data={"proposed": image.entity, "entity": new},
    )
