"""Judging runs (admins): launch response collection and judge jobs, with an estimate of the
calls, tokens and cost first. The jobs then run and are watched in the job console (/jobs/).

Each view checks the role, validates its form, calls at most one service, renders. Estimate
and launch read the same form, so what is launched is what was estimated (the launch form
carries the estimated fields back as hidden inputs).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings as django_settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core import access
from core.errors import Unavailable
from llm.jobs import OVER, JobError
from llm.launchers import parse_ids
from llm.models import Job, Provider
from llm.views import STOP_POLLING

from ..models import EvaluatedModel, Judge, Release, Setting
from ..releases.selectors import release_versions
from . import llm_jobs
from .evaluate import (
    EvaluateError,
    evaluate_estimate,
    evaluate_launch,
    evaluate_plan,
    evaluate_progress,
    evaluate_result,
    plan_of,
)
from .services import question_ids, run_estimate, run_launch

RECENT_JOBS = 20


class _Scoped(forms.Form):
    ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Only these images (source ids, one per line; empty: every final question)",
    )
    fresh = forms.BooleanField(required=False)

    def clean_ids(self) -> list[int] | None:
        return question_ids(parse_ids(self.cleaned_data.get("ids") or ""))


class _JudgeSelect(forms.Select):
    """The judges, each option carrying its model's provider (data-provider), so that the page
    offers Gemini's Batch API only beside a judge on Gemini (app.js, data-only-for-provider)."""

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        judge = getattr(value, "instance", None)
        if judge is not None and judge.llm_model is not None:
            option["attrs"]["data-provider"] = judge.llm_model.provider
        return option


class CollectForm(_Scoped):
    # Forwards: what and how first, the narrowing and the cache last.
    field_order = ["model", "setting", "ids", "fresh"]

    model = forms.ModelChoiceField(
        EvaluatedModel.objects.filter(llm_model__isnull=False),
        label="Evaluated model",
        empty_label=None,
    )
    setting = forms.ChoiceField(choices=Setting.choices)
    fresh = forms.BooleanField(
        required=False,
        label="Fresh calls: ask the model again instead of answering from the ledger's cache "
        "(questions it has answered are not asked again)",
    )


