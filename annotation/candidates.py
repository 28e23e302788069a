"""What the services of several packages share about a candidate: the limits of a form's
fields and their cleaning, the lock and the status change of a candidate (with its audit event),
the next round's candidate, and a held claim. Review (review/services.py), the gold items
(training/gold.py) and the final questions (questions/services.py) import it; it imports none of
them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from core import text as text_limits
from core.errors import Conflict, InvalidInput, NotFound
from core.text import clean_text

from .models import (
    REASON_KEYS,
    AuditEvent,
    Candidate,
    CandidateStatus,
    Decision,
)

MAX_SECONDS = 24 * 3600
MAX_TEXT = text_limits.MAX_QUESTION_TEXT
MAX_COMMENT = text_limits.MAX_COMMENT
ENTITY_MAX = text_limits.MAX_ENTITY  # Image.entity's max_length


# A candidate whose reviews may still change: to an annotator, both look alike (blind review).
UNRESOLVED = (CandidateStatus.OPEN, CandidateStatus.DISPUTED)


def normalize_text(text: str) -> str:
    """Two revisions are the same when they differ only in case and spacing."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def lock_candidate(candidate_id: int) -> Candidate:
    # select_for_update serializes writers of one candidate on PostgreSQL; on SQLite the
    # IMMEDIATE transaction already holds the write lock.
    candidate = Candidate.objects.select_for_update().filter(pk=candidate_id).first()
    if candidate is None:
        raise NotFound(f"There is no candidate {candidate_id}.")
    return candidate


def set_status(
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


# Fields in words for messages a person reads; `field` on the error keeps the input's name.
FIELD_WORDS = {
    "revised_text": "The revised question",
    "comment": "The comment",
    "reason": "The reason",
    "value": "The new value",
    "note": "The note",
    "text": "The question",
}


def clean_field(value, field: str, *, required: bool, limit: int = MAX_TEXT) -> str:
    if required and (value is None or (isinstance(value, str) and not value.strip())):
        what = FIELD_WORDS.get(field, field)
        raise InvalidInput(
            f"{what} is empty: write it, or choose another decision."
            if field == "revised_text"
            else f"{what} is required.",
            field,
        )
    return clean_text(
        value, field, limit=limit, required=required, label=FIELD_WORDS.get(field, field)
    )


def clean_decision(decision) -> str:
    if decision not in Decision.values:
        choices = ", ".join(str(label) for label in Decision.labels[:-1])
        choices += f" or {Decision.labels[-1]}"
        raise InvalidInput(
            f"Choose a decision: {choices}."
            if not decision
            else f"“{str(decision)[:40]}” is not a decision: choose {choices}.",
            "decision",
        )
    return decision


def clean_seconds(seconds) -> int | None:
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


def clean_reasons(reasons) -> list[str]:
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


def child_candidate(
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
