"""The LLM jobs of stage 2: building a rubric (A.3) and refining it (A.4).

`rubrics.build` (payload: question_id): a grounded search gathers evidence, whose snippets
come from the grounding metadata (the supported text, joined to its source's address and
title), ids s1..sN; a second, structured call lays out the items citing those ids. The code,
not the model, sets the snippets, question and entity of the document, so the model cannot
invent a source. The compiler validates it, and it is stored as the `llm_draft` version.

`rubrics.refine` (payload: question_id, round 1 or 2): an audit re-verifies every snippet
against its source with the URL context tool (free text), and a second, structured call turns
its notes into one verdict per snippet id (the tool's own retrieval failures outrank it); an
independent search re-researches the question from scratch; a structured rebuild returns a
verified superset of the input (round 1: the draft; round 2: `human_1`). The rebuild returns the
items it changes or adds: an input item it leaves out is kept as it was, so nothing leaves
without being listed under `dropped` with a reason. Round 2 also gets the human round's changes
(rubrics/human_changes.py: each added, edited, re-tiered or deleted check, with an id h1..hN)
and answers each, carried into an item or dropped with a reason; the code checks each carried
one (not reverted, at the reviser's tier), and the outcome of every change is stored on the new
version. A snippet leaves the rubric only with a recorded verdict and reason; a rebuild that
loses an input item or meta-insight or a human change, or breaks the compiler's rules, is sent
back with its problems (the gateway's repair turns) and fails the item if it stays wrong. The
result is stored as `llm_refined_<round>`. Every id an answer names is also constrained in its
response schema (llm/schemas.py): snippet ids, input ids, candidate ids, change ids.

Every structured answer here is checked against the compiler and these rules inside the
gateway's call, so an answer that breaks them gets repair turns and is never cached as good.

Both are idempotent: a version the rubric already has is never made again (redelivered or
retried items finish without calls). The model is the setting LLM_MODEL_RUBRICS, an
`LLMModel.name`, recorded in the job's params at launch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.db.models import Exists, OuterRef, Subquery
from pydantic import BaseModel, ConfigDict, Field

from annotation.models import FinalQuestion
from annotation.questions.llm_jobs import image_domains
from llm.demo import stage_model_name
from llm.gateway import CallResult, Check, Gateway, GroundedCheck, GroundedResult
from llm.jobs import ItemFailed, ItemResult, JobError, current_item, job_launch, register_kind
from llm.launchers import register_launcher
from llm.models import Job, LLMModel, Provider
from llm.prompts import load_prompt
from llm.schemas import names, one_each

from . import compiler
from .human_changes import (
    CARRIED,
    DROPPED,
    Answer,
    CheckRow,
    HumanChange,
    change_problems,
    derive_changes,
    describe,
    outcomes,
    prompt_items,
)
from .models import STAGE_ORDER, Origin, Rubric, RubricCheck, RubricVersion, Stage
from .services import meta_id_list, meta_ids, rubric_version_create

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
    id: str = Field(
        min_length=1,
        description="The id of an input item or meta-insight.",
        json_schema_extra=names("inputs"),
    )
    reason: str = Field(min_length=1, description="Why it cannot be kept.")


class HumanChangeAnswer(_Reply):
    id: str = Field(
        min_length=1,
        description="The id of a change of the human round (h1, h2, ...).",
        json_schema_extra=names("changes"),
    )
    outcome: Literal["carried", "dropped"]
    item: str = Field(
        default="",
        description="Carried: the id of the rebuilt item or meta-insight that carries it. "
        "Dropped: empty.",
    )
    reason: str = Field(
        default="", description="Dropped: why it cannot be kept (required). Carried: a note."
    )


class RebuildReply(_Reply):
    """The rebuild's answer: the items it changes or adds (an input item left out is kept as
    it is), what was dropped and why, and what it did with each change of the human round."""

    items: list[compiler.Item] = Field(
        default_factory=list,
        description="The items changed (each whole, with its input id) or added (new ids).",
    )
    dropped: list[Dropped] = Field(default_factory=list)
    human_changes: list[HumanChangeAnswer] = Field(
        default_factory=list, json_schema_extra=one_each("changes")
    )


class SnippetVerdict(_Reply):
    id: str = Field(
        min_length=1, description="A snippet id of the prompt.", json_schema_extra=names("snippets")
    )
    verdict: Literal["verified", "unsupported", "unreachable"]
    reason: str = Field(min_length=1)


class PartialCoverage(_Reply):
    id: str = Field(
        min_length=1,
        description="The id of a list or process item.",
        json_schema_extra=names("items"),
    )
    missing: str = Field(min_length=1)


class AuditReply(_Reply):
    """The audit's notes structured: one verdict per snippet, and the items found partial."""

    verdicts: list[SnippetVerdict] = Field(json_schema_extra=one_each("snippets"))
    partial_coverage: list[PartialCoverage] = Field(default_factory=list)


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


