"""The judging runs' API (admins): collect responses and judge them, as /judging/runs/ does,
estimated first; the launched job is then watched, cancelled and retried in the jobs API."""

from __future__ import annotations

from typing import Any

from django import forms
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core.http import ErrorSerializer, rendered
from llm.api import QUEUE_DOWN, JobSerializer, admins_only, job_dict, refused, validated
from llm.jobs import OVER, JobError
from llm.models import Job, Provider

from ..models import EvaluatedModel, Judge, Setting
from . import llm_jobs
from .evaluate import (
    EvaluateError,
    evaluate_estimate,
    evaluate_launch,
    evaluate_plan,
    evaluate_progress,
    evaluate_result,
    plan_of,
    result_dict,
)
from .services import question_ids, run_estimate, run_launch


class RunSerializer(serializers.Serializer):
    what = serializers.ChoiceField(choices=["collect", "judge"])
    model = serializers.SlugRelatedField(
        slug_field="name",
        required=False,
        queryset=EvaluatedModel.objects.filter(llm_model__isnull=False),
        help_text="collect: the evaluated model (one with an LLM model to call)",
    )
    setting = serializers.ChoiceField(
        choices=Setting.values, required=False, help_text="collect: multimodal or text_only"
    )
    judge = serializers.SlugRelatedField(
        slug_field="name",
        required=False,
        queryset=Judge.objects.filter(llm_model__isnull=False),
        help_text="judge: the judge (one with an LLM model to call)",
    )
    models = serializers.SlugRelatedField(
        slug_field="name",
        many=True,
        required=False,
        queryset=EvaluatedModel.objects.all(),
        help_text="judge: only these evaluated models (empty: all)",
    )
    # Plain strings, checked in validate: a second enum of the same choices would be a second
    # name for one set in the schema.
    settings = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="judge: only these settings (empty: both)",
    )
    ids = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="only the final questions of these images' source ids",
    )
    fresh = serializers.BooleanField(
        default=False,
        help_text="fresh calls for what has no answer or verdict yet: nothing from the "
        "ledger's cache, no copy of an earlier verdict with the same key (a verdict once given "
        "is kept; to judge again, add a judge under a new name)",
    )
    batch = serializers.BooleanField(default=False, help_text="judge: Gemini's Batch API")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        required = ("model", "setting") if attrs["what"] == "collect" else ("judge",)
        for name in required:
            if attrs.get(name) is None:
                raise serializers.ValidationError({name: f"{attrs['what']} needs {name}."})
        try:
            attrs["ids"] = question_ids(list(dict.fromkeys(attrs.get("ids") or [])))
        except forms.ValidationError as exc:
            raise serializers.ValidationError({"ids": exc.messages[0]}) from exc
        judge = attrs.get("judge")
        if attrs["batch"] and judge is not None and judge.llm_model.provider != Provider.GEMINI:
            raise serializers.ValidationError(
                {"batch": f"The Batch API is Gemini's; {judge.name} calls {judge.llm_model.name}."}
            )
        unknown = [s for s in attrs.get("settings") or [] if s not in Setting.values]
        if unknown:
            raise serializers.ValidationError(
                {
                    "settings": f"unknown setting {unknown[0]!r}; "
                    f"expected {', '.join(Setting.values)}"
                }
            )
        attrs.setdefault("models", [])
        attrs["settings"] = attrs.get("settings") or []
        return attrs


class RunEstimateSerializer(serializers.Serializer):
    items = serializers.IntegerField()
    calls = serializers.IntegerField(help_text="at most: copies by key and the cache make it fewer")
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    # Not rounded: the estimate's cost is exact (tokens times the price per million).
    cost = serializers.DecimalField(max_digits=None, decimal_places=None, coerce_to_string=False)
    model = serializers.CharField()
    note = serializers.CharField()


class RunLaunchedSerializer(serializers.Serializer):
    job = JobSerializer(help_text="as GET /api/jobs/{id}/ shows it")
    estimate = RunEstimateSerializer()


def _run_planned(request: Request) -> tuple[Any, Response | None]:
    if (denied := admins_only(request)) is not None:
        return None, denied
    data, invalid = validated(RunSerializer, request)
    if invalid is not None:
        return None, invalid
    assert data is not None
    try:
        return (data, run_estimate(data["what"], data)), None
    except JobError as exc:
        return None, refused(str(exc), "what", code=409)