class JudgeForm(_Scoped):
    field_order = ["judge", "models", "settings", "release", "batch", "ids", "fresh"]

    judge = forms.ModelChoiceField(
        Judge.objects.filter(llm_model__isnull=False).select_related("llm_model"),
        empty_label=None,
        widget=_JudgeSelect,
    )
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
    fresh = forms.BooleanField(
        required=False,
        label="Fresh calls for the checks still without a verdict: no copy of an earlier "
        "verdict with the same key, no answer from the ledger's cache (a verdict once given "
        "is kept: to judge everything again, add a judge under a new name)",
    )
    batch = forms.BooleanField(
        required=False,
        widget=forms.CheckboxInput(attrs={"data-only-for-provider": Provider.GEMINI}),
        label="Through Gemini's Batch API (half the price; results within a day, asked for "
        f"every {django_settings.LLM_BATCH_POLL_SECONDS} seconds)",
    )
    release = forms.ModelChoiceField(
        Release.objects.all(),
        to_field_name="name",
        required=False,
        empty_label="Working draft (each question's final rubric)",
        label="On the rubric versions of",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The select whose options say each judge's provider, by its name in the page.
        self.fields["batch"].widget.attrs["data-provider-of"] = self.add_prefix("judge")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # A release's questions on the rubric versions it froze; none: the final versions.
        release = data.get("release")
        data["versions"] = release_versions(release) if release is not None else None
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


class EvaluateForm(forms.Form):
    """The page's evaluate run: the same plan as `manage.py evaluate` and the API."""

    model = forms.ModelChoiceField(
        EvaluatedModel.objects.all(), to_field_name="name", label="Evaluated model"
    )
    release = forms.ModelChoiceField(
        Release.objects.order_by("-created_at", "-id"), to_field_name="name", label="Release"
    )
    settings = forms.MultipleChoiceField(
        choices=Setting.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Settings (none ticked: both)",
    )
    judges = forms.ModelMultipleChoiceField(
        Judge.objects.all(),
        to_field_name="name",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Judges (none ticked: every judge that scored the release and calls a model)",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        try:
            data["plan"] = evaluate_plan(
                model=data["model"].name,
                release=data["release"].name,
                settings=data.get("settings") or [],
                judges=[j.name for j in data.get("judges") or []],
            )
        except EvaluateError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.message)
        return data


def _context(forms_: dict[str, forms.Form] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "collect_form": (forms_ or {}).get("collect") or CollectForm(prefix="collect"),
        "judge_form": (forms_ or {}).get("judge") or JudgeForm(prefix="judge"),
        "evaluate_form": (forms_ or {}).get("evaluate") or EvaluateForm(prefix="evaluate"),
        "evaluated": EvaluatedModel.objects.select_related("llm_model"),
        "judges": Judge.objects.select_related("llm_model"),
        "recent": Job.objects.filter(kind__in=[llm_jobs.COLLECT, llm_jobs.JUDGE, llm_jobs.EVALUATE])
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


# --- evaluate a model on a release ------------------------------------------------------------


def _carry(request: HttpRequest) -> list[tuple[str, str]]:
    """The fields the launch form sends back: exactly what was estimated."""
    return [
        (key, value)
        for key in request.POST
        if key != "csrfmiddlewaretoken"
        for value in request.POST.getlist(key)
    ]


@access.role_required(access.ADMIN)
@require_POST
def evaluate_estimate_view(request: HttpRequest) -> HttpResponse:
    """The run's estimate and a Launch button (htmx: the evaluate estimate partial)."""
    form = EvaluateForm(request.POST, prefix="evaluate")
    est: dict[str, Any] = {"form": form, "error": "", "estimate": None, "carry": _carry(request)}
    if form.is_valid():
        try:
            est["estimate"] = evaluate_estimate(form.cleaned_data["plan"])
        except EvaluateError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except JobError as exc:
            est["error"] = str(exc)
    # Each error with the label of the field at fault, as the form shows it.
    est["errors"] = [
        (str(form.fields[name].label) if name in form.fields else "", message)
        for name, messages_ in form.errors.items()
        for message in messages_
    ]
    if request.htmx:
        return render(request, "judging/runs/runs.html#evaluate_estimate", {"ev": est})
    return render(request, "judging/runs/runs.html", _context({"evaluate": form}, ev=est))


@access.role_required(access.ADMIN)
@require_POST
def evaluate_launch_view(request: HttpRequest) -> HttpResponse:
    form = EvaluateForm(request.POST, prefix="evaluate")
    if not form.is_valid():
        return render(request, "judging/runs/runs.html", _context({"evaluate": form}), status=400)
    try:
        job = evaluate_launch(user=request.user, plan=form.cleaned_data["plan"])
    except EvaluateError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return render(request, "judging/runs/runs.html", _context({"evaluate": form}), status=400)
    except JobError as exc:
        messages.error(request, str(exc))
        return redirect("judging_runs")
    except Unavailable as exc:
        messages.error(request, exc.message)
        return render(
            request, "judging/runs/runs.html", _context({"evaluate": form}), status=exc.status
        )
    messages.success(request, f"Job {job.pk} launched with {job.items_total} item(s).")
    return redirect("judging_evaluation", job_id=job.pk)


@access.role_required(access.ADMIN)
@require_GET
def evaluation_page(request: HttpRequest, job_id: int) -> HttpResponse:
    """An evaluate run: its job's bar, each step's counts, and once it is over the result."""
    job = get_object_or_404(Job, pk=job_id, kind=llm_jobs.EVALUATE)
    plan = plan_of(job)
    over = job.status in OVER
    context = {
        "job": job,
        "plan": plan,
        "over": over,
        "steps": evaluate_progress(plan),
        "result": evaluate_result(plan) if over else None,
    }
    if request.htmx:
        return render(
            request,
            "judging/runs/evaluation.html#progress",
            context,
            status=STOP_POLLING if over else 200,
        )
    return render(request, "judging/runs/evaluation.html", context)
