"""The spot checks' API (admins, read-only): each judge's agreement with people, the random
audit's progress and predicted widths, and the judges measured against people; the same JSON as
the spot check pages' `?format=json`."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core.errors import InvalidInput
from core.http import rendered

from ..leaderboard.api import ADMINS, ERRORS
from .audit import audit_report
from .judge_quality import SOURCES, judge_quality
from .services import judge_agreement, spot_check_progress


class AgreementRowSerializer(serializers.Serializer):
    judge = serializers.CharField()
    graded = serializers.IntegerField(help_text="graded spot checks this judge gave a verdict on")
    exact = serializers.IntegerField(help_text="same verdict as the person")
    exact_rate = serializers.FloatField(allow_null=True)
    same_side = serializers.IntegerField(
        help_text="same side: meets or partially meets against missing or contradicts"
    )
    same_side_rate = serializers.FloatField(allow_null=True)


class SpotProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    graded = serializers.IntegerField()
    left = serializers.IntegerField()


class AuditWidthSerializer(serializers.Serializer):
    pairs = serializers.IntegerField(help_text="audit sample size (pairs)")
    per_board = serializers.FloatField(allow_null=True, help_text="pairs per model and setting")
    width = serializers.FloatField(
        allow_null=True, help_text="predicted 95% interval width of a corrected Gamut x100"
    )


class AuditProgressSerializer(serializers.Serializer):
    pairs = serializers.IntegerField(help_text="pairs in the audit")
    graded = serializers.IntegerField(help_text="graded at least once")
    double = serializers.IntegerField(help_text="to be graded by two people")
    graded_twice = serializers.IntegerField()


class AuditSerializer(serializers.Serializer):
    progress = AuditProgressSerializer()
    boards = serializers.IntegerField(help_text="(model, setting) pairs with responses")
    spread_from = serializers.CharField(
        allow_null=True, help_text="audit, or all spot checks while the audit has no grade"
    )
    spread = serializers.FloatField(
        allow_null=True, help_text="variance of people's minus the judge's credit per pair"
    )
    widths = AuditWidthSerializer(many=True)


class AgreementSerializer(serializers.Serializer):
    agreement = AgreementRowSerializer(many=True)
    progress = SpotProgressSerializer()
    audit = AuditSerializer(help_text="the random audit: progress and predicted widths")


@extend_schema(
    summary="Each judge's agreement with people's spot checks (admins)",
    responses={200: AgreementSerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def spot_check_agreement(request: Request) -> Response:
    return rendered(
        AgreementSerializer,
        {
            "agreement": [row.as_dict() for row in judge_agreement()],
            "progress": spot_check_progress(),
            "audit": audit_report(),
        },
    )


@extend_schema(
    summary="The random human audit: progress and predicted interval widths (admins)",
    responses={200: AuditSerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def audit_detail(request: Request) -> Response:
    return rendered(AuditSerializer, audit_report())


class VerdictMeasureSerializer(serializers.Serializer):
    precision = serializers.FloatField(allow_null=True)
    recall = serializers.FloatField(allow_null=True)
    f1 = serializers.FloatField(allow_null=True)
    support = serializers.IntegerField(help_text="pairs people gave this verdict")


class QualityGroupSerializer(serializers.Serializer):
    by = serializers.ChoiceField(choices=["all", "tier", "domain", "stage"])
    value = serializers.CharField()
    pairs = serializers.IntegerField()
    exact = serializers.IntegerField()
    kappa = serializers.FloatField(allow_null=True, help_text="Cohen's kappa")
    macro_f1 = serializers.FloatField(allow_null=True)
    verdicts = serializers.DictField(
        child=VerdictMeasureSerializer(), help_text="per verdict, people's verdict as the truth"
    )


class CalibrationSerializer(serializers.Serializer):
    verdict = serializers.CharField()
    given = serializers.IntegerField(help_text="times the judge gave it on graded pairs")
    confirmed = serializers.IntegerField(help_text="times people gave it too")
    rate = serializers.FloatField(allow_null=True)
    people = serializers.DictField(child=serializers.IntegerField())


class CeilingSerializer(serializers.Serializer):
    double_pairs = serializers.IntegerField()
    judge_kappa = serializers.FloatField(allow_null=True, help_text="mean with the two people")
    people_kappa = serializers.FloatField(allow_null=True)
    as_good_as_a_second_person = serializers.BooleanField(allow_null=True)


class JudgeQualitySerializer(serializers.Serializer):
    judge = serializers.CharField()
    groups = QualityGroupSerializer(many=True)
    calibration = CalibrationSerializer(many=True)
    ceiling = CeilingSerializer()


class QualitySerializer(serializers.Serializer):
    source = serializers.ChoiceField(choices=["all", "audit", "disagreement"])
    labels = serializers.IntegerField()
    double = serializers.IntegerField()
    min_double = serializers.IntegerField()
    people = QualityGroupSerializer(many=True, help_text="second person against the first")
    judges = JudgeQualitySerializer(many=True)


@extend_schema(
    summary="Each judge measured against people, beside people against each other (admins)",
    parameters=[
        OpenApiParameter(
            "source",
            OpenApiTypes.STR,
            enum=["all", "audit", "disagreement"],
            description="which spot checks are the labels; default: all",
        )
    ],
    responses={200: QualitySerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def quality_detail(request: Request) -> Response:
    source = request.query_params.get("source", "all")
    if source not in SOURCES:
        raise InvalidInput(f"source must be one of {', '.join(SOURCES)}", "source")
    return rendered(QualitySerializer, judge_quality(source))