def unreachable_urls(audit: GroundedResult) -> set[str]:
    """The addresses the URL context tool reported it could not retrieve."""
    return {url for url, status in audit.url_statuses if not status.endswith("SUCCESS")}


def audit_problems(snippet_ids: Sequence[str], item_ids: set[str], reply: AuditReply) -> list[str]:
    """What makes a structured audit unusable: a snippet without a verdict, one judged twice,
    an id that is no snippet, a partial-coverage entry for no item."""
    problems, seen = [], set()
    for i, verdict in enumerate(reply.verdicts):
        if verdict.id not in snippet_ids:
            problems.append(
                f"verdicts[{i}].id: {verdict.id!r} is not a snippet id of the "
                f"prompt ({', '.join(snippet_ids)})"
            )
        elif verdict.id in seen:
            problems.append(f"verdicts[{i}].id: {verdict.id!r} has a verdict already")
        seen.add(verdict.id)
    missing = [sid for sid in snippet_ids if sid not in seen]
    if missing:
        problems.append(f"verdicts: no verdict for {', '.join(missing)}; give one per snippet")
    problems += [
        f"partial_coverage[{i}].id: {entry.id!r} is not an item of the meta-rubric"
        for i, entry in enumerate(reply.partial_coverage)
        if entry.id not in item_ids
    ]
    return problems


def audit_verdicts(
    snippets: list[dict[str, str]], reply: AuditReply, unreachable: set[str]
) -> dict[str, dict]:
    """Each snippet's status and reason: unreachable when the URL context tool could not
    retrieve its address (the tool's metadata outranks the model's words); otherwise the
    structured verdict (audit_problems made sure there is exactly one per snippet)."""
    said = {v.id: v for v in reply.verdicts}
    verdicts: dict[str, dict] = {}
    for snippet in snippets:
        if snippet["url"] in unreachable:
            verdicts[snippet["id"]] = {
                "status": UNREACHABLE,
                "reason": "the URL context tool could not retrieve it",
            }
        else:
            verdict = said[snippet["id"]]
            verdicts[snippet["id"]] = {"status": verdict.verdict, "reason": verdict.reason}
    return verdicts


# ---------------------------------------------------------------------------------------------
# Reading and writing the database (sync, called through sync_to_async).


@dataclass(frozen=True)
class _Subject:
    question_id: int
    question: str
    entity: str
    done_version: int | None  # the version this step makes, when it exists already
    input_meta: dict[str, Any] | None = None
    # The changes of the human round refined (round 2), none for round 1.
    human_changes: tuple[HumanChange, ...] = ()


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
    changes: tuple[HumanChange, ...] = ()
    if source.is_human:
        changes = tuple(
            derive_changes(_check_rows(source.parent_id), _check_rows(source.pk, human=True))
        )
    return _Subject(
        question_id, question.text, question.image.entity, None, source.meta_rubric, changes
    )


def _check_rows(version_id: int | None, *, human: bool = False) -> list[CheckRow]:
    """A version's checks in checklist order, as rubrics.human_changes reads them."""
    rows = RubricCheck.objects.filter(version_id=version_id).order_by("position", "pk")
    return [
        CheckRow(
            check_id=r.check_id,
            text=r.text,
            tier=r.tier,
            added=human and r.origin == Origin.ADDED,
            deleted=r.deleted_at is not None,
            reason=r.delete_reason,
            source=r.source,
        )
        for r in rows
    ]


def _store(
    question_id: int,
    document: dict[str, Any],
    stage: str,
    model: str,
    human_changes: list[dict[str, Any]] | None = None,
) -> int:
    """Idempotent: a redelivered item whose version was stored meanwhile returns it."""
    existing = _existing(question_id, stage)
    if existing is not None:
        return existing
    question = FinalQuestion.objects.get(pk=question_id)
    return rubric_version_create(
        question=question,
        meta_document=document,
        stage=stage,
        made_by_model=model,
        human_changes=human_changes,
    ).pk


def _model(name: str) -> LLMModel:
    return LLMModel.objects.get(name=name)


