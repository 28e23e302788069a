"""What a judging run costs and how it is launched: the estimate of calls, tokens and cost, and
the launch, shared by the runs page, the API (judging/runs/api.py), the leaderboard's offer to
judge what waits, and `launch_job`. Both read the same validated fields (a form's or the API
serializer's), so what is launched is what was estimated."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django import forms

from annotation.models import FinalQuestion
from llm.batch import BATCH_PRICE_FACTOR
from llm.jobs import JobError
from llm.models import Job, LLMModel

from ..models import EvaluatedModel, Judge, Setting
from . import llm_jobs

BATCH_RESPONSES = 50  # responses per Batch API item (about 1,750 requests at 35 checks)
# Typical tokens of one call, (input, output): an estimate for the page, not a measurement.
# An answer: the prompt (and a photo, about 260 tokens) in, a multi-paragraph answer out.
# A verdict: the question, photo and an answer of about 1,500 tokens in, a short JSON out.
TYPICAL = {
    (llm_jobs.COLLECT, Setting.MULTIMODAL): (400, 1_500),
    (llm_jobs.COLLECT, Setting.TEXT_ONLY): (150, 1_500),
    (llm_jobs.JUDGE, ""): (2_200, 80),
}
MILLION = Decimal(1_000_000)


def question_ids(chosen: list[str]) -> list[int] | None:
    """The final questions of the chosen images' source ids (None: no choice, every one);
    the page and the API refuse unknown ones in the same words."""
    if not chosen:
        return None
    found = dict(
        FinalQuestion.objects.filter(image__source_id__in=chosen).values_list(
            "image__source_id", "pk"
        )
    )
    unknown = [source_id for source_id in chosen if source_id not in found]
    if unknown:
        raise forms.ValidationError(
            f"No final question for {len(unknown)} source id(s): {', '.join(unknown)}"
        )
    return list(found.values())


@dataclass(frozen=True)
class Estimate:
    items: int
    calls: int  # copies by key left out; repairs of invalid answers not counted
    tokens_in: int
    tokens_out: int
    cost: Decimal
    model: str
    note: str


def call_cost(model: LLMModel, tokens_in: int, tokens_out: int) -> Decimal:
    """What the tokens cost at the model's prices per million."""
    return (
        tokens_in * model.price_input_per_million + tokens_out * model.price_output_per_million
    ) / MILLION


def run_estimate(what: str, data: dict[str, Any]) -> Estimate:
    """Raises JobError when nothing would be launched or no model can be called."""
    if what == "collect":
        evaluated: EvaluatedModel = data["model"]
        model = evaluated.llm_model
        assert model is not None  # the form's queryset
        items = len(
            llm_jobs.collect_items(
                evaluated=evaluated, setting=data["setting"], question_ids=data["ids"]
            )
        )
        if not items:
            raise JobError(f"{evaluated.name} has answered every question in scope.")
        per_in, per_out = TYPICAL[(llm_jobs.COLLECT, data["setting"])]
        calls = items
        note = "One call per question."
    else:
        judge: Judge = data["judge"]
        model = judge.llm_model
        assert model is not None
        scope = llm_jobs.judge_scope(
            judge=judge,
            model_ids=_ids(data["models"]),
            settings=data["settings"] or None,
            question_ids=data["ids"],
            fresh=bool(data.get("fresh")),
            versions=data.get("versions"),  # a release's; None: the final versions
        )
        if not scope.items:
            raise JobError(llm_jobs.NOTHING_TO_JUDGE)
        per_in, per_out = TYPICAL[(llm_jobs.JUDGE, "")]
        items, calls = len(scope.items), scope.calls
        if data.get("batch"):
            items = -(-items // BATCH_RESPONSES)  # one item per batch of responses
        note = (
            f"{scope.responses} response(s) in scope; {len(scope.items)} still lack verdicts "
            f"on {scope.checks_to_judge} check(s), of which {scope.copies} are copied "
            "without a call from an earlier verdict with the same key (an unchanged check "
            f"judged before): {calls} call(s). Calls of one response share their prefix, "
            "so the provider's prompt caching can lower the cost."
        )
        if data.get("batch"):
            note += (
                f" Through the Batch API: {BATCH_RESPONSES} responses a batch, at half "
                "the price (the cost below is halved)."
            )
        if scope.without_rubric:
            note += (
                f" {scope.without_rubric} response(s) are left out: their question has no "
                "frozen rubric version yet."
            )
    cost = call_cost(model, calls * per_in, calls * per_out)
    if data.get("batch"):
        cost *= BATCH_PRICE_FACTOR
    return Estimate(items, calls, calls * per_in, calls * per_out, cost, model.name, note)


def _ids(models: Any) -> list[int] | None:
    return [m.pk for m in models] or None


def run_launch(*, user: Any, what: str, data: dict[str, Any]) -> Job:
    """Launch what a validated form (or the API's serializer, same fields) asks for: the
    page, the API and `launch_job` all launch through this."""
    if what == "collect":
        return llm_jobs.collect_launch(
            user=user,
            evaluated=data["model"],
            setting=data["setting"],
            question_ids=data["ids"],
            fresh=data["fresh"],
        )
    return llm_jobs.judge_launch(
        user=user,
        judge=data["judge"],
        model_ids=_ids(data["models"]),
        settings=data["settings"] or None,
        question_ids=data["ids"],
        fresh=data["fresh"],
        batch=data["batch"],
        batch_responses=BATCH_RESPONSES,
        versions=data.get("versions"),  # a release's; None: the final versions
    )