@extend_schema(
    summary="Estimate a judging run (admins): collect responses or judge them",
    request=RunSerializer,
    responses={
        200: RunEstimateSerializer,
        400: ErrorSerializer,
        403: ErrorSerializer,
        409: ErrorSerializer,
    },
    description="The estimate of /judging/runs/. 409: nothing left to do in scope.",
)
@api_view(["POST"])
def run_estimate_view(request: Request) -> Response:
    planned, refusal = _run_planned(request)
    return refusal if refusal is not None else rendered(RunEstimateSerializer, planned[1])


@extend_schema(
    summary="Launch a judging run (admins), estimated first",
    request=RunSerializer,
    responses={
        201: RunLaunchedSerializer,
        400: ErrorSerializer,
        403: ErrorSerializer,
        409: ErrorSerializer,
        503: OpenApiResponse(ErrorSerializer, description=QUEUE_DOWN),
    },
    description='Answers `{"job", "estimate"}`: the job as GET /api/jobs/{id}/ '
    "shows it (watch, cancel and retry it there), and its estimate.",
)
@api_view(["POST"])
def run_launch_view(request: Request) -> Response:
    planned, refusal = _run_planned(request)
    if refusal is not None:
        return refusal
    data, estimate = planned
    try:
        job = run_launch(user=request.user, what=data["what"], data=data)
    except JobError as exc:
        return refused(str(exc), "what", code=409)
    job.refresh_from_db()  # a worker may have claimed items since the commit: one state shown
    return rendered(RunLaunchedSerializer, {"job": job_dict(job), "estimate": estimate}, status=201)


# --- evaluate a model on a release -----------------------------------------------------------


class EvaluateSerializer(serializers.Serializer):
    # Names, checked by evaluate_plan (which says what is wrong in the words the command and
    # the page use).
    model = serializers.CharField(max_length=100, help_text="the evaluated model's name")
    release = serializers.CharField(max_length=40, help_text="the release's name, e.g. v1.0")
    settings = serializers.ListField(
        child=serializers.CharField(max_length=20),
        required=False,
        max_length=2,
        help_text="multimodal and/or text_only (empty: both)",
    )
    judges = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        max_length=50,
        help_text="judges' names (empty: every judge that has scored the release and calls "
        "a model)",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            attrs["plan"] = evaluate_plan(
                model=attrs["model"],
                release=attrs["release"],
                settings=attrs.get("settings") or [],
                judges=attrs.get("judges") or [],
            )
        except EvaluateError as exc:
            raise serializers.ValidationError({exc.field or "model": exc.message}) from exc
        return attrs


class EvaluateStepSerializer(serializers.Serializer):
    step = serializers.CharField(help_text="collect (the answers) or judge (one judge's verdicts)")
    who = serializers.CharField(help_text="the evaluated model (collect) or the judge")
    setting = serializers.ChoiceField(choices=Setting.values)
    model = serializers.CharField(help_text="the LLM model it calls")
    responses = serializers.IntegerField(help_text="answers to collect, or responses to judge")
    calls = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=None, decimal_places=None, coerce_to_string=False)


class QuotaSerializer(serializers.Serializer):
    model = serializers.CharField()
    calls = serializers.IntegerField()
    tokens = serializers.IntegerField()
    requests_per_minute = serializers.IntegerField(help_text="0: no limit")
    tokens_per_minute = serializers.IntegerField(help_text="0: no limit")
    seconds = serializers.FloatField(
        allow_null=True, help_text="at its limits; null: no limit configured"
    )


class EvaluateEstimateSerializer(serializers.Serializer):
    items = serializers.IntegerField(help_text="(setting, question) pairs to do")
    calls = serializers.IntegerField(help_text="at most: copies by key and the cache make it fewer")
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=None, decimal_places=None, coerce_to_string=False)
    seconds = serializers.FloatField(
        allow_null=True,
        help_text="the time at the models' quotas (the slowest model's share; the steps "
        "overlap); null: no model has a limit",
    )
    steps = EvaluateStepSerializer(many=True)
    quotas = QuotaSerializer(many=True)
    note = serializers.CharField()


class StepProgressSerializer(serializers.Serializer):
    label = serializers.CharField()
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class AuditedSerializer(serializers.Serializer):
    estimate = serializers.FloatField()
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    pairs = serializers.IntegerField()
    questions = serializers.IntegerField()


class NeighbourSerializer(serializers.Serializer):
    model = serializers.CharField()
    rank = serializers.IntegerField()
    questions = serializers.IntegerField(help_text="questions both were scored on")
    difference = serializers.FloatField(
        allow_null=True, help_text="this model minus the other, x100"
    )
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    p_holm = serializers.FloatField(allow_null=True)
    significant = serializers.BooleanField()


