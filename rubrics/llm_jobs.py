"""The LLM jobs of stage 2: building a rubric (A.3) and refining it (A.4).

`rubrics.build` (payload: question_id): a grounded search gathers evidence, whose snippets
come from the grounding metadata (the supported text, joined to its source's address and
title), ids s1..sN; a second, structured call lays out the items citing those ids. The code,
not the model, sets the snippets, question and entity of the document, so the model cannot
invent a source. The compiler validates it, and it is stored as the `llm_draft` version.

`rubrics.refine` (payload: question_id, round 1 or 2): an audit re-verifies every snippet
against its source with the URL context tool; an independent search re-researches the
question from scratch; a structured rebuild returns a verified superset of the input (round 1:
the draft; round 2: `human_1`, with the reviser's edits). The code refuses a rebuild that
lost an input item without a recorded reason, and stores `llm_refined_<round>`.

Both are idempotent: a version the rubric already has is never made again (redelivered or
retried items finish without calls). The model is the setting LLM_MODEL_RUBRICS, an
`LLMModel.name`, recorded in the job's params at launch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import Exists, OuterRef, Subquery
from pydantic import BaseModel, ConfigDict, Field

from annotation.llm_jobs import image_domains
from annotation.models import FinalQuestion
from llm.demo import stage_model_name
from llm.gateway import CallResult, Gateway, GroundedResult
from llm.jobs import ItemFailed, ItemResult, JobError, current_item, job_launch, register_kind
from llm.launchers import register_launcher
from llm.models import Job, LLMModel, Provider
from llm.prompts import load_prompt

from . import compiler
from .models import STAGE_ORDER, Rubric, RubricVersion, Stage
from .services import final_version, meta_ids, rubric_version_create

BUILD = "rubrics.build"
REFINE = "rubrics.refine"
REFINED_STAGE = {1: Stage.LLM_REFINED_1, 2: Stage.LLM_REFINED_2}
# What each refinement round works on.
REFINE_INPUT = {1: Stage.LLM_DRAFT, 2: Stage.HUMAN_1}

# ---------------------------------------------------------------------------------------------
# The response schemas (wrappers around the compiler's item schema).


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LayoutReply(_Reply):
    """The layout call's answer: items only; the code adds the snippets it gathered."""

    items: list[compiler.Item] = Field(min_length=1)


class Dropped(_Reply):
    id: str = Field(min_length=1, description="The id of an input item or meta-insight.")
    reason: str = Field(min_length=1, description="Why it cannot be kept.")


class RebuildReply(_Reply):
    """The rebuild's answer: the items of the superset, and what was dropped and why."""

    items: list[compiler.Item] = Field(min_length=1)
    dropped: list[Dropped] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Snippets from grounding metadata, and the audit's verdicts.


def snippets_from_grounding(found: GroundedResult, *, first: int = 1) -> list[dict[str, str]]:
    """One snippet per (supported text, source) pair, in order, ids s<first>...; a support
    citing two sources gives two snippets, as a snippet has one address."""
    snippets: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for text, indices in found.supports:
        text = text.strip()
        for index in indices:
            if not text or not 0 <= index < len(found.chunks):
                continue
            uri, title = found.chunks[index]
            if not uri or (text, uri) in seen:
                continue
            seen.add((text, uri))
            snippets.append(
                {"id": f"s{first + len(snippets)}", "url": uri, "title": title, "text": text}
            )
    return snippets


VERIFIED, UNSUPPORTED, UNREACHABLE = "verified", "unsupported", "unreachable"
# One verdict a line ("s3: unsupported - reason", also with list marks or bold); [^\w\n]
# rather than \W, so that a match never runs into the next line.
_VERDICT = re.compile(
    r"^[^\w\n]*(?P<id>[A-Za-z0-9_-]+)[^\w\n]*[:\-][^\w\n]*"
    r"(?P<verdict>verified|unsupported|unreachable)\b[^\w\n]*(?P<reason>.*)$",
    re.IGNORECASE | re.MULTILINE,
)


