"""The LLM jobs of stage 3: collecting the evaluated models' answers, and judging them.

`judging.collect` (payload: question_id; params: evaluated model, setting): the evaluated
model answers one final question in free text. Multimodal: the photo and the question
(template `answer_multimodal`); text-only: the question with the entity named in text instead
of the photo (`answer_text_only`). The answer is stored as a `Response` with the model version
the provider reports, tokens and latency. Idempotent: a response that exists is kept.

`judging.judge` (payload: response_id, version_id; params: judge): one structured call per
(response, check) of that rubric version, each returning one of four verdicts and a short
rationale. The calls of one response share their prefix (question, photo where the response
was given one, response) and put the check last, so the provider's prompt caching applies.
Before calling, each check is looked up by its verdict key (the judge and its model, the
template hash, and every value the prompt shows: question, photo, response, tier, check; see
judging.verdicts.services.KEY_INPUTS): a check that already has a verdict on this row is
skipped, and one judged before on the same prompt (in another rubric version) gets a copy of that
verdict without a call, unless the job asks for fresh calls. A re-tiered check, a corrected
question or another judge model is a new prompt, so it is judged anew. A call that fails for good
is recorded as a `failed` verdict (counted and shown, never scored) and fails the item with its
reason; retrying the job's failed items calls again for those checks only.

`judging.evaluate` (payload: question_id, setting, version_id; params: the evaluated model, the
judges, the prompts' versions): both in one item, for one question of a release in one setting:
the answer (collected when the model has none), then each judge's verdicts on it on the
release's rubric version. judging/runs/evaluate.py plans, estimates and launches it.
"""

from __future__ import annotations

import asyncio
import mimetypes
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.db.models import Count, Sum
from pydantic import BaseModel, ConfigDict, Field

from annotation.models import FinalQuestion
from llm.gateway import CallResult, Gateway, ImagePart, PromptPart, run_bounded
from llm.jobs import (
    ItemFailed,
    ItemResult,
    JobError,
    current_item,
    job_launch,
    register_kind,
)
from llm.models import Job, LLMModel, Provider
from llm.prompts import Prompt, load_prompt, render_text
from rubrics.models import RubricCheck
from rubrics.services import final_versions_of

from ..models import EvaluatedModel, Judge, Response, ResponseTierCount, Setting, VerdictValue
from ..verdicts.services import (
    KEY_INPUTS,
    Given,
    judge_inputs,
    verdict_key,
    verdicts_find,
    verdicts_record,
)

COLLECT = "judging.collect"
JUDGE = "judging.judge"
JUDGE_BATCH = "judging.judge_batch"
EVALUATE = "judging.evaluate"
ANSWER_PROMPT = {Setting.MULTIMODAL: "answer_multimodal", Setting.TEXT_ONLY: "answer_text_only"}
JUDGE_PROMPT = "judge_check"
# The judge template's markers: where the photo goes (multimodal responses only), and where
# the shared prefix ends and the check's own part begins.
PHOTO_MARK, CHECK_MARK = "[[photo]]", "[[check]]"
# Calls of one response in flight at once (a chunk runs several responses at once too).
CALLS_PER_RESPONSE = 4


class JudgeReply(BaseModel):
    """The judge's answer for one check."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["meets", "partially_meets", "missing", "contradicts"]
    rationale: str = Field(
        description="One or two sentences pointing at the deciding part of the answer."
    )


# ---------------------------------------------------------------------------------------------
# Prompts.


def _photo(question: FinalQuestion) -> ImagePart:
    image = question.image
    with image.file.open("rb") as handle:
        data = handle.read()
    mime = mimetypes.guess_type(image.file.name or "")[0] or "image/jpeg"
    return ImagePart(data=data, mime_type=mime)


@dataclass(frozen=True)
class JudgeTemplate:
    """The judge template split at its markers: prefix, (photo), response part, check part."""

    prompt: Prompt

    @property
    def version(self) -> str:
        """What a verdict keeps and its key includes: the template text's hash."""
        return self.prompt.sha256

    def parts(self) -> tuple[str, str, str]:
        head, marked, rest = self.prompt.text.partition(PHOTO_MARK)
        middle, checked, tail = rest.partition(CHECK_MARK)
        if not marked or not checked:
            raise JobError(
                f"prompt {self.prompt.name} v{self.prompt.version} lacks its "
                f"{PHOTO_MARK} and {CHECK_MARK} markers"
            )
        # Whatever the judge sees must be in the verdict's key: a template that shows anything
        # else is refused (add it to KEY_INPUTS and judge_inputs first).
        unkeyed = sorted(set(self.prompt.placeholders) - set(KEY_INPUTS))
        if unkeyed:
            raise JobError(
                f"prompt {self.prompt.name} v{self.prompt.version} shows "
                f"{', '.join(unkeyed)}, which the verdict key leaves out"
            )
        return head.strip("\n"), middle.strip("\n"), tail.strip("\n")

    def prefix(self, *, inputs: dict[str, str], photo: ImagePart | None) -> list[PromptPart]:
        """The part shared by a response's calls, rendered from judge_inputs' values."""
        head, middle, _ = self.parts()
        prefix: list[PromptPart] = [render_text(head, inputs)]
        if photo is not None:
            prefix.append(photo)
        prefix.append(render_text(middle, inputs))
        return prefix

    def check(self, *, tier: str, text: str) -> str:
        return render_text(self.parts()[2], {"tier": tier.replace("_", " "), "check": text})


