"""Gold items and training: creating gold items (admin, JSONL import), drawing them into a
review queue, recording an answer to one, and a trainee's standing.

The review services call two hooks here: `gold_claim` before a real candidate is claimed, and
`gold_review_submit` when the candidate submitted is a gold one. Everything else about gold
items lives in this module.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import access
from core.errors import Conflict, InvalidInput, NotAllowed, NotFound

from ..candidates import (
    MAX_COMMENT,
    Claimed,
    clean_decision,
    clean_field,
    clean_reasons,
    clean_seconds,
    normalize_text,
)
from ..models import (
    AuditEvent,
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    Decision,
    GoldItem,
    GoldReview,
    Image,
    QualityConfig,
    ReviewClaim,
    TrainingState,
)

# Shuffling gold items into a queue; tests may seed it.
rng = random.Random()


# --- creating gold items ----------------------------------------------------------------------


@transaction.atomic
def gold_item_create(
    *,
    user,
    image_id: int,
    text: str,
    decision: str,
    note: str,
    revised_text: str = "",
    reasons: list[str] | None = None,
    training: bool = False,
    origin: str = CandidateOrigin.LLM,
    now: datetime | None = None,
) -> GoldItem:
    """A gold candidate on an existing image, with the expert's decision and note."""
    now = now or timezone.now()
    if user is not None and not access.is_admin(user):
        raise NotAllowed("Only admins create gold items.")
    if not Image.objects.filter(pk=image_id).exists():
        raise NotFound(f"There is no image {image_id}.", "image")
    text = clean_field(text, "text", required=True)
    decision = clean_decision(decision)
    revised = clean_field(revised_text, "revised_text", required=decision == Decision.REVISE)
    if decision != Decision.REVISE and revised:
        raise InvalidInput("A revised text goes only with the decision revise.", "revised_text")
    note = clean_field(note, "note", required=True, limit=MAX_COMMENT)
    if origin not in CandidateOrigin.values:
        raise InvalidInput(f"origin must be one of {', '.join(CandidateOrigin.values)}.", "origin")
    # Dated now, so that its id and date sit among the candidates made around it.
    candidate = Candidate.objects.create(
        image_id=image_id, text=text, origin=origin, status=CandidateStatus.GOLD, created_at=now
    )
    item = GoldItem.objects.create(
        candidate=candidate,
        decision=decision,
        revised_text=revised,
        reasons=clean_reasons(reasons),
        note=note,
        training=bool(training),
        created_by=user,
        created_at=now,
    )
    AuditEvent.objects.create(
        actor=user,
        action="gold.create",
        candidate=candidate,
        image_id=image_id,
        data={"decision": decision, "training": item.training},
        at=now,
    )
    return item


@dataclass
class GoldProblem:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class GoldImportProblems(InvalidInput):
    def __init__(self, problems: list[GoldProblem]):
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:20])
        more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        super().__init__(f"{len(problems)} problem(s), nothing imported: {shown}{more}", "file")


GOLD_FIELDS = {"image", "text", "decision", "revised_text", "reasons", "note", "training", "origin"}


