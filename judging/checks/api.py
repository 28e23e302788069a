"""The flagged checks' API (rubric revisers and admins): the checks of final rubrics that carry no
information under one judge and setting; the same JSON as /rubrics/checks/?format=json."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.http import rendered

from ..leaderboard.api import ERRORS, JUDGE, SETTING, requested_judge, requested_setting
from ..models import Setting
from ..verdicts.scoring import TIERS
from .report import check_report


class FlaggedCheckSerializer(serializers.Serializer):
    source_id = serializers.CharField()
    check_id = serializers.CharField()
    tier = serializers.ChoiceField(choices=TIERS)
    text = serializers.CharField()
    models = serializers.IntegerField(help_text="models graded on the check")
    difficulty = serializers.FloatField(allow_null=True, help_text="mean credit, 0..1")
    discrimination = serializers.FloatField(
        allow_null=True, help_text="point-biserial against the score without the question"
    )
    disagreement = serializers.FloatField(
        allow_null=True, help_text="share of responses on which two or more judges differ"
    )
    shared = serializers.IntegerField(help_text="responses graded by two or more judges")
    flags = serializers.ListField(child=serializers.CharField())
    rubric_url = serializers.CharField()


class FlaggedChecksSerializer(serializers.Serializer):
    judge = serializers.CharField()
    setting = serializers.ChoiceField(choices=Setting.values)
    checks = serializers.IntegerField(help_text="checks of final rubrics graded")
    flagged = serializers.IntegerField()
    rows = FlaggedCheckSerializer(many=True)


@extend_schema(
    summary="Checks that carry no information (rubric revisers and admins)",
    description="Per check of a final rubric under one judge and setting: difficulty, "
    "discrimination and judge disagreement; the flagged ones (met by every model, by none, "
    "or disagreement far above the rest).",
    parameters=[JUDGE, SETTING],
    responses={200: FlaggedChecksSerializer, **ERRORS},
)
@api_view(["GET"])
@access.role_required(
    access.RUBRIC_REVISER,
    access.ADMIN,
    message="Only rubric revisers and admins read the flagged checks.",
)
def flagged_checks(request: Request) -> Response:
    return rendered(
        FlaggedChecksSerializer, check_report(requested_judge(request), requested_setting(request))
    )
