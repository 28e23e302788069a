"""`GET /api/diversity/` (admins): the question-diversity report of one scope as the background
job last computed it, with when and how long (the same JSON as the page's `?format=json` holds
per scope); `POST /api/diversity/` starts a new computation (202 with the job, 409 while one
runs)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.errors import Conflict, NotFound
from core.http import ErrorSerializer

from . import diversity_jobs
from .diversity_report import SCOPES


class FiguresSerializer(serializers.Serializer):
    questions = serializers.IntegerField()
    templates = serializers.IntegerField()
    top5_share = serializers.FloatField(
        allow_null=True, help_text="share of the questions in the 5 largest templates"
    )
    top20_share = serializers.FloatField(allow_null=True)
    opening_trigrams = serializers.IntegerField(help_text="distinct first three words")
    entropy_bits = serializers.FloatField(
        allow_null=True, help_text="Shannon entropy of the template sizes"
    )
    normalized_entropy = serializers.FloatField(
        allow_null=True, help_text="entropy / log2(questions)"
    )


class DomainFiguresSerializer(FiguresSerializer):
    domain = serializers.CharField()


class ExampleSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="source id (final) or candidate id (candidates)")
    text = serializers.CharField()
    domain = serializers.CharField()


class TemplateSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    size = serializers.IntegerField()
    share = serializers.FloatField()
    skeleton = serializers.CharField()
    domains = serializers.DictField(child=serializers.IntegerField())
    examples = ExampleSerializer(many=True)


class SizeSerializer(serializers.Serializer):
    size = serializers.CharField(help_text="questions per template: 1, 2, 3-5, ... 51+")
    templates = serializers.IntegerField()


class MethodSerializer(serializers.Serializer):
    distance_threshold = serializers.FloatField()
    domain_tied_share = serializers.FloatField()


class GuardPromptFiguresSerializer(FiguresSerializer):
    guard_prompt = serializers.CharField(
        help_text='which guard prompt chose the questions: "guard v1", "guard v2", ... or '
        '"promoted by an admin"'
    )


class DiversitySerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=list(SCOPES))
    overall = FiguresSerializer()
    domains = DomainFiguresSerializer(many=True)
    templates = TemplateSerializer(many=True, help_text="the 20 largest")
    size_distribution = SizeSerializer(many=True)
    method = MethodSerializer()
    guard_prompts = GuardPromptFiguresSerializer(
        many=True,
        help_text="final questions: the figures per guard prompt version, on the templates of "
        "all of them (empty for candidates)",
    )
    computed_at = serializers.DateTimeField(help_text="when the background job finished it")
    seconds = serializers.FloatField(help_text="how long reading and analysing this scope took")
    job = serializers.IntegerField(help_text="the job that computed it (GET /api/jobs/<id>/)")


class LaunchedSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    status = serializers.CharField()


class DiversityQuerySerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=list(SCOPES), default="final")


NOT_COMPUTED = (
    "The diversity report has not been computed yet: POST /api/diversity/ (or Recompute on the "
    "Question diversity page) computes it in the background."
)


@extend_schema(
    methods=["GET"],
    summary="Question diversity: templates among the final questions or all candidates (admins)",
    parameters=[OpenApiParameter("scope", enum=list(SCOPES), default="final")],
    responses={
        200: DiversitySerializer,
        400: ErrorSerializer,
        401: ErrorSerializer,
        403: ErrorSerializer,
        404: ErrorSerializer,
    },
)
@extend_schema(
    methods=["POST"],
    summary="Recompute the question-diversity report in the background (admins)",
    request=None,
    responses={
        202: LaunchedSerializer,
        401: ErrorSerializer,
        403: ErrorSerializer,
        409: ErrorSerializer,
        503: ErrorSerializer,
    },
)
@api_view(["GET", "POST"])
@access.role_required(access.ADMIN, message="Only admins read the diversity report.")
def diversity_detail(request: Request) -> Response:
    if request.method == "POST":
        try:
            job = diversity_jobs.launch(request.user)
        except diversity_jobs.AlreadyRunning as exc:
            raise Conflict(f"The report is being computed already (job {exc.job.pk}).") from exc
        return Response({"job": job.pk, "status": job.status}, status=202)
    query = DiversityQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    report = diversity_jobs.with_times(query.validated_data["scope"], diversity_jobs.stored())
    if report is None:
        raise NotFound(NOT_COMPUTED)
    return Response(DiversitySerializer(report).data)