def audit_verdicts(snippets: list[dict[str, str]], audit: GroundedResult) -> dict[str, dict]:
    """Each snippet's status: unreachable when the URL context tool could not retrieve its
    address (the tool's metadata outranks the model's words); otherwise the model's verdict;
    a snippet the model did not judge counts as unsupported (nothing confirmed it)."""
    said = {
        m["id"]: (m["verdict"].lower(), m["reason"].strip()) for m in _VERDICT.finditer(audit.text)
    }
    failed = {url for url, status in audit.url_statuses if not status.endswith("SUCCESS")}
    verdicts: dict[str, dict] = {}
    for snippet in snippets:
        if snippet["url"] in failed:
            verdicts[snippet["id"]] = {
                "status": UNREACHABLE,
                "reason": "the URL context tool could not retrieve it",
            }
        elif snippet["id"] in said:
            status, reason = said[snippet["id"]]
            verdicts[snippet["id"]] = {"status": status, "reason": reason}
        else:
            verdicts[snippet["id"]] = {
                "status": UNSUPPORTED,
                "reason": "not confirmed by the audit",
            }
    return verdicts


def _partial_coverage(audit_text: str) -> str:
    _, _, after = audit_text.partition("Partial coverage:")
    return after.strip()


# ---------------------------------------------------------------------------------------------
# Reading and writing the database (sync, called through sync_to_async).


@dataclass(frozen=True)
class _Subject:
    question_id: int
    question: str
    entity: str
    done_version: int | None  # the version this step makes, when it exists already
    input_meta: dict[str, Any] | None = None
    human_checks: list[dict[str, Any]] | None = None
    human_deleted: list[dict[str, Any]] | None = None


def _existing(question_id: int, stage: str) -> int | None:
    return (
        RubricVersion.objects.filter(rubric__question_id=question_id, stage=stage)
        .values_list("pk", flat=True)
        .first()
    )


def _load(question_id: int, stage: str, input_stage: str | None = None) -> _Subject:
    question = FinalQuestion.objects.select_related("image").get(pk=question_id)
    subject = _Subject(
        question_id, question.text, question.image.entity, _existing(question_id, stage)
    )
    if input_stage is None or subject.done_version is not None:
        return subject
    source = RubricVersion.objects.filter(
        rubric__question_id=question_id, stage=input_stage, frozen_at__isnull=False
    ).first()
    if source is None:
        raise ItemFailed(f"the rubric has no frozen {input_stage} version to refine")
    checks = deleted = None
    if source.is_human:
        rows = list(source.checks.order_by("position"))
        checks = [
            {"id": r.check_id, "tier": r.tier, "origin": r.origin, "text": r.text}
            for r in rows
            if r.deleted_at is None
        ]
        deleted = [
            {"id": r.check_id, "tier": r.tier, "text": r.text, "reason": r.delete_reason}
            for r in rows
            if r.deleted_at is not None
        ]
    return _Subject(
        question_id, question.text, question.image.entity, None, source.meta_rubric, checks, deleted
    )


def _store(question_id: int, document: dict[str, Any], stage: str, model: str) -> int:
    """Idempotent: a redelivered item whose version was stored meanwhile returns it."""
    existing = _existing(question_id, stage)
    if existing is not None:
        return existing
    question = FinalQuestion.objects.get(pk=question_id)
    return rubric_version_create(
        question=question, meta_document=document, stage=stage, made_by_model=model
    ).pk


def _model(name: str) -> LLMModel:
    return LLMModel.objects.get(name=name)


# ---------------------------------------------------------------------------------------------
# The handlers.


def _json(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False)


def _snippet_lines(snippets: list[dict[str, str]]) -> str:
    return "\n".join(f"[{s['id']}] {s['title']} <{s['url']}>: {s['text']}" for s in snippets)


async def _grounded(
    gateway: Gateway,
    model: LLMModel,
    template: str,
    tools: tuple[str, ...],
    calls: list[CallResult],
    **values: Any,
) -> GroundedResult:
    prompt = load_prompt(template)
    context = current_item.get()
    found = await gateway.call_grounded(
        model,
        prompt=[prompt.render(**values)],
        tools=tools,
        stage=template,
        template_name=prompt.name,
        template_version=str(prompt.version),
        fresh=bool(context.params.get("fresh")),
        job_id=context.job_id,
    )
    calls.append(found.call)
    if not found.ok:
        raise ItemFailed(
            f"{template} call failed ({found.call.outcome}): {found.call.error}", *calls
        )
    return found