def judge_template(version: int | None = None) -> JudgeTemplate:
    template = JudgeTemplate(load_prompt(JUDGE_PROMPT, version))
    template.parts()  # refuses a template without its markers, at launch
    return template


# ---------------------------------------------------------------------------------------------
# Collecting responses.


@dataclass(frozen=True)
class _Ask:
    done: int | None  # the response, when it exists already
    model: LLMModel | None = None
    prompt: tuple[PromptPart, ...] = ()
    template: Prompt | None = None


def _collect_setup(question_id: int, params: dict[str, Any]) -> _Ask:
    evaluated = EvaluatedModel.objects.select_related("llm_model").get(pk=params["model_id"])
    setting = params["setting"]
    existing = (
        Response.objects.filter(model=evaluated, question_id=question_id, setting=setting)
        .values_list("pk", flat=True)
        .first()
    )
    if existing is not None:
        return _Ask(done=existing)
    if evaluated.llm_model is None:
        raise ItemFailed(f"the evaluated model {evaluated.name} has no LLM model to call")
    question = FinalQuestion.objects.select_related("image").get(pk=question_id)
    template = load_prompt(ANSWER_PROMPT[Setting(setting)], params.get("prompt_version"))
    text = template.render(question=question.text, entity=question.image.entity)
    prompt: tuple[PromptPart, ...] = (
        (_photo(question), text) if setting == Setting.MULTIMODAL else (text,)
    )
    return _Ask(done=None, model=evaluated.llm_model, prompt=prompt, template=template)


def _store_response(
    *, question_id: int, params: dict[str, Any], text: str, call: CallResult, latency_ms: int
) -> int:
    response, _ = Response.objects.get_or_create(
        model_id=params["model_id"],
        question_id=question_id,
        setting=params["setting"],
        defaults={
            "text": text,
            "model_version": call.model_version,
            "input_tokens": call.tokens_in,
            "output_tokens": call.tokens_out,
            "latency_ms": latency_ms,
        },
    )
    return response.pk


async def collect_response(
    gateway: Gateway, question_id: int, params: dict[str, Any]
) -> tuple[int, CallResult | None]:
    """The model's answer to one question in one setting (params: model_id, setting,
    prompt_version): the response that exists, or one call and the response stored. Returns
    (response id, the call or None). Raises ItemFailed when the model gives no answer."""
    context = current_item.get()
    ask = await sync_to_async(_collect_setup)(question_id, params)
    if ask.done is not None:
        return ask.done, None
    assert ask.model is not None and ask.template is not None
    started = time.perf_counter()
    call = await gateway.call_text(
        ask.model,
        prompt=ask.prompt,
        stage=COLLECT,
        template_name=ask.template.name,
        template_version=str(ask.template.version),
        fresh=context.fresh,
        job_id=context.job_id,
    )
    latency_ms = int((time.perf_counter() - started) * 1000)
    if not call.ok:
        raise ItemFailed(f"the model gave no answer ({call.outcome}): {call.error}", call)
    response_id = await sync_to_async(_store_response)(
        question_id=question_id,
        params=params,
        text=call.raw_text,
        call=call,
        latency_ms=latency_ms,
    )
    return response_id, call


