"""The jobs API (admins): what the job console does, for scripts. Estimate a stage over a scope,
launch it, read a job's progress and failures, cancel it, retry its failed items.

The views call the console's own services (llm/launchers.py for the scope, the estimate and
the launch; llm/jobs.py for progress, cancel and retry), so a script gets exactly what the
page would do. Input is validated by serializers; a refusal is `{"detail", "field"}`.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.http import ErrorSerializer, rendered

from . import jobs, launchers
from .models import Job

JOBS_LISTED = 50
QUEUE_DOWN = "the task queue is unreachable: nothing was launched or saved; try again"
FAILURES_LISTED = 100
SCOPES = ("all", "filter", "ids")


# --- shared by the jobs, judging runs and workspace APIs --------------------------------------


def refused(detail: str, field: str | None = None, *, code: int = 400) -> Response:
    body = {"detail": detail}
    if field:
        body["field"] = field
    return rendered(ErrorSerializer, body, status=code)


def admins_only(request: Request) -> Response | None:
    if not access.is_admin(request.user):
        return refused("Only admins run LLM jobs.", code=403)
    return None


def validated(
    serializer_class: type[serializers.Serializer], request: Request
) -> tuple[dict[str, Any] | None, Response | None]:
    """(the validated body, None), or (None, a 400 naming the first field at fault)."""
    if not isinstance(request.data, dict):
        return None, refused("The body must be a JSON object.")
    serializer = serializer_class(data=request.data)
    if serializer.is_valid():
        return dict(serializer.validated_data), None
    field, messages = next(iter(serializer.errors.items()))
    message = _first(messages)
    if field == "non_field_errors":
        return None, refused(message)
    return None, refused(f"{field}: {message}", field)


def _first(messages: Any) -> str:
    while isinstance(messages, (list, dict)):
        messages = next(iter(messages.values())) if isinstance(messages, dict) else messages[0]
    return str(messages)


# --- shapes -------------------------------------------------------------------------------


class ScopeSerializer(serializers.Serializer):
    stage = serializers.ChoiceField(
        choices=[],
        help_text="a stage key of GET /api/jobs/stages/ (generate, guard, build, refine1, refine2)",
    )
    scope = serializers.ChoiceField(
        choices=SCOPES,
        default="all",
        help_text="all: every eligible item; filter: by domain and/or state; ids: the source "
        "ids given",
    )
    domain = serializers.CharField(required=False, allow_blank=True, default="")
    state = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="one of the stage's states (GET /api/jobs/stages/)",
    )
    ids = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        default=list,
        help_text="source ids (scope ids)",
    )
    fresh = serializers.BooleanField(
        default=False, help_text="every call goes to the model: nothing from the ledger's cache"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The registry is filled at start-up, after this module is imported.
        self.fields["stage"].choices = [launcher.key for launcher in launchers.all_launchers()]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["scope"] == "ids" and not attrs["ids"]:
            raise serializers.ValidationError({"ids": "Give the source ids of scope ids."})
        if attrs["scope"] != "ids" and attrs["ids"]:
            raise serializers.ValidationError({"ids": "Source ids go with scope ids only."})
        return attrs


class EstimateSerializer(serializers.Serializer):
    stage = serializers.CharField()
    model = serializers.CharField(help_text="the LLM model the stage is configured to call")
    items = serializers.IntegerField(help_text="eligible items a launch would create")
    matched = serializers.IntegerField(help_text="source ids given (or selected by the filter)")
    skipped = serializers.IntegerField(help_text="of those, left out as not eligible")
    calls_min = serializers.IntegerField()
    calls_max = serializers.IntegerField()
    tokens_in_min = serializers.IntegerField()
    tokens_in_max = serializers.IntegerField()
    tokens_out_min = serializers.IntegerField()
    tokens_out_max = serializers.IntegerField()
    # Not rounded: an estimate's cost is exact (tokens times the price per million).
    cost_min = serializers.DecimalField(
        max_digits=None, decimal_places=None, coerce_to_string=False
    )
    cost_max = serializers.DecimalField(
        max_digits=None, decimal_places=None, coerce_to_string=False
    )


class JobFailureSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="the item's key (a source id, or q<question id>)")
    error = serializers.CharField()
    attempts = serializers.IntegerField()


class JobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["queued", "running", "waiting_for_quota", "done", "cancelled", "failed"]
    )
    over = serializers.BooleanField(help_text="done, cancelled or failed: nothing more runs")
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    remaining = serializers.IntegerField()
    running = serializers.IntegerField()
    waiting = serializers.IntegerField(help_text="deferred items (a provider's batch)")
    percent = serializers.FloatField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=8, coerce_to_string=False)
    params = serializers.DictField(help_text="model, fresh, and the stage's own parameters")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    resume_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField()
    failures = JobFailureSerializer(many=True, help_text="the latest failed items, newest first")
    page = serializers.CharField(help_text="the job's page in the console")


class LaunchedJobSerializer(serializers.Serializer):
    job = JobSerializer()
    estimate = EstimateSerializer()


class RetriedJobSerializer(serializers.Serializer):
    retried = serializers.IntegerField()
    job = JobSerializer()


class StageSerializer(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()
    scope_noun = serializers.CharField()
    filterable = serializers.BooleanField()
    states = serializers.ListField(child=serializers.CharField())


def job_dict(job: Job, *, failures: int = FAILURES_LISTED) -> dict[str, Any]:
    progress = jobs.job_progress(job, failures=failures)
    progress["failures"] = [
        {"key": f["key"], "error": f["last_error"], "attempts": f["attempts"]}
        for f in progress["failures"]
    ]
    progress.update(
        over=job.status in jobs.OVER, params=job.params, page=reverse("job", args=[job.pk])
    )
    return progress


def _estimate_dict(
    launcher: launchers.Launcher, est: launchers.Estimate, matched: int, skipped: int
) -> dict[str, Any]:
    return {
        "stage": launcher.key,
        "model": est.model,
        "items": est.items,
        "matched": matched,
        "skipped": skipped,
        "calls_min": est.calls_min,
        "calls_max": est.calls_max,
        "tokens_in_min": est.tokens_in_min,
        "tokens_in_max": est.tokens_in_max,
        "tokens_out_min": est.tokens_out_min,
        "tokens_out_max": est.tokens_out_max,
        "cost_min": est.cost_min,
        "cost_max": est.cost_max,
    }


def scope_of(launcher: launchers.Launcher, data: dict[str, Any]) -> launchers.Scope:
    """The console's scope from the API's (or the command's) fields."""
    scope = {"all": "all", "filter": "filter", "ids": "chosen"}[data["scope"]]
    return launchers.scope_from(
        launcher,
        scope=scope,
        ids_text="\n".join(data["ids"]),
        domain=data.get("domain", ""),
        state=data.get("state", ""),
    )


def _scope_field(scope: launchers.Scope) -> str:
    """The field a refused scope names (the scope's words are the console's)."""
    if scope.unknown:
        return "ids"
    for field in ("state", "domain"):
        if scope.error.startswith(f"Unknown {field}"):
            return field
    return "scope"


_ERRORS = {400: ErrorSerializer, 403: ErrorSerializer}


# --- views --------------------------------------------------------------------------------


@extend_schema(
    summary="The stages a job can be launched for (admins)",
    responses={200: StageSerializer(many=True), 403: ErrorSerializer},
)
@api_view(["GET"])
def stage_list(request: Request) -> Response:
    if (denied := admins_only(request)) is not None:
        return denied
    return rendered(
        StageSerializer,
        [
            {
                "key": x.key,
                "label": x.label,
                "scope_noun": x.scope_noun,
                "filterable": x.filterable,
                "states": [value for value, _ in x.states],
            }
            for x in launchers.all_launchers()
        ],
        many=True,
    )


def _planned(request: Request) -> tuple[Any, Response | None]:
    data, invalid = validated(ScopeSerializer, request)
    if invalid is not None:
        return None, invalid
    assert data is not None
    launcher = launchers.get_launcher(data["stage"])
    assert launcher is not None  # the serializer's choices
    scope = scope_of(launcher, data)
    error = launchers.scope_error(launcher, scope)
    if error:
        return None, refused(error, _scope_field(scope))
    try:
        est, matched, skipped = launchers.scope_estimate(launcher, scope)
    except jobs.JobError as exc:
        return None, refused(str(exc), "stage", code=409)
    return (launcher, scope, data, _estimate_dict(launcher, est, matched, skipped)), None


@extend_schema(
    summary="Estimate a launch (admins): items, calls, tokens and cost",
    request=ScopeSerializer,
    responses={200: EstimateSerializer, 409: ErrorSerializer, **_ERRORS},
    description="The same estimate as the console's. 409: nothing in the scope is "
    "eligible, or the stage has no model configured.",
)
@api_view(["POST"])
def job_estimate(request: Request) -> Response:
    if (denied := admins_only(request)) is not None:
        return denied
    planned, refusal = _planned(request)
    return refusal if refusal is not None else rendered(EstimateSerializer, planned[3])


@extend_schema(
    summary="Launch a stage over a scope (admins)",
    request=ScopeSerializer,
    responses={
        201: LaunchedJobSerializer,
        409: ErrorSerializer,
        503: OpenApiResponse(ErrorSerializer, description=QUEUE_DOWN),
        **_ERRORS,
    },
    description="Estimates first (as POST /api/jobs/estimate/ does, returned beside the job), "
    "then launches exactly that scope. 409: nothing eligible, or no model.",
)
@api_view(["POST"])
def job_launch(request: Request) -> Response:
    if (denied := admins_only(request)) is not None:
        return denied
    planned, refusal = _planned(request)
    if refusal is not None:
        return refusal
    launcher, scope, data, estimate = planned
    try:
        job = launcher.launch(user=request.user, ids=scope.ids, fresh=data["fresh"])
    except jobs.JobError as exc:
        return refused(str(exc), "stage", code=409)
    job.refresh_from_db()  # a worker may have claimed items since the commit: one state shown
    return rendered(
        LaunchedJobSerializer,
        {"job": job_dict(job), "estimate": estimate},
        status=status.HTTP_201_CREATED,
    )


@extend_schema(
    summary="Recent jobs, newest first (admins)",
    parameters=[
        OpenApiParameter("kind", str, description="only jobs of this kind"),
        OpenApiParameter("status", str, description="only in this status"),
    ],
    responses={200: JobSerializer(many=True), 403: ErrorSerializer},
)
@api_view(["GET"])
def job_list(request: Request) -> Response:
    if (denied := admins_only(request)) is not None:
        return denied
    found = Job.objects.all()
    for field in ("kind", "status"):
        if request.query_params.get(field):
            found = found.filter(**{field: request.query_params[field]})
    return rendered(
        JobSerializer, [job_dict(job, failures=0) for job in found[:JOBS_LISTED]], many=True
    )


@extend_schema(
    summary="A job's status, counts, tokens, cost and failures (admins)",
    responses={200: JobSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
)
@api_view(["GET"])
def job_detail(request: Request, job_id: int) -> Response:
    if (denied := admins_only(request)) is not None:
        return denied
    return rendered(JobSerializer, job_dict(get_object_or_404(Job, pk=job_id)))


@extend_schema(
    summary="Cancel a job (admins): pending items will not start",
    request=None,
    responses={
        200: JobSerializer,
        403: ErrorSerializer,
        404: ErrorSerializer,
        409: ErrorSerializer,
    },
)
@api_view(["POST"])
def job_cancel(request: Request, job_id: int) -> Response:
    if (denied := admins_only(request)) is not None:
        return denied
    job = get_object_or_404(Job, pk=job_id)
    try:
        job = jobs.job_cancel(job_id=job.pk)
    except jobs.JobError as exc:
        return refused(str(exc), code=409)
    return rendered(JobSerializer, job_dict(job))


@extend_schema(
    summary="Retry a job's failed items (admins)",
    request=None,
    responses={
        200: RetriedJobSerializer,
        403: ErrorSerializer,
        404: ErrorSerializer,
        409: ErrorSerializer,
        503: OpenApiResponse(ErrorSerializer, description=QUEUE_DOWN),
    },
)
@api_view(["POST"])
def job_retry(request: Request, job_id: int) -> Response:
    if (denied := admins_only(request)) is not None:
        return denied
    job = get_object_or_404(Job, pk=job_id)
    try:
        retried = jobs.job_retry_failed(job_id=job.pk)
    except jobs.JobError as exc:
        return refused(str(exc), code=409)
    job.refresh_from_db()
    return rendered(RetriedJobSerializer, {"retried": retried, "job": job_dict(job)})
