"""Judging runs (admins): launch response collection and judge jobs, with an estimate of the
calls, tokens and cost first. The jobs then run and are watched in the job console (/jobs/).

Each view checks the role, validates its form, calls at most one service, renders. Estimate
and launch read the same form, so what is launched is what was estimated (the launch form
carries the estimated fields back as hidden inputs).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.models import FinalQuestion
from core import access
from core.errors import Unavailable
from judging.models import EvaluatedModel, Judge, Setting
from judging.runs import llm_jobs
from llm.batch import BATCH_PRICE_FACTOR
from llm.jobs import JobError
from llm.launchers import parse_ids
from llm.models import Job, LLMModel, Provider

RECENT_JOBS = 20
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


class _Scoped(forms.Form):
    ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Only these images (source ids, one per line; empty: every final question)",
    )
    fresh = forms.BooleanField(
        required=False, label="Fresh calls (ignore the ledger's cache and earlier verdicts)"
    )

    def clean_ids(self) -> list[int] | None:
        return question_ids(parse_ids(self.cleaned_data.get("ids") or ""))


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


class CollectForm(_Scoped):
    model = forms.ModelChoiceField(
        EvaluatedModel.objects.filter(llm_model__isnull=False),
        label="Evaluated model",
        empty_label=None,
    )
    setting = forms.ChoiceField(choices=Setting.choices)


class JudgeForm(_Scoped):
    judge = forms.ModelChoiceField(Judge.objects.filter(llm_model__isnull=False), empty_label=None)
    models = forms.ModelMultipleChoiceField(
        EvaluatedModel.objects.all(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Models (none ticked: all)",
    )
    settings = forms.MultipleChoiceField(
        choices=Setting.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Settings (none ticked: both)",
    )
    batch = forms.BooleanField(
        required=False,
        label="Through Gemini's Batch API (half the price; results within a "
        "day, polled every LLM_BATCH_POLL_SECONDS)",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        judge = data.get("judge")
        if (
            data.get("batch")
            and judge is not None
            and judge.llm_model is not None
            and judge.llm_model.provider != Provider.GEMINI
        ):
            raise forms.ValidationError(
                f"The Batch API is Gemini's; {judge.name} calls "
                f"{judge.llm_model.name} ({judge.llm_model.provider})."
            )
        return data


FORMS: dict[str, type[_Scoped]] = {"collect": CollectForm, "judge": JudgeForm}


@dataclass(frozen=True)
class Estimate:
    items: int
    calls: int  # copies by key left out; repairs of invalid answers not counted
    tokens_in: int
    tokens_out: int
    cost: Decimal
    model: str
    note: str


def _cost(model: LLMModel, tokens_in: int, tokens_out: int) -> Decimal:
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
        )
        if not scope.items:
            raise JobError(
                "Every response in scope has a verdict from this judge on every "
                "check of its question's final rubric."
            )
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
    cost = _cost(model, calls * per_in, calls * per_out)
    if data.get("batch"):
        cost *= BATCH_PRICE_FACTOR
    return Estimate(items, calls, calls * per_in, calls * per_out, cost, model.name, note)


def _ids(models: Any) -> list[int] | None:
    return [m.pk for m in models] or None


def _context(forms_: dict[str, _Scoped] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "collect_form": (forms_ or {}).get("collect") or CollectForm(prefix="collect"),
        "judge_form": (forms_ or {}).get("judge") or JudgeForm(prefix="judge"),
        "evaluated": EvaluatedModel.objects.select_related("llm_model"),
        "judges": Judge.objects.select_related("llm_model"),
        "recent": Job.objects.filter(kind__in=[llm_jobs.COLLECT, llm_jobs.JUDGE])
        .select_related("launched_by")
        .order_by("-pk")[:RECENT_JOBS],
        **extra,
    }


def _bound(request: HttpRequest) -> tuple[str, _Scoped]:
    what = request.POST.get("what", "")
    if what not in FORMS:
        what = "collect"
    return what, FORMS[what](request.POST, prefix=what)


@access.role_required(access.ADMIN)
@require_GET
def runs_page(request: HttpRequest) -> HttpResponse:
    return render(request, "judging/runs/runs.html", _context())


@access.role_required(access.ADMIN)
@require_POST
def runs_estimate(request: HttpRequest) -> HttpResponse:
    """The estimate and a Launch button (htmx: the estimate partial of that form)."""
    what, form = _bound(request)
    est: dict[str, Any] = {
        "what": what,
        "form": form,
        "error": "",
        "estimate": None,
        # The launch form sends back exactly what was estimated.
        "carry": [
            (key, value)
            for key in request.POST
            if key != "csrfmiddlewaretoken"
            for value in request.POST.getlist(key)
        ],
    }
    if form.is_valid():
        try:
            est["estimate"] = run_estimate(what, form.cleaned_data)
        except JobError as exc:
            est["error"] = str(exc)
    if request.htmx:
        return render(request, "judging/runs/runs.html#estimate", {"est": est})
    return render(request, "judging/runs/runs.html", _context({what: form}, est=est))


@access.role_required(access.ADMIN)
@require_POST
def runs_launch(request: HttpRequest) -> HttpResponse:
    what, form = _bound(request)
    if not form.is_valid():
        return render(request, "judging/runs/runs.html", _context({what: form}), status=400)
    try:
        job = run_launch(user=request.user, what=what, data=form.cleaned_data)
    except JobError as exc:
        messages.error(request, str(exc))
        return redirect("judging_runs")
    except Unavailable as exc:
        messages.error(request, exc.message)
        return render(request, "judging/runs/runs.html", _context({what: form}), status=exc.status)
    messages.success(request, f"Job {job.pk} launched with {job.items_total} item(s).")
    return redirect("job", job_id=job.pk)


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
    )
