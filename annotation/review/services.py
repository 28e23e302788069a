"""The writes of review and adjudication: claims, reviews (with their undo and skip), the pair's
resolution and the adjudicator's decision. The final questions' writes are in
questions/services.py, an entity's confirmation in images/services.py.

Each checks the current state inside a transaction and raises a `DomainError` subclass when
the request is wrong; the web views and the API translate those into messages and status codes.
The database constraints on `Review` are the last line: if two writers slip past the checks,
the second insert fails and is reported as a conflict.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from core import access
from core.errors import Conflict, DomainError, InvalidInput, NotAllowed, NotFound

from ..candidates import (
    MAX_COMMENT,
    UNRESOLVED,
    Claimed,
    child_candidate,
    clean_decision,
    clean_field,
    clean_reasons,
    clean_seconds,
    lock_candidate,
    normalize_text,
    set_status,
)
from ..models import (
    Adjudication,
    AdjudicationClaim,
    AuditEvent,
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    Decision,
    Review,
    ReviewClaim,
)
from ..questions.auto_generation import generate_if_left_without_candidates
from ..training import gold

log = logging.getLogger(__name__)

# Kept until the in-flight branches are merged: the error classes live in core.errors now.
ReviewError = DomainError


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
        if held is not None and gold.must_train(user):
            # A training set arrived (or was reset) while a real candidate was held: the
            # training comes first, and the real candidate goes back to the pool, not lost.
            ReviewClaim.objects.filter(pk=held.pk).delete()
            held = None
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
    if held is None:
        return None
    if held.candidate.status != CandidateStatus.GOLD and gold.must_train(user):
        return None  # the training comes first: the page's claim releases this one
    return Claimed(held.candidate, held.expires_at)


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
        revised = clean_field(revised_text, "revised_text", required=False)
        reasons = clean_reasons(reasons)
        comment = clean_field(comment, "comment", required=False, limit=MAX_COMMENT)
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
    candidate = lock_candidate(candidate_id)
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
        raise NotAllowed(
            "Finish the training first: this candidate went back to the pool, and real "
            "candidates come once you pass."
        )
    if user.pk in (candidate.author_id, candidate.co_author_id):
        raise NotAllowed("You wrote this question, so you may not review it.")

    decision = clean_decision(decision)
    revised = clean_field(revised_text, "revised_text", required=decision == Decision.REVISE)
    if decision != Decision.REVISE and revised:
        raise InvalidInput("A revised text goes only with the decision revise.", "revised_text")
    if decision == Decision.REVISE and normalize_text(revised) == normalize_text(candidate.text):
        raise InvalidInput(
            "Your revision is the same as the question; choose accept instead.", "revised_text"
        )
    reasons = clean_reasons(reasons)
    comment = clean_field(comment, "comment", required=False, limit=MAX_COMMENT)
    seconds = clean_seconds(seconds)

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
        generate_if_left_without_candidates(candidate.image_id)
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
    candidate = lock_candidate(review.candidate_id)
    if candidate.status not in UNRESOLVED:
        raise Conflict(
            "That review can no longer be changed: its candidate is "
            f"{candidate.get_status_display().lower()} already."
        )
    if candidate.status == CandidateStatus.DISPUTED:
        set_status(
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


def _resolve_pair(candidate: Candidate, first: Review, second: Review, *, now: datetime) -> None:
    decisions = {first.decision, second.decision}
    if decisions == {Decision.ACCEPT}:
        set_status(
            candidate,
            CandidateStatus.ACCEPTED,
            actor=second.annotator,
            reason="two acceptances",
            now=now,
        )
    elif decisions == {Decision.DISCARD}:
        set_status(
            candidate,
            CandidateStatus.DISCARDED,
            actor=second.annotator,
            reason="two discards",
            now=now,
        )
    elif decisions == {Decision.REVISE} and normalize_text(first.revised_text) == normalize_text(
        second.revised_text
    ):
        set_status(
            candidate,
            CandidateStatus.REVISED,
            actor=second.annotator,
            reason="two identical revisions",
            now=now,
        )
        child_candidate(
            candidate,
            text=first.revised_text,
            origin=CandidateOrigin.REVISION,
            author=first.annotator,
            co_author=second.annotator,
            now=now,
        )
    else:
        set_status(
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
    candidate = lock_candidate(candidate_id)
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

    decision = clean_decision(decision)
    revised = clean_field(revised_text, "revised_text", required=decision == Decision.REVISE)
    if decision != Decision.REVISE and revised:
        raise InvalidInput("A revised text goes only with the decision revise.", "revised_text")
    if decision == Decision.ACCEPT and not any(r.decision == Decision.ACCEPT for r in reviews):
        raise InvalidInput(
            "accept needs one annotator's acceptance; neither annotator accepted.", "decision"
        )
    comment = clean_field(comment, "comment", required=False, limit=MAX_COMMENT)
    seconds = clean_seconds(seconds)

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
        set_status(candidate, CandidateStatus.ACCEPTED, actor=user, reason=reason, now=now)
    elif decision == Decision.DISCARD:
        set_status(candidate, CandidateStatus.DISCARDED, actor=user, reason=reason, now=now)
    else:
        set_status(candidate, CandidateStatus.REVISED, actor=user, reason=reason, now=now)
        child_candidate(
            candidate,
            text=revised,
            origin=CandidateOrigin.ADJUDICATION,
            author=chosen.annotator if chosen else user,
            now=now,
        )
    generate_if_left_without_candidates(candidate.image_id)
    return adjudication