class EvaluateRowSerializer(serializers.Serializer):
    setting = serializers.ChoiceField(choices=Setting.values)
    judge = serializers.CharField()
    gamut = serializers.FloatField(allow_null=True, help_text="x100")
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    audited = AuditedSerializer(allow_null=True, help_text="corrected by the human audit")
    rank = serializers.IntegerField(allow_null=True)
    ranked = serializers.IntegerField(help_text="models with a score on this board")
    questions = serializers.IntegerField()
    scored = serializers.IntegerField()
    pending = serializers.IntegerField()
    failed = serializers.IntegerField()
    missing = serializers.IntegerField()
    neighbours = NeighbourSerializer(many=True)


class EvaluationSerializer(serializers.Serializer):
    job = JobSerializer(help_text="as GET /api/jobs/{id}/ shows it")
    model = serializers.CharField()
    release = serializers.CharField()
    settings = serializers.ListField(
        child=serializers.CharField(), help_text="multimodal and/or text_only"
    )
    judges = serializers.ListField(child=serializers.CharField())
    steps = StepProgressSerializer(many=True)
    result = EvaluateRowSerializer(
        many=True, allow_null=True, help_text="null until the job is over"
    )


class EvaluateLaunchedSerializer(serializers.Serializer):
    job = JobSerializer(help_text="as GET /api/jobs/{id}/ shows it")
    estimate = EvaluateEstimateSerializer()
    evaluation = serializers.CharField(help_text="the run's own answer: GET it for the result")


def _evaluate_planned(request: Request) -> tuple[Any, Response | None]:
    if (denied := admins_only(request)) is not None:
        return None, denied
    data, invalid = validated(EvaluateSerializer, request)
    if invalid is not None:
        return None, invalid
    assert data is not None
    plan = data["plan"]
    try:
        return (plan, evaluate_estimate(plan)), None
    except EvaluateError as exc:
        return None, refused(f"{exc.field}: {exc.message}", exc.field)
    except JobError as exc:
        return None, refused(str(exc), "model", code=409)


@extend_schema(
    summary="Estimate an evaluate run (admins): a model on a release",
    request=EvaluateSerializer,
    responses={
        200: EvaluateEstimateSerializer,
        400: ErrorSerializer,
        403: ErrorSerializer,
        409: ErrorSerializer,
    },
    description="What `manage.py evaluate --estimate-only` prints: the answers to collect and "
    "the verdicts to ask, per step and setting, with calls, tokens, cost and the time at the "
    "models' quotas. 409: the model has every answer and verdict on the release already.",
)
@api_view(["POST"])
def evaluate_estimate_api(request: Request) -> Response:
    planned, refusal = _evaluate_planned(request)
    return refusal if refusal is not None else rendered(EvaluateEstimateSerializer, planned[1])


@extend_schema(
    summary="Launch an evaluate run (admins), estimated first",
    request=EvaluateSerializer,
    responses={
        201: EvaluateLaunchedSerializer,
        400: ErrorSerializer,
        403: ErrorSerializer,
        409: ErrorSerializer,
        503: OpenApiResponse(ErrorSerializer, description=QUEUE_DOWN),
    },
    description="One job: each (setting, question) is answered, then judged. GET "
    "`evaluation` for each step's progress and, once over, the model's row on each board.",
)
@api_view(["POST"])
def evaluate_launch_api(request: Request) -> Response:
    planned, refusal = _evaluate_planned(request)
    if refusal is not None:
        return refusal
    plan, estimate = planned
    try:
        job = evaluate_launch(user=request.user, plan=plan)
    except JobError as exc:
        return refused(str(exc), "model", code=409)
    job.refresh_from_db()
    return rendered(
        EvaluateLaunchedSerializer,
        {
            "job": job_dict(job),
            "estimate": estimate,
            "evaluation": reverse("api_judging_evaluation", args=[job.pk]),
        },
        status=201,
    )


@extend_schema(
    summary="An evaluate run (admins): each step's progress, and the result once over",
    responses={200: EvaluationSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
)
@api_view(["GET"])
def evaluation_api(request: Request, job_id: int) -> Response:
    if (denied := admins_only(request)) is not None:
        return denied
    job = get_object_or_404(Job, pk=job_id, kind=llm_jobs.EVALUATE)
    plan = plan_of(job)
    over = job.status in OVER
    return rendered(
        EvaluationSerializer,
        {
            "job": job_dict(job),
            "model": plan.model.name,
            "release": plan.release.name,
            "settings": plan.settings,
            "judges": [j.name for j in plan.judges],
            "steps": evaluate_progress(plan),
            "result": [result_dict(r) for r in evaluate_result(plan)] if over else None,
        },
    )