# ---------------------------------------------------------------------------------------------
# The handlers.


def _json(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False)


def snippet_items(snippets: list[dict[str, str]]) -> list[tuple[str, str]]:
    """The snippets for a fenced listing (`{snippets:fence_each}`): the id is ours and stays
    outside; the title, address and text come from the web and go in the snippet's fence."""
    return [(s["id"], f"{s['title']} <{s['url']}>: {s['text']}") for s in snippets]


def _grounded_evidence(found: GroundedResult) -> list[str]:
    if snippets_from_grounding(found):
        return []
    return ["the search found no grounded evidence (no grounding supports)"]


async def _grounded(
    gateway: Gateway,
    model: LLMModel,
    template: str,
    tools: tuple[str, ...],
    calls: list[CallResult],
    check: GroundedCheck | None = None,
    **values: Any,
) -> GroundedResult:
    prompt = load_prompt(template)
    context = current_item.get()
    found = await gateway.call_grounded(
        model,
        prompt=[prompt.render(**values)],
        tools=tools,
        check=check,
        stage=template,
        template_name=prompt.name,
        template_version=str(prompt.version),
        fresh=context.fresh,
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
    ids: dict[str, list[str]],
    check: Check | None = None,
    **values: Any,
) -> BaseModel:
    prompt = load_prompt(template)
    context = current_item.get()
    result = await gateway.call_structured(
        model,
        prompt=[prompt.render(**values)],
        schema=schema,
        ids=ids,
        check=check,
        stage=template,
        template_name=prompt.name,
        template_version=str(prompt.version),
        fresh=context.fresh,
        job_id=context.job_id,
    )
    calls.append(result)
    if not result.ok or result.output is None:
        # The gateway already spent its repairs: the last answer and its problems are kept.
        raise ItemFailed(f"{template} call failed ({result.outcome}): {result.error}", *calls)
    return result.output


def _compile_problems(document: dict[str, Any]) -> list[str]:
    """The compiler's problems with a document, each with its JSON path."""
    try:
        compiler.validate(document)
    except compiler.MetaRubricInvalid as invalid:
        return [str(problem) for problem in invalid.problems]
    return []


def _document(subject: _Subject, snippets: list[dict[str, str]], items: list[Any]) -> dict:
    return {
        "schema_version": compiler.SCHEMA_VERSION,
        "question": subject.question,
        "entity": subject.entity,
        "snippets": snippets,
        "items": [item.model_dump(mode="json", exclude_defaults=False) for item in items],
    }


async def _save(
    subject: _Subject,
    document: dict,
    stage: str,
    model: LLMModel,
    calls: list[CallResult],
    human_changes: list[dict[str, Any]] | None = None,
) -> int:
    try:
        return await sync_to_async(_store)(
            subject.question_id, document, stage, model.name, human_changes
        )
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
        # Refused in the gateway, not only here: the ledger then never answers a later launch
        # from the cache with the same ungrounded search.
        check=_grounded_evidence,
        question=subject.question,
        entity=subject.entity,
    )
    snippets = snippets_from_grounding(found)

    def layout_problems(reply: BaseModel) -> list[str]:
        assert isinstance(reply, LayoutReply)
        return _compile_problems(_document(subject, snippets, reply.items))

    layout = await _structured(
        gateway,
        model,
        "rubric_layout",
        LayoutReply,
        calls,
        {"snippets": [s["id"] for s in snippets]},
        check=layout_problems,
        question=subject.question,
        entity=subject.entity,
        snippets=snippet_items(snippets),
    )
    assert isinstance(layout, LayoutReply)
    document = _document(subject, snippets, layout.items)
    version_id = await _save(subject, document, Stage.LLM_DRAFT, model, calls)
    return ItemResult.of_calls(
        {"version_id": version_id, "snippets": len(snippets), "items": len(layout.items)}, *calls
    )


@dataclass(frozen=True)
class Rebuilt:
    """A rebuild's answer made whole: the document (the input's items, each replaced by the
    answer's item of its id or left as it was, minus the dropped ones, then the new items),
    and where each of its items came from (an index of the answer's items, or the id of an
    input item left out of them, kept as it was)."""

    document: dict[str, Any]
    origins: list[int | str]


