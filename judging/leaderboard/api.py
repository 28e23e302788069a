"""The results API (admins, read-only): the same JSON as the result pages' `?format=json`: the
leaderboard and the analyses here, the spot checks' in judging/spot_checks/api.py, the flagged
checks' in judging/checks/api.py.

Views are thin: check the role, read the parameters, call reports.py (or the
leaderboard), answer. A parameter naming an unknown judge or setting is a 400 naming the field;
left out, it takes the page's default (the first judge by name, multimodal). `?release=NAME`
chooses the release scored (`draft`: the working draft; left out: the latest release), an
unknown name is a 404 naming the field, and every answer says which in its `release` field."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import FinalQuestion
from core import access
from core.errors import InvalidInput, NotFound
from core.http import ErrorSerializer, rendered

from ..models import Judge, Setting
from ..releases.scope import DRAFT_PARAM, Scope, requested_scope
from ..releases.scores import release_board
from ..verdicts.scoring import TIERS
from . import reports
from .analysis import LABELS
from .board import board_as_dict

# --- the shapes, for the OpenAPI schema ------------------------------------------------------


def _score(help_text: str = "Gamut x100, null when nothing was scored") -> serializers.Field:
    return serializers.FloatField(allow_null=True, help_text=help_text)


class ReleaseNameSerializer(serializers.Serializer):
    name = serializers.CharField()
    content_hash = serializers.CharField(help_text='"sha256:<hex>" of the release\'s frozen record')


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "content_hash": {
                        "type": "string",
                        "description": '"sha256:<hex>" of the release\'s frozen record',
                    },
                },
                "required": ["name", "content_hash"],
            },
            {"type": "string", "enum": [DRAFT_PARAM]},
        ],
        "description": "the release scored: its name and content hash, or "
        f'"{DRAFT_PARAM}" for the working draft (the live state)',
    }
)
class ReleaseField(serializers.Field):
    """The release an answer scores: {name, content_hash}, or "draft"."""

    def to_representation(self, value: dict | str) -> dict | str:
        return value if value == DRAFT_PARAM else ReleaseNameSerializer(value).data


class LeaderboardRowSerializer(serializers.Serializer):
    model = serializers.CharField()
    gamut = _score()
    ci_low = _score("95% bootstrap interval over questions, x100")
    ci_high = _score("95% bootstrap interval over questions, x100")
    answer_critical = _score("tier score x100")
    valuable = _score("tier score x100")
    context = _score("tier score x100")
    questions = serializers.IntegerField()
    scored = serializers.IntegerField()
    missing = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()
    indistinguishable_from_next = serializers.BooleanField(
        help_text="not told apart from the next model (Holm-adjusted paired test)"
    )
    ranked = serializers.BooleanField(
        help_text="false: scored on fewer than half the questions of the most-scored model, "
        "listed after the ranked rows and not ranked beside them"
    )
    ppi_gamut = _score("Gamut x100 corrected by the random human audit (PPI++), null without one")
    ppi_gamut_ci_low = _score("95% PPI++ interval, x100")
    ppi_gamut_ci_high = _score("95% PPI++ interval, x100")
    ppi_answer_critical = _score("tier score x100 corrected by the audit")
    ppi_answer_critical_ci_low = _score()
    ppi_answer_critical_ci_high = _score()
    ppi_valuable = _score("tier score x100 corrected by the audit")
    ppi_valuable_ci_low = _score()
    ppi_valuable_ci_high = _score()
    ppi_context = _score("tier score x100 corrected by the audit")
    ppi_context_ci_low = _score()
    ppi_context_ci_high = _score()
    ppi_pairs = serializers.IntegerField(help_text="graded audit pairs the correction rests on")
    ppi_questions = serializers.IntegerField(help_text="audited questions (the PPI samples)")


class ComparisonSerializer(serializers.Serializer):
    a = serializers.CharField(help_text="the higher-ranked model")
    b = serializers.CharField()
    questions = serializers.IntegerField(help_text="questions both were scored on")
    difference = _score("mean paired difference a - b, x100")
    ci_low = _score("95% interval of the difference (paired t, over questions), x100")
    ci_high = _score("95% interval of the difference, x100")
    p = serializers.FloatField(allow_null=True, help_text="two-sided paired t test")
    p_holm = serializers.FloatField(allow_null=True, help_text="Holm-adjusted over all pairs")
    significant = serializers.BooleanField(help_text="p_holm < 0.05")


class LeaderboardSerializer(serializers.Serializer):
    release = ReleaseField()
    judge = serializers.CharField()
    setting = serializers.ChoiceField(choices=Setting.values)
    questions = serializers.IntegerField(
        help_text="the release's questions (the draft: final questions not dropped)"
    )
    rows = LeaderboardRowSerializer(many=True)
    comparisons = ComparisonSerializer(many=True, help_text="every pair of models")
    minimum_detectable_difference = _score(
        "the smallest difference (x100) a paired test at alpha 0.05 finds with 80% power at "
        "the benchmark's size, from the median spread of the paired differences"
    )


class SettingsRowSerializer(serializers.Serializer):
    model = serializers.CharField()
    multimodal = _score()
    multimodal_ci_low = _score()
    multimodal_ci_high = _score()
    multimodal_scored = serializers.IntegerField()
    text_only = _score()
    text_only_ci_low = _score()
    text_only_ci_high = _score()
    text_only_scored = serializers.IntegerField()
    cost = _score("cost of visual identification: text_only - multimodal")
    paired_questions = serializers.IntegerField(help_text="questions scored in both settings")
    paired_cost = _score("the cost as a paired difference over those questions")
    paired_ci_low = _score("95% interval of the paired cost")
    paired_ci_high = _score("95% interval of the paired cost")
    paired_p = serializers.FloatField(allow_null=True, help_text="paired t test, two-sided")


class SettingsReportSerializer(serializers.Serializer):
    release = ReleaseField()
    judge = serializers.CharField()
    questions = serializers.IntegerField()
    rows = SettingsRowSerializer(many=True, help_text="largest cost first")


class JudgeScoresRowSerializer(serializers.Serializer):
    model = serializers.CharField()
    scores = serializers.DictField(child=_score(), help_text="judge -> Gamut x100")
    largest_difference = _score("highest minus lowest score among the judges")
    highest = serializers.CharField(allow_null=True)
    lowest = serializers.CharField(allow_null=True)


class LeniencySerializer(serializers.Serializer):
    judge = serializers.CharField()
    mean = _score("the judge's mean over the models every judge scored")
    others = _score("the other judges' mean over the same models")
    leniency = _score("mean - others")
    models = serializers.IntegerField()


class RankingSerializer(serializers.Serializer):
    judge_a = serializers.CharField()
    judge_b = serializers.CharField()
    models = serializers.IntegerField(help_text="models both judges scored")
    tau = serializers.FloatField(allow_null=True, help_text="Kendall's tau-b")
    swaps = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="[higher under A, lower under A]: neighbours in either ranking, reversed",
    )


class SelfPreferenceSerializer(serializers.Serializer):
    judge = serializers.CharField()
    model = serializers.CharField(help_text="the judge's own model")
    own = _score("the judge's score of its own model")
    others = _score("the other judges' mean score of that model")
    gap = _score("own - others")
    net = _score("gap less the judge's leniency")
    judges = serializers.IntegerField(help_text="other judges that scored the model")


class ConfusionSerializer(serializers.Serializer):
    judge_a = serializers.CharField()
    judge_b = serializers.CharField()
    labels = serializers.ListField(
        child=serializers.CharField(), help_text="the four verdicts, then failed"
    )
    counts = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="counts[i][j]: A said labels[i] and B said labels[j]",
    )
    total = serializers.IntegerField()
    graded = serializers.IntegerField(help_text="pairs in which neither judge failed")
    agreement = serializers.FloatField(allow_null=True)
    kappa = serializers.FloatField(allow_null=True, help_text="Cohen's kappa, graded pairs")


class JudgesReportSerializer(serializers.Serializer):
    release = ReleaseField()
    setting = serializers.ChoiceField(choices=Setting.values)
    judges = serializers.ListField(child=serializers.CharField())
    common_models = serializers.ListField(child=serializers.CharField())
    scores = JudgeScoresRowSerializer(many=True)
    leniency = LeniencySerializer(many=True)
    rankings = RankingSerializer(many=True)
    own_models = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="judge -> its own evaluated models",
    )
    self_preference = SelfPreferenceSerializer(many=True)
    confusion = ConfusionSerializer(allow_null=True)


class EvidenceSerializer(serializers.Serializer):
    id = serializers.CharField()
    url = serializers.CharField()
    title = serializers.CharField()
    text = serializers.CharField()


class CheckSerializer(serializers.Serializer):
    check_id = serializers.CharField()
    position = serializers.IntegerField()
    tier = serializers.ChoiceField(choices=TIERS)
    kind = serializers.CharField()
    secondary = serializers.BooleanField()
    text = serializers.CharField()
    source = serializers.CharField()
    rule = serializers.CharField()
    origin = serializers.CharField()
    options = serializers.ListField(child=serializers.CharField(), allow_null=True)
    steps = serializers.ListField(child=serializers.CharField(), allow_null=True)
    evidence = EvidenceSerializer(many=True)
    missing_evidence = serializers.ListField(
        child=serializers.CharField(), help_text="cited snippet ids the meta-rubric lacks"
    )


class JudgedSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=LABELS)
    rationale = serializers.CharField()


class ResponseOutcomeSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["scored", "pending", "failed"])
    gamut = _score()


class CheckVerdictsSerializer(serializers.Serializer):
    check_id = serializers.CharField()
    judges = serializers.DictField(child=JudgedSerializer(), help_text="judge -> verdict")


class QuestionResponseSerializer(serializers.Serializer):
    model = serializers.CharField()
    setting = serializers.ChoiceField(choices=Setting.values)
    text = serializers.CharField()
    model_version = serializers.CharField()
    scores = serializers.DictField(
        child=ResponseOutcomeSerializer(), help_text="judge -> this response's Gamut x100"
    )
    verdicts = CheckVerdictsSerializer(many=True, help_text="one per check, in order")


class QuestionReportSerializer(serializers.Serializer):
    release = ReleaseField()
    source_id = serializers.CharField()
    question = serializers.CharField()
    entity = serializers.CharField()
    domain = serializers.CharField()
    popularity = serializers.CharField()
    image_url = serializers.CharField(help_text="the photo (needs the same authentication)")
    dropped = serializers.BooleanField()
    rubric_version = serializers.DictField(allow_null=True, help_text="{id, stage}")
    judges = serializers.ListField(child=serializers.CharField())
    checks = CheckSerializer(
        many=True, help_text="the checks of the rubric version scored (the release's, or the final)"
    )
    responses = QuestionResponseSerializer(many=True)


# --- the endpoints ---------------------------------------------------------------------------

# The parameters, refusals and role check below are shared by the whole results API.
JUDGE = OpenApiParameter(
    "judge", OpenApiTypes.STR, description="a judge's name; default: the first by name"
)
SETTING = OpenApiParameter(
    "setting", OpenApiTypes.STR, enum=Setting.values, description="default: multimodal"
)
RELEASE = OpenApiParameter(
    "release",
    OpenApiTypes.STR,
    description=f"a release's name, or {DRAFT_PARAM} for the working draft (the live state); "
    "default: the latest release, or the working draft when none was cut",
)
ERRORS = dict.fromkeys((400, 401, 403, 404), ErrorSerializer)


# Refusals are domain errors: core.http.api_exception_handler answers them with the one
# error body.


ADMINS = access.role_required(access.ADMIN, message="Only admins read the results.")


def _named_judge(request: Request, param: str) -> Judge | None:
    """The judge a parameter names, None when it is left out; 400 for an unknown name."""
    name = request.query_params.get(param)
    if name is None:
        return None
    try:
        return Judge.objects.get(name=name)
    except Judge.DoesNotExist as exc:
        raise InvalidInput(f"unknown judge {name!r}", param) from exc


def requested_judge(request: Request) -> Judge:
    """The judge `?judge=` names, else the first by name; 404 when there is none."""
    judge = _named_judge(request, "judge") or Judge.objects.order_by("name").first()
    if judge is None:
        raise NotFound("No judge yet.")
    return judge


def requested_setting(request: Request) -> str:
    """`?setting=`, multimodal when left out; 400 for another value."""
    setting = request.query_params.get("setting", Setting.MULTIMODAL)
    if setting not in Setting.values:
        raise InvalidInput(f"setting must be one of {', '.join(Setting.values)}", "setting")
    return setting


def requested_release(request: Request) -> Scope:
    """The release `?release=` names (404 naming the field for an unknown name)."""
    return requested_scope(request.query_params.get("release"))


def _answer(serializer: type[serializers.Serializer], build) -> Response:
    return rendered(serializer, build())


@extend_schema(
    summary="The leaderboard of one judge and setting (admins)",
    parameters=[JUDGE, SETTING, RELEASE],
    responses={200: LeaderboardSerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def leaderboard_detail(request: Request) -> Response:
    def build() -> dict:
        scope = requested_release(request)
        judge, setting = requested_judge(request), requested_setting(request)
        scored = release_board(
            scope.release,
            judge=judge,
            setting=setting,
            settings=scope.scoring(),
            audit=True,
            estimate=False,
        )
        return board_as_dict(scored.board, release=scope.release)

    return _answer(LeaderboardSerializer, build)


@extend_schema(
    summary="Multimodal against text-only per model, under one judge (admins)",
    parameters=[JUDGE, RELEASE],
    responses={200: SettingsReportSerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def settings_detail(request: Request) -> Response:
    def build() -> dict:
        scope = requested_release(request)
        return reports.settings_report(requested_judge(request), release=scope.release)

    return _answer(SettingsReportSerializer, build)


@extend_schema(
    summary="Judges compared in one setting (admins)",
    description="Scores per model under each judge, leniency, Kendall's tau-b and swapped "
    "neighbours per pair of judges, self-preference, and the verdict confusion "
    "matrix of judges `a` and `b` (default: the first two by name).",
    parameters=[
        SETTING,
        OpenApiParameter("a", OpenApiTypes.STR, description="judge A (rows)"),
        OpenApiParameter("b", OpenApiTypes.STR, description="judge B (columns)"),
        RELEASE,
    ],
    responses={200: JudgesReportSerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def judges_detail(request: Request) -> Response:
    def build() -> dict:
        scope = requested_release(request)
        setting = requested_setting(request)
        judges = list(Judge.objects.order_by("name"))
        if not judges:
            raise NotFound("No judge yet.")
        judge_a = _named_judge(request, "a") or judges[0]
        judge_b = _named_judge(request, "b") or next((j for j in judges if j != judge_a), None)
        return reports.judges_report(
            setting=setting, judge_a=judge_a, judge_b=judge_b, release=scope.release
        )

    return _answer(JudgesReportSerializer, build)


@extend_schema(
    summary="One question's responses, checks, verdicts and evidence (admins)",
    description="On the rubric version the release froze (404 when the release does not "
    "hold the question), or on the final one for the working draft.",
    parameters=[RELEASE],
    responses={200: QuestionReportSerializer, **ERRORS},
)
@api_view(["GET"])
@ADMINS
def question_detail(request: Request, source_id: str) -> Response:
    def build() -> dict:
        scope = requested_release(request)
        try:
            question = reports.question_for(source_id)
        except FinalQuestion.DoesNotExist as exc:
            raise NotFound("No final question for this image.") from exc
        return reports.question_report(
            question,
            image_url=request.build_absolute_uri(reports.image_url_for(source_id)),
            release=scope.release,
        )

    return _answer(QuestionReportSerializer, build)