def gold_import(*, user, data: bytes | str) -> list[GoldItem]:
    """Gold items from JSON Lines, one object a line: {"image": source id, "text", "decision",
    "note", optional "revised_text", "reasons" (tags), "training" (bool), "origin"}. Every line
    is checked first; any problem (named by line number) imports nothing."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise GoldImportProblems([GoldProblem(0, "the file is not UTF-8 text")]) from exc
    rows: list[tuple[int, dict]] = []
    problems: list[GoldProblem] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(GoldProblem(number, f"not JSON ({exc.msg})"))
            continue
        if not isinstance(row, dict):
            problems.append(GoldProblem(number, "each line must be a JSON object"))
            continue
        unknown = sorted(set(row) - GOLD_FIELDS)
        if unknown:
            problems.append(GoldProblem(number, f"unknown field {unknown[0]!r}"))
        for name in ("image", "text", "decision", "note"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                problems.append(GoldProblem(number, f"{name!r} is missing or empty"))
        for check in (
            lambda r: clean_decision(r.get("decision")),
            lambda r: clean_reasons(r.get("reasons")),
        ):
            try:
                check(row)
            except InvalidInput as exc:
                problems.append(GoldProblem(number, exc.message))
        if row.get("decision") == Decision.REVISE and not str(row.get("revised_text") or ""):
            problems.append(GoldProblem(number, "a revise decision needs its revised_text"))
        if "training" in row and not isinstance(row["training"], bool):
            problems.append(GoldProblem(number, "'training' must be true or false"))
        rows.append((number, row))
    images = dict(
        Image.objects.filter(
            source_id__in=[r.get("image") for _, r in rows if isinstance(r.get("image"), str)]
        ).values_list("source_id", "pk")
    )
    for number, row in rows:
        if isinstance(row.get("image"), str) and row["image"] not in images:
            problems.append(GoldProblem(number, f"there is no image {row['image']!r}"))
    if not rows and not problems:
        problems.append(GoldProblem(0, "the file holds no gold item"))
    if problems:
        raise GoldImportProblems(sorted(problems, key=lambda p: p.line))
    created = []
    with transaction.atomic():
        for number, row in rows:
            try:
                created.append(
                    gold_item_create(
                        user=user,
                        image_id=images[row["image"]],
                        text=row["text"],
                        decision=row["decision"],
                        note=row["note"],
                        revised_text=row.get("revised_text") or "",
                        reasons=row.get("reasons"),
                        training=row.get("training", False),
                        origin=row.get("origin", CandidateOrigin.LLM),
                    )
                )
            except InvalidInput as exc:
                raise GoldImportProblems([GoldProblem(number, exc.message)]) from exc
    return created


# --- training standing ------------------------------------------------------------------------


@dataclass(frozen=True)
class Standing:
    """A person's place in training. `required`: a training set exists and they have not
    passed; `blocked`: they answered it all and did not reach the threshold."""

    attempt: int
    total: int  # training items in the set
    answered: int
    agreed: int
    threshold: float
    passed: bool
    failed: bool

    @property
    def required(self) -> bool:
        return self.total > 0 and not self.passed

    @property
    def blocked(self) -> bool:
        return self.required and self.failed

    @property
    def share(self) -> float | None:
        return self.agreed / self.answered if self.answered else None


def training_standing(user, *, config: QualityConfig | None = None) -> Standing:
    config = config or QualityConfig.current()
    state = TrainingState.objects.filter(user=user).first()
    attempt = state.attempt if state else 1
    total = GoldItem.objects.filter(training=True, active=True).count()
    answers = list(
        GoldReview.objects.filter(
            annotator=user, attempt=attempt, gold__training=True, gold__active=True
        ).values_list("agrees", flat=True)
    )
    return Standing(
        attempt=attempt,
        total=total,
        answered=len(answers),
        agreed=sum(answers),
        threshold=config.training_pass_share,
        passed=bool(state and state.passed_at),
        failed=bool(state and state.failed_at),
    )


def _state(user) -> TrainingState:
    state, _ = TrainingState.objects.select_for_update().get_or_create(user=user)
    return state


@transaction.atomic
def training_reset(*, user, annotator_id: int, now: datetime | None = None) -> TrainingState:
    """Start the person's training again (a new attempt; their earlier answers are kept)."""
    now = now or timezone.now()
    if not access.is_admin(user):
        raise NotAllowed("Only admins reset a person's training.")
    person = _person(annotator_id)
    state = _state(person)
    old = {"attempt": state.attempt, "passed": bool(state.passed_at)}
    state.attempt += 1
    state.passed_at = state.failed_at = None
    state.changed_by, state.changed_at = user, now
    state.save()
    # Whatever they hold goes back to the pool: a trainee's next candidate is a training item.
    ReviewClaim.objects.filter(annotator=person).delete()
    AuditEvent.objects.create(
        actor=user, action="training.reset", data={"annotator": person.username, **old}, at=now
    )
    return state


@transaction.atomic
def training_pass(*, user, annotator_id: int, now: datetime | None = None) -> TrainingState:
    """Let a person start real work without (finishing) the training, e.g. an experienced one."""
    now = now or timezone.now()
    if not access.is_admin(user):
        raise NotAllowed("Only admins let a person past the training.")
    person = _person(annotator_id)
    state = _state(person)
    if state.passed_at:
        raise Conflict(f"{person.username} has passed the training already.")
    state.passed_at, state.failed_at = now, None
    state.changed_by, state.changed_at = user, now
    state.save()
    AuditEvent.objects.create(
        actor=user, action="training.pass", data={"annotator": person.username}, at=now
    )
    return state


def _person(annotator_id):
    from django.contrib.auth import get_user_model

    person = get_user_model().objects.filter(pk=annotator_id).first()
    if person is None or not access.is_annotator(person):
        raise NotFound(f"There is no annotator {annotator_id}.")
    return person


# --- the review queue's hook ------------------------------------------------------------------

# Returned by gold_claim when the person must finish (or redo) training before real work.
TRAINING_GATE = object()


def must_train(user) -> bool:
    """Whether a training set exists that this person has not passed (two small queries)."""
    if not GoldItem.objects.filter(training=True, active=True).exists():
        return False
    return not TrainingState.objects.filter(user=user, passed_at__isnull=False).exists()