async def _structured(
    gateway: Gateway,
    model: LLMModel,
    template: str,
    schema: type[BaseModel],
    calls: list[CallResult],
    **values: Any,
) -> BaseModel:
    prompt = load_prompt(template)
    context = current_item.get()
    result = await gateway.call_structured(
        model,
        prompt=[prompt.render(**values)],
        schema=schema,
        stage=template,
        template_name=prompt.name,
        template_version=str(prompt.version),
        fresh=bool(context.params.get("fresh")),
        job_id=context.job_id,
    )
    calls.append(result)
    if not result.ok or result.output is None:
        # The gateway already spent its one repair on an output that did not fit the schema.
        raise ItemFailed(f"{template} call failed ({result.outcome}): {result.error}", *calls)
    return result.output


def _document(subject: _Subject, snippets: list[dict[str, str]], items: list[Any]) -> dict:
    return {
        "schema_version": compiler.SCHEMA_VERSION,
        "question": subject.question,
        "entity": subject.entity,
        "snippets": snippets,
        "items": [item.model_dump(mode="json", exclude_defaults=False) for item in items],
    }


async def _save(
    subject: _Subject, document: dict, stage: str, model: LLMModel, calls: list[CallResult]
) -> int:
    try:
        return await sync_to_async(_store)(subject.question_id, document, stage, model.name)
    except compiler.MetaRubricInvalid as invalid:
        # Shape errors were repaired by the gateway; these are the compiler's own rules
        # (unknown snippet ids, duplicate ids, thresholds): the item fails with each of them.
        raise ItemFailed(
            f"the meta-rubric does not compile:\n{invalid}", *calls, raw_output=_json(document)
        ) from invalid


