"""Audits: a share of each annotator's resolved reviews is drawn for an adjudicator (agree or
overturn, with a note), and a share of each reviser's completed rubric rounds for a second
reviser (accept or flag, with a note; the flags show in the rubric's history).

Drawing is exact per person: with a rate r, a person with n resolved reviews (or completed
rounds) has round(r * n) of them drawn, picked at random among those not drawn yet; the draw
runs when an auditor opens their page, so nothing else has to call it. Nobody audits their
own work: not a review they wrote or that sat beside theirs, not a candidate they wrote or
adjudicated, not a round they completed.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import datetime

from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from core import access
from core import text as text_limits
from core.errors import Conflict, InvalidInput, NotAllowed, NotFound
from rubrics.models import HUMAN_STAGES, RubricVersion

from ..candidates import clean_field
from ..models import (
    RESOLVED_STATUSES,
    Adjudication,
    AuditEvent,
    AuditVerdict,
    QualityConfig,
    Review,
    ReviewAudit,
    RoundAudit,
)

rng = random.Random()  # tests may seed it

REVIEW_VERDICTS = (AuditVerdict.AGREE, AuditVerdict.OVERTURN)
ROUND_VERDICTS = (AuditVerdict.ACCEPT, AuditVerdict.FLAG)
MAX_NOTE = text_limits.MAX_COMMENT


def due(rate: float, n: int) -> int:
    """How many of n pieces of work a rate asks for: the nearest whole number, halves up."""
    return math.floor(rate * n + 0.5)


def _draw(done_by: dict[int, int], drawn_by: Counter, rate: float, undrawn) -> list[tuple]:
    """(person, [ids]) to draw: for each person short of their due, a random pick among
    `undrawn(person)` (ids of their work not drawn yet)."""
    picks = []
    for person, n in done_by.items():
        missing = due(rate, n) - drawn_by.get(person, 0)
        if missing > 0:
            pool = list(undrawn(person))
            picks.append((person, rng.sample(pool, min(missing, len(pool)))))
    return picks


def _count_by(rows, field: str) -> dict[int, int]:
    """{value of field: number of rows}, in one GROUP BY."""
    return dict(rows.order_by().values_list(field).annotate(n=Count("id")).values_list(field, "n"))


@transaction.atomic
def review_audits_draw(*, rate: float | None = None, now: datetime | None = None) -> int:
    """Draw each annotator's due share of resolved reviews; returns how many were drawn."""
    now = now or timezone.now()
    rate = QualityConfig.current().review_audit_rate if rate is None else rate
    resolved = Review.objects.filter(candidate__status__in=RESOLVED_STATUSES)
    picks = _draw(
        _count_by(resolved, "annotator_id"),
        Counter(_count_by(ReviewAudit.objects, "annotator_id")),
        rate,
        lambda person: resolved.filter(annotator_id=person, audit__isnull=True).values_list(
            "pk", flat=True
        ),
    )
    audits = [
        ReviewAudit(review_id=pk, annotator_id=person, drawn_at=now)
        for person, pks in picks
        for pk in pks
    ]
    ReviewAudit.objects.bulk_create(audits, ignore_conflicts=True)
    return len(audits)


@transaction.atomic
def round_audits_draw(*, rate: float | None = None, now: datetime | None = None) -> int:
    """Draw each reviser's due share of completed human rounds."""
    now = now or timezone.now()
    rate = QualityConfig.current().round_audit_rate if rate is None else rate
    completed = RubricVersion.objects.filter(
        stage__in=HUMAN_STAGES, frozen_at__isnull=False, made_by__isnull=False
    )
    picks = _draw(
        _count_by(completed, "made_by_id"),
        Counter(_count_by(RoundAudit.objects, "reviser_id")),
        rate,
        lambda person: completed.filter(made_by_id=person, audit__isnull=True).values_list(
            "pk", flat=True
        ),
    )
    audits = [
        RoundAudit(version_id=pk, reviser_id=person, drawn_at=now)
        for person, pks in picks
        for pk in pks
    ]
    RoundAudit.objects.bulk_create(audits, ignore_conflicts=True)
    return len(audits)


