"""The entity proposals of CRAG-MM rows (an LLM stage of the job console, before A.1).

CRAG-MM publishes no ground-truth entity: an import without an entities file leaves the image's
entity empty and unconfirmed. This job asks a model for the entity from the photo, the row's
query and its answer (structured: entity, popularity or unknown, a short reason). The proposal
is written on the image, still unconfirmed; an annotator then confirms or corrects it
(images/services.py, page /entities/), and only then does the image go on to
generation and review.

Idempotency as in questions/llm_jobs.py: applying an item writes a marker event
(`llm.propose_entity`, on the image, data `{"job", "item", "result"}`) in the transaction that
writes the proposal, with the image row locked; a redelivered item finds it and returns what the
first delivery did.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from pydantic import BaseModel, Field, field_validator

from llm.gateway import Gateway
from llm.jobs import ItemResult, JobError, current_item, job_launch, register_kind
from llm.launchers import register_launcher
from llm.models import Job, LLMModel
from llm.prompts import load_prompt

from ..candidates import ENTITY_MAX
from ..models import AuditEvent, Image
from ..questions.llm_jobs import (
    Setup,
    _failed,
    _image_input,
    _job_model_and_prompt,
    _load_image,
    _lock_image,
    _marker,
    _resolve_images,
    configured_model,
    image_domains,
)
from .crag_mm import DATASET

PROPOSE = "annotation.propose_entity"
MARKER = "llm.propose_entity"
SETTING = "LLM_MODEL_ENTITIES"
REASON_MAX = 1000
# Names that say nothing: the repair turn asks again rather than writing one on the image.
_VACANT = frozenset({"unknown", "n/a", "na", "none", "unclear", "not sure", "entity", "object"})


class EntityProposal(BaseModel):
    entity: str = Field(min_length=1, max_length=200)
    popularity: Literal["head", "torso", "tail", "unknown"]
    reason: str = Field(min_length=1, max_length=REASON_MAX)

    @field_validator("entity")
    @classmethod
    def _named(cls, value: str) -> str:
        cleaned = " ".join(value.split())
        if not cleaned:
            raise ValueError("the entity must be non-empty")
        if cleaned.casefold().strip(" .") in _VACANT:
            raise ValueError(
                "name the entity the photo shows; say popularity unknown when unsure, not the name"
            )
        return cleaned

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the reason must be non-empty")
        return value.strip()


def eligible_images() -> QuerySet[Image]:
    """Images imported from CRAG-MM that have no entity yet (neither a file's nor a proposal)."""
    return Image.objects.filter(
        import_batch__dataset=DATASET, entity="", entity_confirmed=False
    ).order_by("pk")


def _proposal_images(image_ids: list[int] | None) -> QuerySet[Image]:
    images = eligible_images()
    return images.filter(pk__in=image_ids) if image_ids is not None else images


def _setup(image_id: int, job_id: int, key: str) -> tuple[Setup, Image | None]:
    """What the call needs, with the image row (its CRAG-MM query and answer)."""
    marker = _marker(MARKER, job_id, key, image_id)
    if marker is not None:
        return Setup(done=marker.data["result"]), None
    image = _load_image(image_id)
    if image.entity or image.entity_confirmed:
        return Setup(done={"image": image.source_id, "skipped": "the image has an entity"}), None
    model, prompt = _job_model_and_prompt(job_id, "propose_entity")
    return Setup(model=model, prompt=prompt, image=_image_input(image)), image


@transaction.atomic
def apply_proposal(
    *, job_id: int, key: str, image_id: int, proposal: EntityProposal, now: datetime | None = None
) -> dict[str, Any]:
    now = now or timezone.now()
    image = _lock_image(image_id)
    marker = _marker(MARKER, job_id, key, image_id)
    if marker is not None:
        return marker.data["result"]
    result: dict[str, Any] = {"image": image.source_id}
    if image.entity or image.entity_confirmed:
        result["skipped"] = "the image got an entity meanwhile"
    else:
        entity = proposal.entity[:ENTITY_MAX]
        Image.objects.filter(pk=image.pk).update(entity=entity, popularity=proposal.popularity)
        result.update(entity=entity, popularity=proposal.popularity, reason=proposal.reason)
    AuditEvent.objects.create(
        action=MARKER, image=image, at=now, data={"job": job_id, "item": key, "result": result}
    )
    return result


async def propose(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    """One image's entity, popularity and reason, written on the image as a proposal."""
    context = current_item.get()
    setup, image = await sync_to_async(_setup)(payload["image_id"], context.job_id, context.key)
    if setup.done is not None:
        return setup.done
    assert setup.model and setup.prompt and setup.image and image is not None
    text = setup.prompt.render(
        domain=image.domain,
        source_domain=image.source_domain or "(none)",
        query=" ".join(image.source_query.split()) or "(none)",
        answer=" ".join(image.source_answer.split()) or "(none)",
    )
    call = await gateway.call_structured(
        setup.model,
        prompt=[text, setup.image.picture],
        schema=EntityProposal,
        stage=PROPOSE,
        template_name=setup.prompt.name,
        template_version=str(setup.prompt.version),
        fresh=context.fresh,
        job_id=context.job_id,
    )
    if not call.ok or not isinstance(call.output, EntityProposal):
        raise _failed(call)
    result = await sync_to_async(apply_proposal)(
        job_id=context.job_id, key=context.key, image_id=image.pk, proposal=call.output
    )
    return ItemResult.of_calls(result, call)


register_kind(
    PROPOSE, propose, chunk_size=20, concurrency=8, title="Propose entities", item_noun="image"
)


def entity_model() -> LLMModel:
    """LLM_MODEL_ENTITIES's model, or generation's when it names none (both need a vision
    model; the demo's generator answers this stage too)."""
    return configured_model(SETTING if settings.LLM_MODEL_ENTITIES else "LLM_MODEL_GENERATION")


def proposal_launch(*, user: Any, image_ids: list[int] | None = None, fresh: bool = False) -> Job:
    """Propose entities for the chosen CRAG-MM images without one, or for all of them."""
    model = entity_model()
    prompt = load_prompt("propose_entity")
    items = [
        (source_id, {"image_id": pk})
        for pk, source_id in _proposal_images(image_ids).values_list("pk", "source_id")
    ]
    if not items:
        raise JobError("No image in this scope is eligible for this job.")
    return job_launch(
        kind=PROPOSE,
        items=items,
        user=user,
        params={"model": model.name, "prompt_version": prompt.version, "fresh": fresh},
    )


def select_images(*, domain: str | None = None, state: str | None = None) -> list[int]:
    images = eligible_images()
    if domain is not None:
        images = images.filter(domain=domain)
    return list(images.values_list("pk", flat=True))


register_launcher(
    "propose_entities",
    label="Propose entities (CRAG-MM rows without one)",
    kind=PROPOSE,
    order=5,
    scope_noun="images",
    launch=lambda *, user, ids=None, fresh=False: proposal_launch(
        user=user, image_ids=ids, fresh=fresh
    ),
    eligible=lambda ids=None: _proposal_images(ids).count(),
    resolve=_resolve_images,
    model=entity_model,
    calls_per_item=1,
    select=select_images,
    domains=image_domains,
)
