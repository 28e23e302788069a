"""The releases API (admins): list and cut releases, read one with its scores, and the diff of
two releases or a release and the working draft ("draft"). Refusals are domain errors, answered
with the API's one error body by core.http.api_exception_handler."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.errors import InvalidInput, NotFound
from core.http import ErrorSerializer, rendered

from ..leaderboard.api import LeaderboardRowSerializer, requested_setting
from ..models import RELEASE_NAME_MAX, RELEASE_NOTES_MAX, Judge, Release, Setting
from .diff import release_diff
from .scores import release_board
from .selectors import release_named, releases
from .services import create_release

ADMINS = access.role_required(access.ADMIN, message="Only admins read and cut releases.")
ERRORS = dict.fromkeys((400, 401, 403, 404), ErrorSerializer)
DRAFT_WORD = "draft"


# "lambda" is a keyword, so the class is built with type(): its fields are the JSON's keys.
ScoringSerializer = type(
    "ScoringSerializer",
    (serializers.Serializer,),
    {
        "lambda": serializers.FloatField(help_text="credit of partially meets"),
        "mu": serializers.FloatField(help_text="score of contradicts"),
        "weights": serializers.ListField(
            child=serializers.FloatField(), help_text="answer_critical, valuable, context"
        ),
    },
)


class ReleaseSerializer(serializers.Serializer):
    name = serializers.CharField()
    notes = serializers.CharField()
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField(allow_null=True, help_text="the admin's user name")
    content_hash = serializers.CharField(help_text="sha256 of the release's canonical record")
    questions = serializers.IntegerField()
    domains = serializers.ListField(child=serializers.CharField())
    scoring = ScoringSerializer()


class ReleaseCreateSerializer(serializers.Serializer):
    name = serializers.CharField(
        max_length=RELEASE_NAME_MAX,
        help_text="letters, digits, spaces and . _ - + ( ); e.g. v1.0",
    )
    notes = serializers.CharField(
        max_length=RELEASE_NOTES_MAX, required=False, allow_blank=True, default=""
    )


class ReleaseEstimateSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=20, decimal_places=8, coerce_to_string=False)
    model = serializers.CharField()


class ReleaseBoardSerializer(serializers.Serializer):
    judge = serializers.CharField()
    setting = serializers.ChoiceField(choices=Setting.values)
    rows = LeaderboardRowSerializer(many=True)
    pending = serializers.IntegerField(help_text="responses waiting for verdicts on the release")
    estimate = ReleaseEstimateSerializer(
        allow_null=True,
        help_text="the judge run that would fill them; null: none needed or none possible",
    )
    estimate_note = serializers.CharField()


class ReleaseDetailSerializer(ReleaseSerializer):
    boards = ReleaseBoardSerializer(many=True, help_text="per judge and setting with responses")


class ReleaseCheckChangeSerializer(serializers.Serializer):
    check = serializers.CharField(help_text="the check id, as the rubric numbers it")
    change = serializers.ChoiceField(choices=["added", "removed", "reworded", "re-tiered"])
    tier = serializers.CharField()
    text = serializers.CharField()
    tier_before = serializers.CharField()
    text_before = serializers.CharField()


class QuestionChangeSerializer(serializers.Serializer):
    source_id = serializers.CharField()
    checks = ReleaseCheckChangeSerializer(many=True)
    added = serializers.IntegerField()
    removed = serializers.IntegerField()
    reworded = serializers.IntegerField()
    re_tiered = serializers.IntegerField(source="re-tiered")


class ShiftSerializer(serializers.Serializer):
    judge = serializers.CharField()
    setting = serializers.ChoiceField(choices=Setting.values)
    model = serializers.CharField()
    score_a = serializers.FloatField(allow_null=True)
    score_b = serializers.FloatField(allow_null=True)
    questions = serializers.IntegerField(help_text="shared questions scored on both sides")
    change = serializers.FloatField(allow_null=True, help_text="mean paired B - A, x100")
    ci_low = serializers.FloatField(allow_null=True, help_text="95% paired t interval, x100")
    ci_high = serializers.FloatField(allow_null=True)
    p = serializers.FloatField(allow_null=True)


class CheckTotalsSerializer(serializers.Serializer):
    added = serializers.IntegerField()
    removed = serializers.IntegerField()
    reworded = serializers.IntegerField()
    re_tiered = serializers.IntegerField(source="re-tiered")


class DiffSerializer(serializers.Serializer):
    a = serializers.CharField(help_text='a release name or "working draft"')
    b = serializers.CharField()
    questions_added = serializers.ListField(child=serializers.CharField())
    questions_dropped = serializers.ListField(child=serializers.CharField())
    questions_shared = serializers.IntegerField()
    questions_unchanged = serializers.IntegerField()
    questions_changed = QuestionChangeSerializer(many=True)
    checks = CheckTotalsSerializer()
    scoring_a = ScoringSerializer()
    scoring_b = ScoringSerializer()
    models = ShiftSerializer(many=True)


def _scoring(release: Release) -> dict:
    s = release.scoring_settings()
    return {"lambda": s.lambda_, "mu": s.mu, "weights": list(s.weights)}


def release_dict(release: Release, questions: int) -> dict:
    return {
        "name": release.name,
        "notes": release.notes,
        "created_at": release.created_at,
        "created_by": release.created_by.username if release.created_by else None,
        "content_hash": release.content_hash,
        "questions": questions,
        "domains": release.domains,
        "scoring": _scoring(release),
    }


def _estimate(found) -> dict | None:
    e = found.estimate
    if e is None:
        return None
    return {
        "calls": e.calls,
        "tokens_in": e.tokens_in,
        "tokens_out": e.tokens_out,
        "cost": e.cost,
        "model": e.model,
    }


def _named(name: str, param: str | None = None) -> Release:
    release = release_named(name)
    if release is None:
        message = f"There is no release named {name}."
        raise InvalidInput(message, param) if param else NotFound(message)
    return release


@extend_schema(
    methods=["GET"],
    summary="Every release, newest first (admins)",
    responses={200: ReleaseSerializer(many=True), **ERRORS},
)
@extend_schema(
    methods=["POST"],
    summary="Cut a release of the current state (admins)",
    request=ReleaseCreateSerializer,
    responses={201: ReleaseSerializer, 409: ErrorSerializer, **ERRORS},
    description="Freezes every final question not dropped that has a frozen rubric version, on "
    "that version, with the scoring settings in force. 409: the name is taken.",
)
@api_view(["GET", "POST"])
@ADMINS
def release_list(request: Request) -> Response:
    if request.method == "POST":
        if not isinstance(request.data, dict):
            raise InvalidInput("The body must be a JSON object.")
        body = ReleaseCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        release = create_release(
            body.validated_data["name"], body.validated_data["notes"], by=request.user
        )
        return rendered(
            ReleaseSerializer, release_dict(release, release.questions.count()), status=201
        )
    found = releases().select_related("created_by")
    return rendered(ReleaseSerializer, [release_dict(r, r.n_questions) for r in found], many=True)


@extend_schema(
    summary="A release: what it holds and each judge's scores on it (admins)",
    parameters=[
        OpenApiParameter(
            "setting", OpenApiTypes.STR, enum=Setting.values, description="default: both"
        )
    ],
    responses={200: ReleaseDetailSerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def release_detail(request: Request, name: str) -> Response:
    release = _named(name)
    settings = [requested_setting(request)] if "setting" in request.query_params else Setting.values
    boards = []
    for judge in Judge.objects.select_related("llm_model").order_by("name"):
        for setting in settings:
            found = release_board(release, judge=judge, setting=setting)
            if found.board.rows:
                boards.append(
                    {
                        "judge": judge.name,
                        "setting": setting,
                        "rows": [row.as_dict() for row in found.board.rows],
                        "pending": found.pending,
                        "estimate": _estimate(found),
                        "estimate_note": found.estimate_note,
                    }
                )
    data = release_dict(release, release.questions.count()) | {"boards": boards}
    return rendered(ReleaseDetailSerializer, data)


@extend_schema(
    summary="What changed from release A to B (admins)",
    parameters=[
        OpenApiParameter("a", OpenApiTypes.STR, required=True, description='a release, or "draft"'),
        OpenApiParameter("b", OpenApiTypes.STR, required=True, description='a release, or "draft"'),
        OpenApiParameter("judge", OpenApiTypes.STR, description="only this judge; default: all"),
        OpenApiParameter(
            "setting", OpenApiTypes.STR, enum=Setting.values, description="default: both"
        ),
    ],
    responses={200: DiffSerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def release_diff_detail(request: Request) -> Response:
    scopes = []
    for param in ("a", "b"):
        name = request.query_params.get(param)
        if not name:
            raise InvalidInput(f'{param} is required: a release name, or "draft".', param)
        scopes.append(None if name == DRAFT_WORD else _named(name, param))
    judges = None
    if "judge" in request.query_params:
        judge = Judge.objects.filter(name=request.query_params["judge"]).first()
        if judge is None:
            raise InvalidInput(f"unknown judge {request.query_params['judge']!r}", "judge")
        judges = [judge]
    settings = [requested_setting(request)] if "setting" in request.query_params else None
    diff = release_diff(scopes[0], scopes[1], judges=judges, settings=settings)
    return rendered(DiffSerializer, diff.as_dict())