async def collect(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    response_id, call = await collect_response(
        gateway, int(payload["question_id"]), current_item.get().params
    )
    if call is None:
        return {"response_id": response_id, "skipped": "the model answered this question already"}
    return ItemResult.of_calls(
        {"response_id": response_id, "characters": len(call.raw_text), "cached": call.cached}, call
    )


# ---------------------------------------------------------------------------------------------
# Judging.


@dataclass(frozen=True)
class _Check:
    pk: int
    tier: str
    text: str


@dataclass(frozen=True)
class _Plan:
    model: LLMModel
    prefix: tuple[PromptPart, ...]
    to_call: list[_Check]
    already: int  # checks with a verdict on this row (skipped)
    reused: int  # checks given a copy of an earlier verdict with the same key (no call)


def _judge_plan(
    response_id: int, version_id: int, params: dict[str, Any], fresh: bool = False
) -> _Plan:
    judge = Judge.objects.select_related("llm_model").get(pk=params["judge_id"])
    if judge.llm_model is None:
        raise ItemFailed(f"the judge {judge.name} has no LLM model to call")
    response = Response.objects.select_related("question__image").get(pk=response_id)
    template = judge_template(params.get("prompt_version"))
    checks = list(
        RubricCheck.objects.filter(version_id=version_id, deleted_at__isnull=True)
        .order_by("position")
        .values_list("pk", "tier", "text")
    )
    judged = set(
        judge.verdicts.filter(response=response, check_row__version_id=version_id)
        .exclude(verdict=VerdictValue.FAILED)
        .values_list("check_row_id", flat=True)
    )
    open_ = [_Check(pk, tier, text) for pk, tier, text in checks if pk not in judged]
    keys = {
        check.pk: verdict_key(
            judge=judge,
            template_version=template.version,
            inputs=judge_inputs(response=response, tier=check.tier, check_text=check.text),
        )
        for check in open_
    }
    fresh = fresh or bool(params.get("fresh"))  # a retried item, or a job of fresh calls
    earlier = {} if fresh else verdicts_find(judge=judge, keys=list(keys.values()))
    copies = [
        Given(check.pk, found.verdict, found.rationale, found.judge_model_version)
        for check in open_
        if (found := earlier.get(keys[check.pk])) is not None
    ]
    if copies:
        verdicts_record(
            judge=judge, response=response, given=copies, template_version=template.version
        )
    to_call = [check for check in open_ if keys[check.pk] not in earlier]
    photo = _photo(response.question) if response.setting == Setting.MULTIMODAL else None
    shared = judge_inputs(response=response, tier="", check_text="")
    prefix = template.prefix(inputs=shared, photo=photo) if to_call else []
    return _Plan(judge.llm_model, tuple(prefix), to_call, len(judged), len(copies))


def _given(check: _Check, call: CallResult) -> Given:
    if call.ok and isinstance(call.output, JudgeReply):
        return Given(check.pk, call.output.verdict, call.output.rationale, call.model_version)
    return Given(
        check.pk,
        VerdictValue.FAILED,
        f"no verdict ({call.outcome}): {call.error}"[:2000],
        call.model_version,
    )


def _record_verdicts(
    *, params: dict[str, Any], response_id: int, given: list[Given], template_version: str
) -> None:
    # The whole rows: the verdicts' keys are computed from the judge's name and the response.
    verdicts_record(
        judge=Judge.objects.get(pk=params["judge_id"]),
        response=Response.objects.get(pk=response_id),
        given=given,
        template_version=template_version,
    )


@dataclass(frozen=True)
class Judged:
    """One judge's verdicts on one response: what was done, the calls made, and the calls
    that gave no verdict (recorded as failed verdicts)."""

    summary: dict[str, int]
    calls: list[CallResult]
    failures: list[CallResult]

    def failure(self) -> str:
        first = self.failures[0]
        return (
            f"{len(self.failures)} of {len(self.calls)} checks got no verdict; "
            f"first: {first.outcome}: {first.error}"
        )


async def judge_response(
    gateway: Gateway, response_id: int, version_id: int, params: dict[str, Any]
) -> Judged:
    """Judge one response on the checks of one rubric version (params: judge_id,
    prompt_version, fresh): the checks with a verdict are skipped, those an earlier verdict
    with the same key answers are copied, the rest are called and recorded together."""
    context = current_item.get()
    plan = await sync_to_async(_judge_plan)(response_id, version_id, params, context.fresh)
    summary = {
        "checks": plan.already + plan.reused + len(plan.to_call),
        "calls": 0,
        "reused": plan.reused,
        "already": plan.already,
        "failed": 0,
    }
    if not plan.to_call:
        return Judged(summary, [], [])
    template = judge_template(params.get("prompt_version"))

    async def one(check: _Check) -> CallResult:
        return await gateway.call_structured(
            plan.model,
            prompt=[*plan.prefix, template.check(tier=check.tier, text=check.text)],
            schema=JudgeReply,
            stage=JUDGE,
            template_name=template.prompt.name,
            template_version=str(template.prompt.version),
            fresh=context.fresh,
            job_id=context.job_id,
        )

    outcomes = await run_bounded([one(check) for check in plan.to_call], CALLS_PER_RESPONSE)
    crashed = [exc for exc in outcomes if isinstance(exc, Exception)]
    if crashed:
        raise crashed[0]
    calls = [call for call in outcomes if isinstance(call, CallResult)]
    # One transaction for the response's verdicts: an item that dies before it calls again,
    # and the ledger's cache answers what was already paid for.
    given = [_given(check, call) for check, call in zip(plan.to_call, calls, strict=True)]
    await sync_to_async(_record_verdicts)(
        params=params, response_id=response_id, given=given, template_version=template.version
    )
    summary["calls"] = sum(1 for call in calls if not call.cached)
    failures = [
        call for g, call in zip(given, calls, strict=True) if g.verdict == VerdictValue.FAILED
    ]
    summary["failed"] = len(failures)
    return Judged(summary, calls, failures)


async def judge(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    judged = await judge_response(
        gateway,
        int(payload["response_id"]),
        int(payload["version_id"]),
        current_item.get().params,
    )
    if judged.failures:
        raise ItemFailed(judged.failure(), *judged.calls)
    if not judged.calls:
        return judged.summary
    return ItemResult.of_calls(judged.summary, *judged.calls)


# ---------------------------------------------------------------------------------------------
# Evaluating a model on a release (judging/runs/evaluate.py plans and launches it).


async def evaluate(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    """One question in one setting of an evaluate run, in two steps: the model's answer
    (collected when it has none), then each of the run's judges' verdicts on it, on the
    release's rubric version. What a step did stays when a later one fails: the response is
    stored before any judge is asked, each judge's verdicts are recorded as they come, and a
    run again skips both (the response exists, the checks have verdicts)."""
    params = current_item.get().params
    setting = payload["setting"]
    response_id, answer = await collect_response(
        gateway,
        int(payload["question_id"]),
        {
            "model_id": params["model_id"],
            "setting": setting,
            "prompt_version": params["answer_prompts"][setting],
        },
    )
    judges = dict(params["judges"])  # [[id, name], ...] in JSON
    outcomes = await asyncio.gather(
        *(
            judge_response(
                gateway,
                response_id,
                int(payload["version_id"]),
                {
                    "judge_id": judge_id,
                    "prompt_version": params["judge_prompt"],
                    "fresh": params.get("fresh", False),
                },
            )
            for judge_id in judges
        ),
        return_exceptions=True,
    )
    crashed = [exc for exc in outcomes if isinstance(exc, BaseException)]
    if crashed:
        raise crashed[0]  # QuotaExhausted parks the job; the other judges' verdicts are kept
    judged = dict(zip(judges.values(), (o for o in outcomes if isinstance(o, Judged)), strict=True))
    calls = [
        *([answer] if answer is not None else []),
        *(c for j in judged.values() for c in j.calls),
    ]
    failing = [f"judge {name}: {j.failure()}" for name, j in judged.items() if j.failures]
    if failing:
        raise ItemFailed("; ".join(failing), *calls)
    result = {
        "response_id": response_id,
        "collected": answer is not None,
        "judges": {name: j.summary for name, j in judged.items()},
    }
    return ItemResult.of_calls(result, *calls)


register_kind(
    COLLECT, collect, chunk_size=20, concurrency=16, title="Collect answers", item_noun="image"
)
register_kind(
    JUDGE, judge, chunk_size=32, concurrency=8, title="Judge responses", item_noun="response"
)
# An item makes one answer call and a call per check for each judge (about 35 each).
register_kind(
    EVALUATE, evaluate, chunk_size=16, concurrency=16, title="Evaluate a model", item_noun="item"
)


# ---------------------------------------------------------------------------------------------
# Launching (admins: the judging runs page).


def _usable(model: LLMModel | None, what: str) -> LLMModel:
    if model is None:
        raise JobError(f"{what} has no LLM model: set one in the admin (Judging).")
    if not model.active:
        raise JobError(f"{what}'s LLM model {model.name!r} is switched off.")
    return model


def _open_questions(question_ids: Sequence[int] | None) -> Any:
    questions = FinalQuestion.objects.filter(dropped_at__isnull=True)
    return questions.filter(pk__in=question_ids) if question_ids is not None else questions


def collect_items(
    *, evaluated: EvaluatedModel, setting: str, question_ids: Sequence[int] | None = None
) -> list[tuple[str, dict]]:
    """The final questions (not dropped) that the model has not answered in this setting."""
    answered = Response.objects.filter(model=evaluated, setting=setting).values("question_id")
    questions = (
        _open_questions(question_ids)
        .exclude(pk__in=answered)
        .select_related("image")
        .order_by("pk")
    )
    return [
        (q.image.source_id, {"question_id": q.pk}) for q in questions.only("pk", "image__source_id")
    ]


def collect_launch(
    *,
    user: Any,
    evaluated: EvaluatedModel,
    setting: str,
    question_ids: Sequence[int] | None = None,
    fresh: bool = False,
) -> Job:
    if setting not in Setting.values:
        raise JobError(f"unknown setting {setting!r}; expected one of {', '.join(Setting.values)}")
    model = _usable(evaluated.llm_model, f"The evaluated model {evaluated.name}")
    items = collect_items(evaluated=evaluated, setting=setting, question_ids=question_ids)
    if not items:
        raise JobError(f"{evaluated.name} has answered every question in scope ({setting}).")
    prompt = load_prompt(ANSWER_PROMPT[Setting(setting)])
    return job_launch(
        kind=COLLECT,
        items=items,
        user=user,
        params={
            "model_id": evaluated.pk,
            "model": model.name,
            "evaluated_model": evaluated.name,
            "setting": setting,
            "prompt_version": prompt.version,
            "fresh": fresh,
        },
    )


# A verdict once given is kept (spot checks, releases and published boards point at it): a run,
# fresh calls or not, judges only the checks still without one. Judging again is a new judge.
NOTHING_TO_JUDGE = (
    "Every response in scope has a verdict from this judge on every check of its question's "
    "final rubric, so there is nothing to judge. Fresh calls judge only checks without a "
    "verdict (a verdict once given is kept); to judge everything again, add a judge under a "
    "new name with the same model."
)


@dataclass(frozen=True)
class JudgeScope:
    """What a judge launch would do: one item per response that still lacks verdicts, the
    checks without a verdict, and of those the calls it will make: the checks that no earlier
    verdict with the same key answers (those are copied without a call, unless fresh)."""

    items: list[tuple[str, dict]]
    checks_to_judge: int
    responses: int  # responses in scope, judged or not
    without_rubric: int  # responses whose question has no frozen rubric version yet
    copies: int = 0  # checks to judge that an earlier verdict answers: no call

    @property
    def calls(self) -> int:
        return self.checks_to_judge - self.copies


_KEYS_PER_QUERY = 500  # under every database's limit of parameters in one query


def _copies_in_scope(judge: Judge, items: list[tuple[str, dict]]) -> int:
    """How many checks without a verdict an earlier verdict with the same key answers, as the
    job's own plan (_judge_plan) will find them: the same key, the same lookup."""
    pairs = [(p["response_id"], p["version_id"]) for _, p in items]
    response_ids = {r for r, _ in pairs}
    version_ids = {v for _, v in pairs}
    responses = Response.objects.select_related("question__image").in_bulk(response_ids)
    checks: dict[int, list[tuple[int, str, str]]] = {}
    for pk, version_id, tier, text in RubricCheck.objects.filter(
        version_id__in=version_ids, deleted_at__isnull=True
    ).values_list("pk", "version_id", "tier", "text"):
        checks.setdefault(version_id, []).append((pk, tier, text))
    judged = set(
        judge.verdicts.filter(response_id__in=response_ids, check_row__version_id__in=version_ids)
        .exclude(verdict=VerdictValue.FAILED)
        .values_list("response_id", "check_row_id")
    )
    template_version = judge_template().version
    keys = [
        verdict_key(
            judge=judge,
            template_version=template_version,
            inputs=judge_inputs(response=responses[response_id], tier=tier, check_text=text),
        )
        for response_id, version_id in pairs
        for pk, tier, text in checks.get(version_id, [])
        if (response_id, pk) not in judged
    ]
    distinct = sorted(set(keys))
    found: set[str] = set()
    for start in range(0, len(distinct), _KEYS_PER_QUERY):
        found |= set(verdicts_find(judge=judge, keys=distinct[start : start + _KEYS_PER_QUERY]))
    return sum(key in found for key in keys)


def judge_scope(
    *,
    judge: Judge,
    model_ids: Sequence[int] | None = None,
    settings: Sequence[str] | None = None,
    question_ids: Sequence[int] | None = None,
    fresh: bool = False,
    count_copies: bool = True,
    versions: Mapping[int, int] | None = None,
) -> JudgeScope:
    """What a judge launch would do. `versions` ({question id: rubric version id}, a
    release's: judging.releases.selectors.release_versions) judges those questions on those
    versions, dropped since or not; None: every question not dropped, on its final version."""
    if versions is None:
        responses = Response.objects.filter(question__dropped_at__isnull=True)
    else:
        responses = Response.objects.filter(question_id__in=list(versions))
    if model_ids is not None:
        responses = responses.filter(model_id__in=model_ids)
    if settings is not None:
        responses = responses.filter(setting__in=settings)
    if question_ids is not None:
        responses = responses.filter(question_id__in=question_ids)
    rows = list(responses.order_by("pk").values_list("pk", "question_id", "model__name", "setting"))
    if versions is None:
        versions = final_versions_of(sorted({question_id for _, question_id, _, _ in rows}))
    sizes = (
        dict(
            RubricCheck.objects.filter(
                version_id__in=set(versions.values()), deleted_at__isnull=True
            )
            .values("version_id")
            .annotate(n=Count("pk"))
            .values_list("version_id", "n")
        )
        if versions
        else {}
    )
    done = (
        {
            (response_id, version_id): total or 0
            for response_id, version_id, total in ResponseTierCount.objects.filter(
                judge=judge,
                version_id__in=set(versions.values()),
                response_id__in=[pk for pk, _, _, _ in rows],
            )
            .values("response_id", "version_id")
            .annotate(
                total=Sum("meets") + Sum("partially") + Sum("missing") + Sum("contradicts"),
            )
            .values_list("response_id", "version_id", "total")
        }
        if versions and rows
        else {}
    )
    items: list[tuple[str, dict]] = []
    checks = without = 0
    for response_id, question_id, model_name, setting in rows:
        version_id = versions.get(question_id)
        if version_id is None:
            without += 1
            continue
        missing = sizes.get(version_id, 0) - done.get((response_id, version_id), 0)
        if missing > 0:
            checks += missing
            items.append(
                (
                    f"{model_name}/{setting}/{question_id}",
                    {"response_id": response_id, "version_id": version_id},
                )
            )
    copies = _copies_in_scope(judge, items) if items and count_copies and not fresh else 0
    return JudgeScope(items, checks, len(rows), without, copies)


def judge_launch(
    *,
    user: Any,
    judge: Judge,
    model_ids: Sequence[int] | None = None,
    settings: Sequence[str] | None = None,
    question_ids: Sequence[int] | None = None,
    fresh: bool = False,
    batch: bool = False,
    batch_responses: int = 50,
    versions: Mapping[int, int] | None = None,
) -> Job:
    """Judge the responses in scope on each question's final rubric version (or on a
    release's versions, `versions` as judge_scope takes it): one item per response, or with
    `batch` (Gemini judges only) one item per group of `batch_responses` responses, judged
    through the Batch API at half the price."""
    model = _usable(judge.llm_model, f"The judge {judge.name}")
    template = judge_template()
    scope = judge_scope(
        judge=judge,
        model_ids=model_ids,
        settings=settings,
        question_ids=question_ids,
        count_copies=False,
        versions=versions,
    )  # the items suffice
    if not scope.items:
        raise JobError(NOTHING_TO_JUDGE)
    params = {
        "judge_id": judge.pk,
        "judge": judge.name,
        "model": model.name,
        "prompt_version": template.prompt.version,
        "fresh": fresh,
    }
    if not batch:
        return job_launch(kind=JUDGE, items=scope.items, user=user, params=params)
    if model.provider != Provider.GEMINI:
        raise JobError(
            f"The Batch API is Gemini's; the judge {judge.name} calls "
            f"{model.name} ({model.provider})."
        )
    if batch_responses < 1:
        raise JobError("A batch needs at least one response.")
    pairs = [[p["response_id"], p["version_id"]] for _, p in scope.items]
    groups = [pairs[i : i + batch_responses] for i in range(0, len(pairs), batch_responses)]
    return job_launch(
        kind=JUDGE_BATCH,
        user=user,
        params={**params, "batch": True},
        items=[(f"batch-{n:04d}", {"responses": group}) for n, group in enumerate(groups, 1)],
    )
