"""An image's proposed entity, confirmed or corrected by an annotator (the page /entities/ and
its API); the proposals come from the LLM stage in images/entities.py."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from core import access
from core.errors import Conflict, NotAllowed, NotFound
from core.text import clean_text

from ..candidates import ENTITY_MAX
from ..models import (
    AuditEvent,
    Image,
)
from ..questions.auto_generation import generate_if_left_without_candidates


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
            clean_text(
                corrected, "entity", limit=ENTITY_MAX, required=True, label="The entity"
            ).split()
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
    generate_if_left_without_candidates(image_id)
    return AuditEvent.objects.create(
        actor=user,
        action=action,
        image_id=image_id,
        at=now,
        data={"proposed": image.entity, "entity": new},
    )