def rebuilt(
    subject: _Subject, snippets: list[dict[str, str]], input_meta: dict, reply: RebuildReply
) -> Rebuilt:
    answered: dict[str, int] = {}
    for n, item in enumerate(reply.items):
        answered.setdefault(item.id, n)
    dropped = {d.id for d in reply.dropped}
    origins: list[int | str] = []
    for item in input_meta.get("items", []):
        if item["id"] in answered:
            origins.append(answered[item["id"]])
        elif item["id"] not in dropped:
            origins.append(item["id"])
    used = {o for o in origins if isinstance(o, int)}
    origins += [n for n in range(len(reply.items)) if n not in used]
    by_id = {item["id"]: item for item in input_meta.get("items", [])}
    items = [
        reply.items[o].model_dump(mode="json", exclude_defaults=False)
        if isinstance(o, int)
        else by_id[o]
        for o in origins
    ]
    document = _document(subject, snippets, [])
    document["items"] = items
    return Rebuilt(document, origins)


_ITEM_PATH = re.compile(r"^items\[(\d+)\]")


def _answer_path(problem: str, origins: list[int | str]) -> str:
    """A compiler problem of the whole document, with the path of the answer that made it: an
    item of the answer by its index there, an input item left out by its id."""
    found = _ITEM_PATH.match(problem)
    if found is None or int(found.group(1)) >= len(origins):
        return problem
    origin = origins[int(found.group(1))]
    if isinstance(origin, int):
        return f"items[{origin}]{problem[found.end() :]}"
    rest = problem[found.end() :].lstrip(".")
    return f"the input's {origin} (left out of items, so kept as it was): {rest}"


def rebuild_problems(input_meta: dict[str, Any], made: Rebuilt, reply: RebuildReply) -> list[str]:
    """The verified-superset rule and the compiler's rules: every input item and meta-insight
    is in the rebuild or dropped with a reason (an item left out is kept as it was, so only a
    meta-insight of a changed item can go missing), a dropped id is an input id and is gone
    from the rebuild, and the document compiles."""
    kept = meta_ids(made.document)
    inputs = meta_ids(input_meta)
    dropped = {d.id for d in reply.dropped if d.reason.strip()}
    problems = [
        f"items: the input's {lost} is missing; keep it, or list it under dropped with the reason"
        for lost in meta_id_list(input_meta)
        if lost not in kept and lost not in dropped
    ]
    for i, d in enumerate(reply.dropped):
        if d.id not in inputs:
            problems.append(f"dropped[{i}].id: {d.id!r} is not an input item or meta-insight")
        elif d.id in kept:
            problems.append(
                f"dropped[{i}].id: {d.id} is dropped, yet the rebuild keeps it; keep it or drop "
                "it, not both"
            )
    return problems + [_answer_path(p, made.origins) for p in _compile_problems(made.document)]


def _compiled(document: dict[str, Any]) -> list[compiler.Check] | None:
    try:
        return compiler.compile_document(document)
    except compiler.MetaRubricInvalid:
        return None


def _answers(reply: RebuildReply) -> list[Answer]:
    return [Answer(a.id, a.outcome, a.item, a.reason) for a in reply.human_changes]


def lost_evidence(
    old: list[dict[str, str]], kept: list[dict[str, str]], verdicts: dict[str, dict]
) -> list[str]:
    """Input snippets that leave the rubric without a recorded verdict and reason (a verified
    snippet must stay, unchanged)."""
    by_id = {s["id"]: s for s in kept}
    return [
        s["id"]
        for s in old
        if by_id.get(s["id"]) != s
        and (
            verdicts.get(s["id"], {}).get("status") in (None, VERIFIED)
            or not verdicts[s["id"]].get("reason")
        )
    ]


