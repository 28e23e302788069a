"""An image's final question: an accepted candidate promoted to it (by an admin, or by the guard),
and an admin's corrections of its entity or wording, its drop and its restore, each with a reason
kept in the history."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from core import access
from core.errors import Conflict, InvalidInput, NotAllowed, NotFound
from core.text import clean_text

from ..candidates import ENTITY_MAX, MAX_COMMENT, MAX_TEXT, lock_candidate
from ..models import (
    AuditEvent,
    CandidateStatus,
    FinalQuestion,
    QuestionCorrection,
)

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
    candidate = lock_candidate(candidate_id)
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
    value = clean_text(value, "value", limit=limit, required=True, label="The new value")
    reason = clean_text(reason, "reason", limit=MAX_COMMENT, required=True, label="The reason")
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
    reason = clean_text(reason, "reason", limit=MAX_COMMENT, required=True, label="The reason")
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
