"""The LLM jobs of stage 1: candidate generation (A.1) and the guard (A.2).

Each is a job kind of llm/jobs.py, one item per image (key: the image's source id, payload: its
id). A handler reads the image in a sync step, calls the model through the gateway with the
image inline and a pydantic schema, and applies the answer in one transaction.

Idempotency: a redelivered item (a worker died after applying but before recording) must not
apply twice. Applying an item writes a marker AuditEvent (`llm.generate` / `llm.guard`, on the
image, data `{"job", "item", ...}`) in the same transaction as its effects, with the image row
locked; a second run finds the marker and returns what the first one did, without calling the
model again. The models stay as they are: the audit trail is where those facts belong anyway.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone
from pydantic import BaseModel, Field, field_validator

from llm.demo import stage_model_name
from llm.gateway import CallResult, Check, Gateway, ImagePart
from llm.jobs import (
    ACTIVE,
    ItemFailed,
    ItemResult,
    JobError,
    current_item,
    job_launch,
    register_kind,
)
from llm.launchers import register_launcher
from llm.models import ItemStatus, Job, JobItem, LLMModel
from llm.prompts import Prompt, load_prompt
from llm.schemas import names, one_each

from ..candidates import normalize_text
from ..models import (
    AuditEvent,
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    FinalQuestion,
    Image,
)
from .services import final_question_promote

GENERATE = "annotation.generate"
GUARD = "annotation.guard"
MIN_QUESTIONS, MAX_QUESTIONS = 3, 6
MAX_QUESTION_CHARS = 500  # a concise question is far shorter; longer is a malformed answer


# ---------------------------------------------------------------------------------------------
# Output schemas. Validators here run inside the gateway's validation, so a violation gets the
# gateway's repair turns like any schema error.


def _distinct_questions(questions: list[str]) -> list[str]:
    cleaned = [q.strip() for q in questions]
    if any(not q for q in cleaned):
        raise ValueError("every question must be non-empty")
    if any(len(q) > MAX_QUESTION_CHARS for q in cleaned):
        raise ValueError(f"a question must be at most {MAX_QUESTION_CHARS} characters")
    if len({normalize_text(q) for q in cleaned}) != len(cleaned):
        raise ValueError("the questions must be distinct")
    return cleaned


class GeneratedQuestions(BaseModel):
    questions: list[str] = Field(min_length=MIN_QUESTIONS, max_length=MAX_QUESTIONS)

    @field_validator("questions")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return _distinct_questions(value)


class GuardVerdict(BaseModel):
    id: int = Field(json_schema_extra=names("candidates"))
    passes_hard_requirements: bool
    stranger_test_pass: bool
    boilerplate: bool
    reason: str = Field(min_length=1)

    @property
    def selectable(self) -> bool:
        return self.passes_hard_requirements and self.stranger_test_pass and not self.boilerplate


class GuardOutput(BaseModel):
    # The candidate ids of the call are in the schema sent (llm/schemas.py): one verdict each.
    verdicts: list[GuardVerdict] = Field(json_schema_extra=one_each("candidates"))
    selected: int | None = Field(json_schema_extra=names("candidates"))
    new_candidates: list[str] = Field(default_factory=list, max_length=MAX_QUESTIONS)

    @field_validator("new_candidates")
    @classmethod
    def _clean_new(cls, value: list[str]) -> list[str]:
        return _distinct_questions(value) if value else value


def guard_problems(output: GuardOutput, ids: frozenset[int]) -> list[str]:
    """What makes a schema-valid guard answer inconsistent with the candidates it was shown."""
    problems = []
    seen = [v.id for v in output.verdicts]
    if sorted(seen) != sorted(ids):
        problems.append(f"give exactly one verdict per candidate id {sorted(ids)}, got {seen}")
    by_id = {v.id: v for v in output.verdicts}
    if output.selected is not None:
        chosen = by_id.get(output.selected)
        if chosen is None:
            problems.append(f"selected {output.selected} is not one of the candidate ids")
        elif not chosen.selectable:
            problems.append(
                f"selected {output.selected} fails a hard requirement, the stranger "
                "test, or is boilerplate"
            )
    elif any(v.selectable for v in output.verdicts):
        problems.append("selected is null although a candidate passes without being boilerplate")
    elif not output.new_candidates:
        problems.append("when no candidate is selected, propose new_candidates")
    return problems


def guard_check(ids: frozenset[int]) -> Check:
    """The gateway's check of a guard answer against the candidate ids it was sent: an answer
    that names other ids, or leaves one out, gets a repair turn and is never cached as good."""

    def check(output: BaseModel) -> list[str]:
        assert isinstance(output, GuardOutput)
        return guard_problems(output, ids)

    return check


# ---------------------------------------------------------------------------------------------
# Reading (sync, called through sync_to_async).


@dataclass(frozen=True)
class ImageInput:
    image_id: int
    source_id: str
    entity: str
    domain: str
    picture: ImagePart


@dataclass(frozen=True)
class Setup:
    """What a handler needs before its call; `done` is set when the item was applied already."""

    done: dict[str, Any] | None = None
    model: LLMModel | None = None
    prompt: Prompt | None = None
    image: ImageInput | None = None
    candidates: tuple[tuple[int, str], ...] = ()


def _marker(action: str, job_id: int, key: str, image_id: int) -> AuditEvent | None:
    return AuditEvent.objects.filter(
        action=action, image_id=image_id, data__job=job_id, data__item=key
    ).first()


def _job_model_and_prompt(job_id: int, prompt_name: str) -> tuple[LLMModel, Prompt]:
    # Both were fixed at launch (params), so every item of a job, redelivered or not, uses
    # the same model and template version even if the settings change meanwhile.
    params = Job.objects.values_list("params", flat=True).get(pk=job_id)
    model = LLMModel.objects.filter(name=params.get("model", "")).first()
    if model is None:
        raise ItemFailed(f"the job's model {params.get('model')!r} no longer exists")
    return model, load_prompt(prompt_name, params.get("prompt_version"))


def _image_input(image: Image) -> ImageInput:
    with image.file.open("rb") as handle:
        data = handle.read()
    mime = mimetypes.guess_type(image.file.name)[0] or "image/jpeg"
    return ImageInput(
        image.pk, image.source_id, image.entity, image.domain, ImagePart(data=data, mime_type=mime)
    )


def _load_image(image_id: int) -> Image:
    image = Image.objects.filter(pk=image_id).first()
    if image is None:
        raise ItemFailed(f"there is no image {image_id}")
    return image


def _generation_setup(image_id: int, job_id: int, key: str) -> Setup:
    marker = _marker("llm.generate", job_id, key, image_id)
    if marker is not None:
        return Setup(done=marker.data["result"])
    image = _load_image(image_id)
    model, prompt = _job_model_and_prompt(job_id, "generate_candidates")
    return Setup(model=model, prompt=prompt, image=_image_input(image))


def _guard_setup(image_id: int, job_id: int, key: str) -> Setup:
    marker = _marker("llm.guard", job_id, key, image_id)
    if marker is not None:
        return Setup(done=marker.data["result"])
    image = _load_image(image_id)
    if FinalQuestion.objects.filter(image=image).exists():
        return Setup(done={"image": image.source_id, "skipped": "the image has its question"})
    accepted = tuple(
        Candidate.objects.filter(image=image, status=CandidateStatus.ACCEPTED)
        .order_by("pk")
        .values_list("pk", "text")
    )
    if not accepted:
        return Setup(done={"image": image.source_id, "skipped": "no accepted candidates"})
    model, prompt = _job_model_and_prompt(job_id, "guard")
    return Setup(model=model, prompt=prompt, image=_image_input(image), candidates=accepted)


# ---------------------------------------------------------------------------------------------
# Applying (sync, one transaction, image row locked so concurrent items of one image queue).


def _next_round(image_id: int) -> int:
    top = Candidate.objects.filter(image_id=image_id).aggregate(top=Max("round"))["top"]
    return (top or 0) + 1


def _create_candidates(
    image_id: int, texts: list[str], *, origin: str, job_id: int, key: str, now: datetime
) -> tuple[int, list[int]]:
    round_ = _next_round(image_id)
    ids = []
    for text in texts:
        candidate = Candidate.objects.create(
            image_id=image_id, text=text, round=round_, origin=origin, created_at=now
        )
        AuditEvent.objects.create(
            action="candidate.create",
            candidate=candidate,
            image_id=image_id,
            at=now,
            data={"origin": origin, "round": round_, "job": job_id, "item": key},
        )
        ids.append(candidate.pk)
    return round_, ids


def _lock_image(image_id: int) -> Image:
    # select_for_update serializes items of one image on PostgreSQL; SQLite's IMMEDIATE
    # transaction holds the write lock already.
    return Image.objects.select_for_update().get(pk=image_id)


@transaction.atomic
def apply_generation(
    *, job_id: int, key: str, image_id: int, questions: list[str], now: datetime | None = None
) -> dict[str, Any]:
    now = now or timezone.now()
    image = _lock_image(image_id)
    marker = _marker("llm.generate", job_id, key, image_id)
    if marker is not None:  # applied by an earlier delivery of this item
        return marker.data["result"]
    if FinalQuestion.objects.filter(image=image).exists():
        result: dict[str, Any] = {
            "image": image.source_id,
            "skipped": "the image got its question meanwhile",
        }
    else:
        round_, ids = _create_candidates(
            image_id, questions, origin=CandidateOrigin.LLM, job_id=job_id, key=key, now=now
        )
        result = {"image": image.source_id, "round": round_, "candidates": ids}
    AuditEvent.objects.create(
        action="llm.generate",
        image=image,
        at=now,
        data={"job": job_id, "item": key, "result": result},
    )
    return result


@transaction.atomic
def apply_guard(
    *, job_id: int, key: str, image_id: int, output: GuardOutput, now: datetime | None = None
) -> dict[str, Any]:
    now = now or timezone.now()
    image = _lock_image(image_id)
    marker = _marker("llm.guard", job_id, key, image_id)
    if marker is not None:
        return marker.data["result"]
    result: dict[str, Any] = {
        "image": image.source_id,
        "selected": None,
        "proposed": [],
        "rejected": [
            v.id
            for v in output.verdicts
            if not (v.passes_hard_requirements and v.stranger_test_pass)
        ],
        "boilerplate": [v.id for v in output.verdicts if v.boilerplate],
    }
    if FinalQuestion.objects.filter(image=image).exists():
        result["skipped"] = "the image got its question meanwhile"
    else:
        for verdict in output.verdicts:
            AuditEvent.objects.create(
                action="guard.verdict",
                candidate_id=verdict.id,
                image=image,
                at=now,
                data={
                    "job": job_id,
                    "item": key,
                    **verdict.model_dump(exclude={"id"}),
                    "selected": verdict.id == output.selected,
                },
            )
        if output.selected is not None:
            # Raises Conflict if the candidate is no longer accepted: the item fails with that.
            final_question_promote(
                user=None, candidate_id=output.selected, method=FinalQuestion.Method.GUARD, now=now
            )
            result["selected"] = output.selected
        else:
            # Nothing selectable (all rejected or boilerplate): without new candidates the image
            # would wait for a question forever, so the guard's proposals enter review.
            result["round"], result["proposed"] = _create_candidates(
                image_id,
                output.new_candidates,
                origin=CandidateOrigin.GUARD,
                job_id=job_id,
                key=key,
                now=now,
            )
    AuditEvent.objects.create(
        action="llm.guard", image=image, at=now, data={"job": job_id, "item": key, "result": result}
    )
    return result


# ---------------------------------------------------------------------------------------------
# Handlers.


def _failed(call: CallResult) -> ItemFailed:
    return ItemFailed(f"{call.outcome}: {call.error}", call)


async def generate(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    """A.1: several candidate questions for one image, which enter review in its next round."""
    context = current_item.get()
    setup = await sync_to_async(_generation_setup)(payload["image_id"], context.job_id, context.key)
    if setup.done is not None:
        return setup.done
    assert setup.model and setup.prompt and setup.image  # set whenever `done` is not
    image = setup.image
    text = setup.prompt.render(
        entity=image.entity, domain=image.domain, min_count=MIN_QUESTIONS, max_count=MAX_QUESTIONS
    )
    call = await gateway.call_structured(
        setup.model,
        prompt=[text, image.picture],
        schema=GeneratedQuestions,
        stage=GENERATE,
        template_name=setup.prompt.name,
        template_version=str(setup.prompt.version),
        fresh=context.fresh,
        job_id=context.job_id,
    )
    if not call.ok or not isinstance(call.output, GeneratedQuestions):
        raise _failed(call)
    result = await sync_to_async(apply_generation)(
        job_id=context.job_id,
        key=context.key,
        image_id=image.image_id,
        questions=call.output.questions,
    )
    return ItemResult.of_calls(result, call)


def _candidate_listing(candidates: tuple[tuple[int, str], ...]) -> str:
    """The candidates as guard v1 and v2 list them (jobs launched with those keep them)."""
    return "\n".join(f"- id {pk}: {text}" for pk, text in candidates)


def candidate_items(candidates: tuple[tuple[int, str], ...]) -> list[tuple[str, str]]:
    """The candidates for a fenced listing (guard v3 on): each text in its own fence after its
    id, so that no candidate's words can pass for another id."""
    return [(f"id {pk}", text) for pk, text in candidates]