async def refine(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    question_id, round_ = int(payload["question_id"]), int(payload["round"])
    if round_ not in REFINED_STAGE:
        raise ItemFailed(f"round must be 1 or 2, not {round_}")
    stage = REFINED_STAGE[round_]
    subject = await sync_to_async(_load)(question_id, stage, REFINE_INPUT[round_])
    if subject.done_version is not None:
        return {"version_id": subject.done_version, "skipped": f"the rubric has {stage} already"}
    assert subject.input_meta is not None
    input_meta = subject.input_meta
    model = await sync_to_async(_model)(current_item.get().params["model"])
    calls: list[CallResult] = []
    old_snippets: list[dict[str, str]] = list(input_meta.get("snippets", []))
    meta_rubric = _json(input_meta.get("items", []))
    # Gather with the URL context tool in free text, then structure it in a second call:
    # free text is never parsed for a verdict.
    audit = await _grounded(
        gateway,
        model,
        "rubric_audit",
        ("url_context",),
        calls,
        question=subject.question,
        entity=subject.entity,
        snippets=snippet_items(old_snippets),
        meta_rubric=meta_rubric,
    )
    unreachable = unreachable_urls(audit)
    snippet_ids = [s["id"] for s in old_snippets]
    item_ids = meta_ids(input_meta)

    def audit_check(reply: BaseModel) -> list[str]:
        assert isinstance(reply, AuditReply)
        return audit_problems(snippet_ids, item_ids, reply)

    structured = await _structured(
        gateway,
        model,
        "rubric_audit_verdicts",
        AuditReply,
        calls,
        {"snippets": snippet_ids, "items": [item["id"] for item in input_meta.get("items", [])]},
        check=audit_check,
        question=subject.question,
        entity=subject.entity,
        snippets=snippet_items(old_snippets),
        unreachable="\n".join(sorted(unreachable)),  # an empty fence: none (the prompt says)
        audit=audit.text,
        meta_rubric=meta_rubric,
    )
    assert isinstance(structured, AuditReply)
    verdicts = audit_verdicts(old_snippets, structured, unreachable)
    partial = "\n".join(f"{p.id}: {p.missing}" for p in structured.partial_coverage)
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
    lost = lost_evidence(old_snippets, usable, verdicts)
    if lost:  # the code's own guard: a snippet never leaves without its verdict and reason
        raise ItemFailed(
            "evidence would leave the rubric without a recorded verdict: " + ", ".join(lost), *calls
        )
    # The statuses are ours (the schema's choices, or the code's for an unreachable address);
    # the reasons and what is missing are the model's words: fenced.
    audit_items = [(f"{sid}: {v['status']}", v["reason"]) for sid, v in verdicts.items()]
    partial_items = [(p.id, p.missing) for p in structured.partial_coverage]

    changes = subject.human_changes

    def superset_check(reply: BaseModel) -> list[str]:
        assert isinstance(reply, RebuildReply)
        made = rebuilt(subject, usable, input_meta, reply)
        return rebuild_problems(input_meta, made, reply) + change_problems(
            changes,
            _answers(reply),
            input_meta=input_meta,
            document=made.document,
            compiled=_compiled(made.document),
        )

    reply = await _structured(
        gateway,
        model,
        "rubric_rebuild",
        RebuildReply,
        calls,
        {
            "snippets": [s["id"] for s in usable],
            "inputs": meta_id_list(input_meta),
            "changes": [change.id for change in changes],
        },
        check=superset_check,
        question=subject.question,
        entity=subject.entity,
        meta_rubric=meta_rubric,
        audit=audit_items,
        partial_coverage=partial_items,
        snippets=snippet_items(usable),
        human_changes=prompt_items(changes),
    )
    assert isinstance(reply, RebuildReply)
    document = rebuilt(subject, usable, input_meta, reply).document
    kept = None
    if REFINE_INPUT[round_] in (Stage.HUMAN_1, Stage.HUMAN_2):
        # The check passed, so the document compiles and every change has its answer.
        kept = outcomes(changes, _answers(reply), compiler.compile_document(document))
    version_id = await _save(subject, document, stage, model, calls, kept)
    dropped = [d.model_dump() for d in reply.dropped] + [
        {"id": k["id"], "change": describe(k), "reason": k["why"]}
        for k in kept or []
        if k["outcome"] == DROPPED
    ]
    result: dict[str, Any] = {
        "version_id": version_id,
        "audit": verdicts,
        "partial_coverage": partial,
        "new_snippets": len(new_snippets),
        "dropped": dropped,
    }
    if kept is not None:
        result["human_changes"] = {
            "carried": [k["id"] for k in kept if k["outcome"] == CARRIED],
            "dropped": [k["id"] for k in kept if k["outcome"] == DROPPED],
        }
    return ItemResult.of_calls(result, *calls)


register_kind(
    BUILD, build, chunk_size=5, concurrency=4, title="Build rubrics", item_noun="question"
)
register_kind(
    REFINE, refine, chunk_size=5, concurrency=4, title="Refine rubrics", item_noun="question"
)


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
    """Round 1: rubrics whose latest version is the draft; round 2: those whose final version
    is human round 1's, with no round in progress (RubricQuerySet.waiting_for decides)."""
    rubrics = Rubric.objects.filter(question__in=_live_questions(question_ids))
    return list(
        rubrics.waiting_for(f"refine{round_}")
        .order_by("question_id")
        .values_list("question_id", flat=True)
    )


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
        calls_per_item=4,
        select=select_questions,
        domains=image_domains,
        states=RUBRIC_STATES,
    )