# --- what each auditor may take ---------------------------------------------------------------


def review_audits_open_to(user):
    """Pending review audits this adjudicator may give: none of their own work."""
    own_review = Review.objects.filter(candidate=OuterRef("review__candidate"), annotator=user)
    adjudicated = Adjudication.objects.filter(
        candidate=OuterRef("review__candidate"), adjudicator=user
    )
    return (
        ReviewAudit.objects.filter(verdict="")
        .exclude(annotator=user)
        .exclude(Q(review__candidate__author=user) | Q(review__candidate__co_author=user))
        .filter(~Exists(own_review), ~Exists(adjudicated))
    )


def round_audits_open_to(user):
    """Pending round audits this reviser may give: not a round they completed or edited."""
    from rubrics.models import CheckEdit

    edited = CheckEdit.objects.filter(version=OuterRef("version"), editor=user)
    return RoundAudit.objects.filter(verdict="").exclude(reviser=user).filter(~Exists(edited))


def _clean_note(note, verdict: str, needed_for: str) -> str:
    if verdict == needed_for and (note is None or (isinstance(note, str) and not note.strip())):
        raise InvalidInput(f"Write a note: say why you {verdict} it.", "note")
    return clean_field(note, "note", required=False, limit=MAX_NOTE)


@transaction.atomic
def review_audit_give(
    *, user, audit_id: int, verdict: str, note: str = "", now: datetime | None = None
) -> ReviewAudit:
    """An adjudicator's verdict on a drawn review: agree, or overturn (with a note)."""
    now = now or timezone.now()
    if not access.is_adjudicator(user):
        raise NotAllowed("Only adjudicators audit reviews.")
    if verdict not in REVIEW_VERDICTS:
        raise InvalidInput("Choose agree or overturn.", "verdict")
    note = _clean_note(note, verdict, AuditVerdict.OVERTURN)
    audit = ReviewAudit.objects.select_related("review").filter(pk=audit_id).first()
    if audit is None:
        raise NotFound(f"There is no audit {audit_id}.")
    if not review_audits_open_to(user).filter(pk=audit.pk).exists():
        if audit.verdict:
            raise Conflict("This review has been audited already.")
        raise NotAllowed("This is your own work (or beside it): another adjudicator audits it.")
    # Conditional: of two auditors sending at once, the second is refused.
    taken = ReviewAudit.objects.filter(pk=audit.pk, verdict="").update(
        auditor=user, verdict=verdict, note=note, audited_at=now
    )
    if taken != 1:
        raise Conflict("This review has been audited already.")
    AuditEvent.objects.create(
        actor=user,
        action=f"audit.review.{verdict}",
        candidate_id=audit.review.candidate_id,
        data={"review": audit.review_id, "annotator": audit.annotator_id, "note": note},
        at=now,
    )
    audit.refresh_from_db()
    return audit


@transaction.atomic
def round_audit_give(
    *, user, audit_id: int, verdict: str, note: str = "", now: datetime | None = None
) -> RoundAudit:
    """A second reviser's verdict on a completed round: accept, or flag (with a note)."""
    now = now or timezone.now()
    if not access.is_reviser(user):
        raise NotAllowed("Only rubric revisers audit rubric rounds.")
    if verdict not in ROUND_VERDICTS:
        raise InvalidInput("Choose accept or flag.", "verdict")
    note = _clean_note(note, verdict, AuditVerdict.FLAG)
    audit = RoundAudit.objects.filter(pk=audit_id).first()
    if audit is None:
        raise NotFound(f"There is no audit {audit_id}.")
    if not round_audits_open_to(user).filter(pk=audit.pk).exists():
        if audit.verdict:
            raise Conflict("This round has been audited already.")
        raise NotAllowed("This is your own round: another reviser audits it.")
    taken = RoundAudit.objects.filter(pk=audit.pk, verdict="").update(
        auditor=user, verdict=verdict, note=note, audited_at=now
    )
    if taken != 1:
        raise Conflict("This round has been audited already.")
    audit.refresh_from_db()
    return audit
