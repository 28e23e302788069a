"""Generation of new candidates when a resolution leaves an image without any
(LLM_AUTO_GENERATE): the services that resolve a candidate (review, adjudication, an entity's
confirmation) call it last."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)


def generate_if_left_without_candidates(image_id: int) -> None:
    """Called by the services that resolve a candidate (review, adjudication), last: with
    LLM_AUTO_GENERATE on, an image that the resolution leaves without candidates gets a
    generation job once the change commits. Never fails the review: a missing model is logged
    and skipped, and any other error of the launch is logged by the robust on_commit."""
    if not getattr(settings, "LLM_AUTO_GENERATE", False):
        return
    transaction.on_commit(lambda: auto_generate(image_id), robust=True)


def auto_generate(image_id: int) -> None:
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