async def build(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    question_id = int(payload["question_id"])
    subject = await sync_to_async(_load)(question_id, Stage.LLM_DRAFT)
    if subject.done_version is not None:
        return {"version_id": subject.done_version, "skipped": "the rubric has a draft already"}
    model = await sync_to_async(_model)(current_item.get().params["model"])
    calls: list[CallResult] = []
    found = await _grounded(
        gateway,
        model,
        "rubric_evidence",
        ("google_search",),
        calls,
        question=subject.question,
        entity=subject.entity,
    )
    snippets = snippets_from_grounding(found)
    if not snippets:
        raise ItemFailed("the search found no grounded evidence (no grounding supports)", *calls)
    layout = await _structured(
        gateway,
        model,
        "rubric_layout",
        LayoutReply,
        calls,
        question=subject.question,
        entity=subject.entity,
        snippets=_snippet_lines(snippets),
    )
    assert isinstance(layout, LayoutReply)
    document = _document(subject, snippets, layout.items)
    version_id = await _save(subject, document, Stage.LLM_DRAFT, model, calls)
    return ItemResult.of_calls(
        {"version_id": version_id, "snippets": len(snippets), "items": len(layout.items)}, *calls
    )


def _human_edits(subject: _Subject) -> str:
    if subject.human_checks is None:
        return ""
    return load_prompt("rubric_human_edits").render(
        checks="\n".join(
            f"- {c['id']} [{c['tier']}, {c['origin']}] {c['text']}" for c in subject.human_checks
        )
        or "(none)",
        deleted="\n".join(
            f"- {c['id']} [{c['tier']}] {c['text']} -- reason: {c['reason']}"
            for c in subject.human_deleted or []
        )
        or "(none)",
    )


def _unaccounted(input_meta: dict[str, Any], reply: RebuildReply) -> list[str]:
    """Input item and meta-insight ids neither kept nor dropped with a reason."""
    kept = meta_ids({"items": [item.model_dump(mode="json") for item in reply.items]})
    dropped = {d.id for d in reply.dropped if d.reason.strip()}
    return sorted(meta_ids(input_meta) - kept - dropped)


async def refine(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    question_id, round_ = int(payload["question_id"]), int(payload["round"])
    if round_ not in REFINED_STAGE:
        raise ItemFailed(f"round must be 1 or 2, not {round_}")
    stage = REFINED_STAGE[round_]
    subject = await sync_to_async(_load)(question_id, stage, REFINE_INPUT[round_])
    if subject.done_version is not None:
        return {"version_id": subject.done_version, "skipped": f"the rubric has {stage} already"}
    assert subject.input_meta is not None
    model = await sync_to_async(_model)(current_item.get().params["model"])
    calls: list[CallResult] = []
    old_snippets: list[dict[str, str]] = list(subject.input_meta.get("snippets", []))
    audit = await _grounded(
        gateway,
        model,
        "rubric_audit",
        ("url_context",),
        calls,
        question=subject.question,
        entity=subject.entity,
        snippets=_snippet_lines(old_snippets),
        meta_rubric=_json(subject.input_meta.get("items", [])),
    )
    verdicts = audit_verdicts(old_snippets, audit)
    # The round is in the prompt, so that round 2 searches anew instead of being answered
    # from round 1's cached search (a retried item still gets its own round's cache).
    research = await _grounded(
        gateway,
        model,
        "rubric_research",
        ("google_search",),
        calls,
        question=subject.question,
        entity=subject.entity,
        round=round_,
    )
    # New ids continue after the input's, so an old citation never changes meaning.
    numbers = [int(s["id"][1:]) for s in old_snippets if re.fullmatch(r"s\d+", s["id"])]
    new_snippets = snippets_from_grounding(research, first=max(numbers, default=0) + 1)
    # Only verified evidence goes on: citing an unsupported snippet is then an unknown id.
    usable = [s for s in old_snippets if verdicts[s["id"]]["status"] == VERIFIED] + new_snippets
    audit_lines = "\n".join(f"{sid}: {v['status']} - {v['reason']}" for sid, v in verdicts.items())
    partial = _partial_coverage(audit.text)
    rebuilt = await _structured(
        gateway,
        model,
        "rubric_rebuild",
        RebuildReply,
        calls,
        question=subject.question,
        entity=subject.entity,
        meta_rubric=_json(subject.input_meta.get("items", [])),
        audit=audit_lines + (f"\nPartial coverage:\n{partial}" if partial else ""),
        snippets=_snippet_lines(usable),
        human_edits=_human_edits(subject),
    )
    assert isinstance(rebuilt, RebuildReply)
    lost = _unaccounted(subject.input_meta, rebuilt)
    if lost:
        raise ItemFailed(
            "the rebuild dropped input items without a recorded reason: " + ", ".join(lost), *calls
        )
    document = _document(subject, usable, rebuilt.items)
    version_id = await _save(subject, document, stage, model, calls)
    return ItemResult.of_calls(
        {
            "version_id": version_id,
            "audit": verdicts,
            "partial_coverage": partial,
            "new_snippets": len(new_snippets),
            "dropped": [d.model_dump() for d in rebuilt.dropped],
        },
        *calls,
    )


register_kind(BUILD, build, chunk_size=5, concurrency=4)
register_kind(REFINE, refine, chunk_size=5, concurrency=4)


# ---------------------------------------------------------------------------------------------
# Launching.


def rubric_model() -> LLMModel:
    """The model of the rubric jobs, refused clearly when the setting does not name an active
    Gemini model (the grounded calls need Gemini's tools); in development, without one, the
    demo model (llm/demo.py)."""
    name = stage_model_name("LLM_MODEL_RUBRICS")
    if not name:
        raise JobError(
            "No model is configured for rubrics: set LLM_MODEL_RUBRICS to the name of an LLM model."
        )
    model = LLMModel.objects.filter(name=name).first()
    if model is None:
        raise JobError(f"LLM_MODEL_RUBRICS names {name!r}, but no LLM model has that name.")
    if not model.active:
        raise JobError(f"The rubric model {name!r} is switched off.")
    if model.provider not in (Provider.GEMINI, Provider.DEMO):
        raise JobError(f"The rubric model {name!r} must be a Gemini model (search grounding).")
    return model


def _live_questions(question_ids: list[int] | None):
    questions = FinalQuestion.objects.filter(dropped_at__isnull=True).order_by("pk")
    return questions.filter(pk__in=question_ids) if question_ids is not None else questions


def eligible_for_build(question_ids: list[int] | None = None) -> list[int]:
    with_versions = Rubric.objects.filter(versions__isnull=False).values("question_id")
    return list(
        _live_questions(question_ids).exclude(pk__in=with_versions).values_list("pk", flat=True)
    )


def eligible_for_refine(round_: int, question_ids: list[int] | None = None) -> list[int]:
    eligible = []
    for rubric in Rubric.objects.filter(question__in=_live_questions(question_ids)):
        if round_ == 1:
            latest = rubric.versions.order_by("-id").first()
            ok = latest is not None and latest.stage == Stage.LLM_DRAFT
        else:
            latest = final_version(rubric)
            ok = (
                latest is not None
                and latest.stage == Stage.HUMAN_1
                and not rubric.versions.filter(frozen_at__isnull=True).exists()
            )
        if ok:
            eligible.append(rubric.question_id)
    return sorted(eligible)


def _launch(
    kind: str, ids: list[int], user: Any, params: dict[str, Any], payload: dict[str, Any]
) -> Job:
    if not ids:
        raise JobError("No eligible question for this job.")
    return job_launch(
        kind=kind,
        items=[(f"q{qid}", {"question_id": qid, **payload}) for qid in ids],
        params=params,
        user=user,
    )


def rubric_build_launch(
    *, user: Any, question_ids: list[int] | None = None, fresh: bool = False
) -> Job:
    """Build rubrics for the live final questions that have none (or those of `question_ids`
    that qualify)."""
    model = rubric_model()
    return _launch(
        BUILD, eligible_for_build(question_ids), user, {"model": model.name, "fresh": fresh}, {}
    )


def rubric_refine_launch(
    *,
    user: Any,
    round: int,  # noqa: A002 (the method's word)
    question_ids: list[int] | None = None,
    fresh: bool = False,
) -> Job:
    """Refinement round 1 (rubrics whose latest version is the draft) or 2 (rubrics whose
    latest frozen version is human_1)."""
    if round not in REFINED_STAGE:
        raise JobError(f"round must be 1 or 2, not {round!r}")
    model = rubric_model()
    return _launch(
        REFINE,
        eligible_for_refine(round, question_ids),
        user,
        {"model": model.name, "round": round, "fresh": fresh},
        {"round": round},
    )


# ---------------------------------------------------------------------------------------------
# The console's launchers (llm/launchers.py): scope by the source ids of the questions' images.


def _resolve_questions(source_ids: Sequence[str]) -> tuple[dict[str, int], list[str]]:
    found = dict(
        _live_questions(None)
        .filter(image__source_id__in=source_ids)
        .values_list("image__source_id", "pk")
    )
    return found, [s for s in source_ids if s not in found]


# The rubric stages' filter states: the stage of the rubric's latest version, or none yet.
RUBRIC_STATES = (
    ("none", "no rubric yet"),
    *((stage.value, f"latest version: {stage.label}") for stage in STAGE_ORDER),
)


def select_questions(*, domain: str | None = None, state: str | None = None) -> list[int]:
    """The live final questions of images in `domain`, whose rubric's latest version is of
    stage `state` ("none": no version yet); None means any."""
    questions = _live_questions(None)
    if domain is not None:
        questions = questions.filter(image__domain=domain)
    versions = RubricVersion.objects.filter(rubric__question=OuterRef("pk"))
    if state == "none":
        questions = questions.filter(~Exists(versions))
    elif state is not None:
        latest = versions.order_by("-id").values("stage")[:1]
        questions = questions.annotate(latest_stage=Subquery(latest)).filter(latest_stage=state)
    return list(questions.values_list("pk", flat=True))


register_launcher(
    "build",
    label="Build rubrics (A.3)",
    kind=BUILD,
    order=30,
    scope_noun="questions",
    launch=lambda *, user, ids=None, fresh=False: rubric_build_launch(
        user=user, question_ids=ids, fresh=fresh
    ),
    eligible=lambda ids=None: len(eligible_for_build(ids)),
    resolve=_resolve_questions,
    model=rubric_model,
    calls_per_item=2,
    select=select_questions,
    domains=image_domains,
    states=RUBRIC_STATES,
)
for _round in REFINED_STAGE:
    register_launcher(
        f"refine{_round}",
        label=f"Refine, round {_round} (A.4)",
        kind=REFINE,
        order=40 + _round,
        scope_noun="questions",
        launch=lambda *, user, ids=None, fresh=False, round_=_round: rubric_refine_launch(
            user=user, round=round_, question_ids=ids, fresh=fresh
        ),
        eligible=lambda ids=None, round_=_round: len(eligible_for_refine(round_, ids)),
        resolve=_resolve_questions,
        model=rubric_model,
        calls_per_item=3,
        select=select_questions,
        domains=image_domains,
        states=RUBRIC_STATES,
    )