def gold_claim(*, user, skip: list[int], now: datetime):
    """The gold item to show this person next, as a services.Claimed, or None for a real
    candidate. A trainee gets the training set first, and nothing else until they pass: then
    `blocked_by_training` is set on the None that is returned (see `training_gate`)."""

    # One query, and nothing random, where there are no gold items at all.
    if not GoldItem.objects.filter(active=True).exists():
        return None
    expires_at = now + settings.REVIEW_LEASE
    held = (
        ReviewClaim.objects.filter(
            annotator=user,
            expires_at__gt=now,
            candidate__status=CandidateStatus.GOLD,
            candidate__gold__active=True,
        )
        .exclude(candidate_id__in=skip)
        .select_related("candidate__image")
        .order_by("created_at")
        .first()
    )
    if held is not None and ReviewClaim.objects.filter(pk=held.pk).update(expires_at=expires_at):
        return Claimed(held.candidate, expires_at)
    config = QualityConfig.current()
    items = GoldItem.objects.filter(active=True).exclude(candidate_id__in=skip)
    if must_train(user):
        standing = training_standing(user, config=config)
        answered = GoldReview.objects.filter(annotator=user, attempt=standing.attempt).values(
            "gold_id"
        )
        item = (
            items.filter(training=True)
            .exclude(pk__in=answered)
            .select_related("candidate__image")
            .order_by("id")
            .first()
        )
        return _claim(item, user, now, expires_at) if item else TRAINING_GATE
    if config.gold_rate <= 0 or rng.random() >= config.gold_rate:
        return None
    # Only among real work: a gold item shown to someone with nothing else waiting would stand out.
    if not Candidate.objects.reviewable_by(user).exists():
        return None
    item = (
        items.filter(training=False)
        .exclude(gold_reviews__annotator=user)
        .select_related("candidate__image")
        .order_by("?")
        .first()
    )
    return _claim(item, user, now, expires_at) if item else None


def _claim(item: GoldItem, user, now: datetime, expires_at: datetime):
    ReviewClaim.objects.bulk_create(
        [
            ReviewClaim(
                candidate=item.candidate, annotator=user, expires_at=expires_at, created_at=now
            )
        ],
        update_conflicts=True,
        unique_fields=["candidate", "annotator"],
        update_fields=["expires_at", "created_at"],
    )
    return Claimed(item.candidate, expires_at)


def drawn_for(candidate: Candidate, user) -> bool:
    """Whether this gold candidate was drawn into this person's queue (gold_claim made their
    claim; a lapsed one counts, as a real candidate may be answered after its lease). Only
    then may they answer it, and only then do they see the expert's answer after it: a gold
    item answered by its id alone would hand out the expert's answer to anyone who asks."""
    return ReviewClaim.objects.filter(candidate=candidate, annotator=user).exists()


def _answered(item: GoldItem, user):
    """This person's answers to the item that count: training items once per attempt."""
    answered = GoldReview.objects.filter(gold=item, annotator=user)
    if not item.training:
        return answered
    state = TrainingState.objects.filter(user=user).first()
    return answered.filter(attempt=state.attempt if state else 1)


def answered_by(candidate: Candidate, user) -> bool:
    return _answered(GoldItem.objects.get(candidate=candidate), user).exists()


def answer_with_key(user, key: uuid.UUID) -> GoldReview | None:
    """This person's answer to a gold item sent under `key` (services.review_submit looks up
    a key over reviews and gold answers alike)."""
    return (
        GoldReview.objects.filter(annotator=user, submission_key=key)
        .select_related("gold__candidate")
        .first()
    )


def agrees_with_expert(decision: str, item: GoldItem) -> bool:
    """The decision is what counts: two good revisions of one question rarely read the same."""
    return decision == item.decision


def gold_review_submit(
    *,
    user,
    candidate: Candidate,
    decision: str,
    revised_text: str | None,
    reasons: list[str] | None,
    comment: str | None,
    seconds,
    key: uuid.UUID | None,
    now: datetime,
) -> GoldReview:
    """An answer to a gold item drawn for this person, checked as a review is, in the same
    order (called by services.review_submit, inside its transaction, with the candidate locked
    and its submission key looked up). Its `feedback` attribute holds the expert's answer for
    the page."""
    item = GoldItem.objects.get(candidate=candidate)
    state = TrainingState.objects.filter(user=user).first()
    attempt = state.attempt if state else 1
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
    # Training items are answered once per attempt, the others once.
    if _answered(item, user).exists():
        raise Conflict("You have reviewed this candidate already.")
    try:
        with transaction.atomic():
            review = GoldReview.objects.create(
                gold=item,
                annotator=user,
                attempt=attempt,
                decision=decision,
                revised_text=revised,
                reasons=reasons,
                comment=comment,
                seconds=seconds,
                agrees=agrees_with_expert(decision, item),
                submission_key=key,
                created_at=now,
            )
    except IntegrityError as exc:
        raise Conflict("Another review was recorded at the same moment; reload.") from exc
    ReviewClaim.objects.filter(candidate=candidate, annotator=user).delete()
    if item.training:
        _settle_training(user, now)
    review.feedback = item
    return review


def _settle_training(user, now: datetime) -> None:
    """Once the whole training set is answered, the person passes or fails the attempt."""
    standing = training_standing(user)
    if not standing.required or standing.answered < standing.total:
        return
    state = _state(user)
    if (standing.share or 0) >= standing.threshold:
        state.passed_at, state.failed_at = now, None
        action = "training.passed"
    else:
        state.failed_at = now
        action = "training.failed"
    state.save()
    AuditEvent.objects.create(
        actor=user,
        action=action,
        data={"attempt": standing.attempt, "agreed": standing.agreed, "of": standing.total},
        at=now,
    )