OVERREPRESENTED_TOP = 5  # the largest templates the guard is told of
OVERREPRESENTED_MIN_SIZE = 2  # a template of one question is no cluster


def overrepresented_templates() -> list[dict[str, Any]]:
    """The largest templates of the final questions now (the diversity report's), as the guard
    is given them: fixed at launch in the job's params, so every item of a job, redelivered or
    not, is sent the same list."""
    from ..analysis.diversity_report import diversity_report

    report = diversity_report("final", top=OVERREPRESENTED_TOP)
    total = report["overall"]["questions"]
    return [
        {"skeleton": t["skeleton"], "size": t["size"], "share": t["share"], "of": total}
        for t in report["templates"][:OVERREPRESENTED_TOP]
        if t["size"] >= OVERREPRESENTED_MIN_SIZE
    ]


def overrepresented_listing(templates: list[dict[str, Any]]) -> str:
    """The templates as guard v2 lists them (jobs launched with it keep it)."""
    if not templates:
        return "(none yet: no template holds more than one final question)"
    return "\n".join(
        f"- “{t['skeleton']}”: {t['size']} of {t['of']} final questions ({t['share']:.0%})"
        for t in templates
    )


def overrepresented_items(templates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The templates for a fenced listing (guard v3 on): the figures are ours, the skeleton is
    made of the final questions' words, so it goes in a fence."""
    return [
        (f"{t['size']} of {t['of']} final questions ({t['share']:.0%})", t["skeleton"])
        for t in templates
    ]


async def guard(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    """A.2: judge an image's accepted candidates, promote the selected one, or seed new ones."""
    context = current_item.get()
    setup = await sync_to_async(_guard_setup)(payload["image_id"], context.job_id, context.key)
    if setup.done is not None:
        return setup.done
    assert setup.model and setup.prompt and setup.image
    image = setup.image
    fenced = set(setup.prompt.fenced)  # v3 on: the listings as (key, text) pairs
    values: dict[str, Any] = {
        "entity": image.entity,
        "domain": image.domain,
        "candidates": (
            candidate_items(setup.candidates)
            if "candidates" in fenced
            else _candidate_listing(setup.candidates)
        ),
    }
    if "overrepresented" in setup.prompt.placeholders:  # v2 on: the templates to avoid
        templates = context.params.get("overrepresented") or []
        values["overrepresented"] = (
            overrepresented_items(templates)
            if "overrepresented" in fenced
            else overrepresented_listing(templates)
        )
    text = setup.prompt.render(**values)
    call = await gateway.call_structured(
        setup.model,
        prompt=[text, image.picture],
        schema=GuardOutput,
        ids={"candidates": [pk for pk, _ in setup.candidates]},
        check=guard_check(frozenset(pk for pk, _ in setup.candidates)),
        stage=GUARD,
        template_name=setup.prompt.name,
        template_version=str(setup.prompt.version),
        fresh=context.fresh,
        job_id=context.job_id,
    )
    if not call.ok or not isinstance(call.output, GuardOutput):
        raise _failed(call)
    result = await sync_to_async(apply_guard)(
        job_id=context.job_id, key=context.key, image_id=image.image_id, output=call.output
    )
    return ItemResult.of_calls(result, call)


register_kind(
    GENERATE, generate, chunk_size=20, concurrency=8, title="Generate candidates", item_noun="image"
)
register_kind(
    GUARD, guard, chunk_size=20, concurrency=8, title="Guard the candidates", item_noun="image"
)


# ---------------------------------------------------------------------------------------------
# Launching (admins; the job console calls these).


def configured_model(setting: str) -> LLMModel:
    """The model a stage's setting names (in development, without one: the stage's demo
    model, see llm/demo.py); refuses clearly when there is none to use."""
    name = stage_model_name(setting)
    if not name:
        raise JobError(
            f"No model is configured for this stage: set {setting} to the name of "
            "an LLM model (admin: LLM models)."
        )
    model = LLMModel.objects.filter(name=name).first()
    if model is None:
        raise JobError(
            f"{setting} names the model {name!r}, which does not exist: add it in "
            "the admin (LLM models) or change the setting."
        )
    if not model.active:
        raise JobError(f"The model {name!r} ({setting}) is switched off.")
    return model


def _launch(
    *,
    kind: str,
    setting: str,
    prompt_name: str,
    images: Any,
    user: Any,
    fresh: bool = False,
    params: dict[str, Any] | None = None,
) -> Job:
    model = configured_model(setting)
    prompt = load_prompt(prompt_name)
    items = [
        (source_id, {"image_id": pk})
        for pk, source_id in images.order_by("pk").values_list("pk", "source_id")
    ]
    if not items:
        raise JobError("No image in this scope is eligible for this job.")
    return job_launch(
        kind=kind,
        items=items,
        user=user,
        params={
            "model": model.name,
            "prompt_version": prompt.version,
            "fresh": fresh,
            **(params or {}),
        },
    )


def generation_launch(*, user: Any, image_ids: list[int] | None = None, fresh: bool = False) -> Job:
    """Generate candidates for the chosen images (those without a question), or for every
    image that needs candidates."""
    return _launch(
        kind=GENERATE,
        setting="LLM_MODEL_GENERATION",
        prompt_name="generate_candidates",
        images=_generation_images(image_ids),
        user=user,
        fresh=fresh,
    )


def guard_launch(*, user: Any, image_ids: list[int] | None = None, fresh: bool = False) -> Job:
    """Run the guard over the chosen images, or every image with accepted candidates and no
    question (images without accepted candidates have nothing to guard and are left out). The
    guard's prompt (v2 on) is given the currently over-represented templates to avoid."""
    extra = (
        {"overrepresented": overrepresented_templates()}
        if "overrepresented" in load_prompt("guard").placeholders
        else {}
    )
    return _launch(
        kind=GUARD,
        setting="LLM_MODEL_GUARD",
        prompt_name="guard",
        images=_guard_images(image_ids),
        user=user,
        fresh=fresh,
        params=extra,
    )


def _generation_images(image_ids: list[int] | None) -> Any:
    # An unconfirmed entity waits for a person first: questions grounded on a proposal that is
    # then corrected would all be about the wrong thing.
    images = (
        Image.objects.filter(pk__in=image_ids, question__isnull=True)
        if image_ids is not None
        else Image.objects.needing_candidates()
    )
    return images.filter(entity_confirmed=True)


def _guard_images(image_ids: list[int] | None) -> Any:
    accepted = Candidate.objects.filter(image=OuterRef("pk"), status=CandidateStatus.ACCEPTED)
    images = Image.objects.filter(Exists(accepted), question__isnull=True)
    return images.filter(pk__in=image_ids) if image_ids is not None else images


def auto_generation_launch(*, image_id: int) -> Job | None:
    """Generation for one image that review left without candidates (LLM_AUTO_GENERATE): none
    when the image no longer needs them or a generation job already holds it pending."""
    image = Image.objects.needing_candidates().filter(pk=image_id).first()
    if image is None:
        return None
    pending = JobItem.objects.filter(
        job__kind=GENERATE,
        job__status__in=ACTIVE,
        key=image.source_id,
        status__in=[ItemStatus.PENDING, ItemStatus.RUNNING],
    )
    if pending.exists():
        return None
    return generation_launch(user=None, image_ids=[image_id])


# ---------------------------------------------------------------------------------------------
# The console's launchers (llm/launchers.py): scope by the images' source ids.


def _resolve_images(source_ids: Sequence[str]) -> tuple[dict[str, int], list[str]]:
    found = dict(Image.objects.filter(source_id__in=source_ids).values_list("source_id", "pk"))
    return found, [s for s in source_ids if s not in found]


def image_domains() -> list[str]:
    """The images' domains: what the console's filter offers (the rubric stages use it too)."""
    return list(Image.objects.order_by("domain").values_list("domain", flat=True).distinct())


# Generation's filter states: whether an image has candidates, and where they stand.
GENERATION_STATES = (
    ("no_candidates", "no candidate yet"),
    ("all_discarded", "every candidate discarded"),
    ("in_review", "candidates in review"),
)


def select_images(*, domain: str | None = None, state: str | None = None) -> list[int]:
    """The images of `domain` (any if None) in generation's `state` (any if None)."""
    images = Image.objects.all()
    if domain is not None:
        images = images.filter(domain=domain)
    candidates = Candidate.objects.filter(image=OuterRef("pk"))
    if state == "no_candidates":
        images = images.filter(~Exists(candidates))
    elif state == "all_discarded":
        images = images.needing_candidates().filter(Exists(candidates))
    elif state == "in_review":
        images = images.filter(
            Exists(candidates.filter(status__in=[CandidateStatus.OPEN, CandidateStatus.DISPUTED]))
        )
    return list(images.order_by("pk").values_list("pk", flat=True))


register_launcher(
    "generate",
    label="Generate candidates (A.1)",
    kind=GENERATE,
    order=10,
    scope_noun="images",
    launch=lambda *, user, ids=None, fresh=False: generation_launch(
        user=user, image_ids=ids, fresh=fresh
    ),
    eligible=lambda ids=None: _generation_images(ids).count(),
    resolve=_resolve_images,
    model=lambda: configured_model("LLM_MODEL_GENERATION"),
    calls_per_item=1,
    select=select_images,
    domains=image_domains,
    states=GENERATION_STATES,
)
register_launcher(
    "guard",
    label="Guard (A.2)",
    kind=GUARD,
    order=20,
    scope_noun="images",
    launch=lambda *, user, ids=None, fresh=False: guard_launch(
        user=user, image_ids=ids, fresh=fresh
    ),
    eligible=lambda ids=None: _guard_images(ids).count(),
    resolve=_resolve_images,
    model=lambda: configured_model("LLM_MODEL_GUARD"),
    calls_per_item=1,
    select=select_images,
    domains=image_domains,
)
