"""The judging runs' API (admins): collect responses and judge them, as /judging/runs/ does,
estimated first; the launched job is then watched, cancelled and retried in the jobs API."""

from __future__ import annotations

from typing import Any

from django import forms
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core.http import ErrorSerializer, rendered
from llm.api import QUEUE_DOWN, JobSerializer, admins_only, job_dict, refused, validated
from llm.jobs import JobError
from llm.models import Provider

from ..models import EvaluatedModel, Judge, Setting
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
        default=False, help_text="ignore the ledger's cache and earlier verdicts"
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
