"""Training and audits over the API (the pages are /training/, /audit/ and /rubrics/audit/):
a trainee's own standing, every annotator's standing with an admin's reset or let-through, the
gold items' JSONL import, and the audits of reviews (adjudicators) and of rubric rounds
(revisers). The same services as the pages, so the same refusals: nobody audits their own
work, a second verdict is a 409, an overturn or a flag without a note a 400."""

from __future__ import annotations

from django.db.models import Count, Prefetch, Q
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.http import ErrorSerializer, rendered
from core.middleware import takes_upload
from rubrics.models import RubricCheck
from rubrics.services import version_diff

from ..images.api import ImportErrorsSerializer, import_refused
from ..images.importing import upload_within_cap
from ..models import CandidateStatus, GoldItem, QualityConfig, Review
from ..review.api import ImageRefSerializer, ReviewOutSerializer, image_ref
from . import audits, gold
from .views import training_rows

LISTED = 50  # open audits per answer, the next one first (the pages show them one by one)
STANDINGS = ["not_started", "in_training", "passed", "failed"]
STANDING_HELP = (
    "not_started (no training answer yet), in_training, passed (real work open), failed "
    "(answered the whole set below the threshold: blocked until an admin resets them)"
)


# --- training ---------------------------------------------------------------------------------


class MyStandingSerializer(serializers.Serializer):
    standing = serializers.ChoiceField(choices=STANDINGS, help_text=STANDING_HELP)
    attempt = serializers.IntegerField(help_text="a reset starts a new attempt")
    total = serializers.IntegerField(help_text="training items in the set")
    answered = serializers.IntegerField(help_text="training items answered in this attempt")
    agreed = serializers.IntegerField(help_text="of those, decided as the expert did")
    share = serializers.FloatField(allow_null=True, help_text="agreed / answered")
    threshold = serializers.FloatField(help_text="the share needed to pass")
    required = serializers.BooleanField(
        help_text="a training set waits for you: your next candidates are training items"
    )
    blocked = serializers.BooleanField(help_text="failed: real candidates are refused")


class StandingRowSerializer(serializers.Serializer):
    """Reads a row of training.views.training_rows."""

    id = serializers.IntegerField(source="person.pk")
    username = serializers.CharField(source="person.username")
    standing = serializers.ChoiceField(choices=STANDINGS, help_text=STANDING_HELP)
    attempt = serializers.IntegerField()
    answered = serializers.IntegerField(help_text="training items answered in this attempt")
    agreed = serializers.IntegerField(help_text="of those, decided as the expert did")
    share = serializers.FloatField(allow_null=True)
    gold_answered = serializers.IntegerField(help_text="gold items (not training) answered")
    gold_share = serializers.FloatField(
        allow_null=True, help_text="share of those decided as the expert did"
    )


class TrainingOverviewSerializer(serializers.Serializer):
    config = inline_serializer(
        "QualityRates",
        {
            "gold_rate": serializers.FloatField(),
            "training_pass_share": serializers.FloatField(),
            "review_audit_rate": serializers.FloatField(),
            "round_audit_rate": serializers.FloatField(),
        },
    )
    items = inline_serializer(
        "GoldItemCounts",
        {
            "active": serializers.IntegerField(help_text="active gold items, training included"),
            "training": serializers.IntegerField(help_text="active training items"),
        },
    )
    annotators = StandingRowSerializer(many=True)


class TrainingChangeInSerializer(serializers.Serializer):
    action = serializers.ChoiceField(
        choices=["reset", "pass"],
        help_text="reset: a new attempt at the training set; pass: let them start real work",
    )


class GoldImportedSerializer(serializers.Serializer):
    imported = serializers.IntegerField()
    items = inline_serializer(
        "GoldItemMade",
        {
            "id": serializers.IntegerField(),
            "candidate": serializers.IntegerField(source="candidate_id"),
            "training": serializers.BooleanField(),
        },
        many=True,
    )


def _row(row: dict) -> dict:
    return {**row, "standing": row["standing"].replace(" ", "_")}


@extend_schema(
    summary="Your own standing in training (annotators)",
    responses={200: MyStandingSerializer, 403: ErrorSerializer},
)
@api_view(["GET"])
@access.role_required(access.ANNOTATOR, message="Only annotators are trained.")
def training_me(request: Request) -> Response:
    standing = gold.training_standing(request.user)
    if standing.passed:
        word = "passed"
    elif standing.failed:
        word = "failed"
    else:
        word = "in_training" if standing.answered else "not_started"
    return rendered(
        MyStandingSerializer,
        {
            "standing": word,
            "attempt": standing.attempt,
            "total": standing.total,
            "answered": standing.answered,
            "agreed": standing.agreed,
            "share": standing.share,
            "threshold": standing.threshold,
            "required": standing.required,
            "blocked": standing.blocked,
        },
    )


@extend_schema(
    summary="Where every annotator stands in training, with the rates (admins)",
    responses={200: TrainingOverviewSerializer, 403: ErrorSerializer},
)
@api_view(["GET"])
@access.role_required(access.ADMIN, message="Only admins see everyone's training.")
def training_list(request: Request) -> Response:
    config = QualityConfig.current()
    items = GoldItem.objects.aggregate(
        all_active=Count("id", filter=Q(active=True)),
        training=Count("id", filter=Q(active=True, training=True)),
    )
    return rendered(
        TrainingOverviewSerializer,
        {
            "config": config,
            "items": {"active": items["all_active"], "training": items["training"]},
            "annotators": [_row(row) for row in training_rows()],
        },
    )


@extend_schema(
    summary="Reset an annotator's training or let them through it (admins)",
    request=TrainingChangeInSerializer,
    responses={
        200: StandingRowSerializer,
        400: ErrorSerializer,
        403: ErrorSerializer,
        404: OpenApiResponse(ErrorSerializer, description="no annotator with this id"),
        409: OpenApiResponse(ErrorSerializer, description="pass: they have passed already"),
    },
)
@api_view(["POST"])
@access.role_required(access.ADMIN, message="Only admins change a person's training.")
def training_change(request: Request, user_id: int) -> Response:
    incoming = TrainingChangeInSerializer(data=request.data)
    incoming.is_valid(raise_exception=True)
    change = (
        gold.training_reset if incoming.validated_data["action"] == "reset" else gold.training_pass
    )
    change(user=request.user, annotator_id=user_id)
    row = next(row for row in training_rows() if row["person"].pk == user_id)
    return rendered(StandingRowSerializer, _row(row))


@extend_schema(
    summary="Import gold items from a JSON Lines file (admins), as on /training/",
    description=(
        'One object a line: {"image": source id, "text", "decision": accept|revise|discard, '
        '"note", "revised_text" (with revise), "reasons": [tags], "training": true|false, '
        '"origin"}. Every line is checked first; any problem imports nothing.'
    ),
    request={
        "multipart/form-data": inline_serializer(
            "GoldUpload", {"gold": serializers.FileField(help_text="the .jsonl file")}
        )
    },
    responses={
        201: GoldImportedSerializer,
        400: ImportErrorsSerializer,
        403: ErrorSerializer,
        413: OpenApiResponse(
            ErrorSerializer,
            description="the file is over IMPORT_MAX_MANIFEST_BYTES, or the body over the "
            "upload caps (or over 5 MB from anyone but an admin), refused unread",
        ),
    },
)
@takes_upload("IMPORT_MAX_MANIFEST_BYTES")
@api_view(["POST"])
@parser_classes([MultiPartParser])
@access.role_required(access.ADMIN, message="Only admins import gold items.")
def gold_import(request: Request) -> Response:
    upload = request.FILES.get("gold")
    if upload is None:
        missing = "gold: a JSON Lines file is required"
        return import_refused("gold", [missing], detail=f"{missing}.")
    upload_within_cap(upload, "gold", "gold file")
    try:
        made = gold.gold_import(user=request.user, data=upload.read())
    except gold.GoldImportProblems as exc:
        return import_refused("gold", exc.problems)
    return rendered(
        GoldImportedSerializer,
        {"imported": len(made), "items": made},
        status=status.HTTP_201_CREATED,
    )


# --- audits -----------------------------------------------------------------------------------


class ReviewVerdictInSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=list(audits.REVIEW_VERDICTS))
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=audits.MAX_NOTE,
        default="",
        help_text="why: required to overturn",
    )


class RoundVerdictInSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=list(audits.ROUND_VERDICTS))
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=audits.MAX_NOTE,
        default="",
        help_text="what is wrong: required to flag (shown in the rubric's history)",
    )


class AuditedCandidateSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    round = serializers.IntegerField()
    outcome = serializers.ChoiceField(
        choices=[s.value for s in CandidateStatus if s != CandidateStatus.GOLD],
        help_text="how the candidate was resolved",
    )
    adjudicated = serializers.BooleanField()
    image = ImageRefSerializer()


class OpenReviewAuditSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="the audit's id: POST the verdict to it")
    drawn_at = serializers.DateTimeField()
    candidate = AuditedCandidateSerializer()
    review = ReviewOutSerializer(help_text="the review audited")
    others = serializers.ListField(
        child=serializers.CharField(),
        help_text="the decisions of the other reviews of the candidate",
    )


class ReviewAuditsSerializer(serializers.Serializer):
    waiting = serializers.IntegerField(help_text="open audits you may give")
    audits = OpenReviewAuditSerializer(many=True, help_text=f"the next {LISTED}, oldest first")


class GivenVerdictSerializer(serializers.Serializer):
    """Reads a ReviewAudit or a RoundAudit after its verdict."""

    id = serializers.IntegerField()
    verdict = serializers.CharField()
    note = serializers.CharField()
    auditor = serializers.CharField(source="auditor.username")
    audited_at = serializers.DateTimeField()


class ReviewVerdictSerializer(GivenVerdictSerializer):
    review = serializers.IntegerField(source="review_id")
    verdict = serializers.ChoiceField(choices=list(audits.REVIEW_VERDICTS))


class RoundVerdictSerializer(GivenVerdictSerializer):
    version = serializers.IntegerField(source="version_id")
    verdict = serializers.ChoiceField(choices=list(audits.ROUND_VERDICTS))


class AuditCheckSerializer(serializers.Serializer):
    check_id = serializers.CharField()
    text = serializers.CharField()
    tier = serializers.CharField()


class CheckChangeSerializer(serializers.Serializer):
    check_id = serializers.CharField()
    before = serializers.CharField()
    after = serializers.CharField()


class RoundDiffSerializer(serializers.Serializer):
    parent_stage = serializers.CharField()
    added = AuditCheckSerializer(many=True)
    removed = AuditCheckSerializer(many=True)
    changed = CheckChangeSerializer(many=True, help_text="text changed: before and after")
    retiered = CheckChangeSerializer(many=True, help_text="tier changed: before and after")


class OpenRoundAuditSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="the audit's id: POST the verdict to it")
    drawn_at = serializers.DateTimeField()
    version = inline_serializer(
        "AuditedRound",
        {
            "id": serializers.IntegerField(),
            "rubric": serializers.IntegerField(),
            "stage": serializers.CharField(),
            "made_by": serializers.CharField(help_text="the reviser who completed it"),
            "frozen_at": serializers.DateTimeField(help_text="when it was completed"),
        },
    )
    question = inline_serializer(
        "AuditedQuestion",
        {
            "text": serializers.CharField(),
            "source_id": serializers.CharField(),
            "domain": serializers.CharField(),
        },
    )
    checks = AuditCheckSerializer(many=True, help_text="the round's checks, in order")
    diff = RoundDiffSerializer(
        allow_null=True, help_text="what the round changed (no parent: null)"
    )


class RoundAuditsSerializer(serializers.Serializer):
    waiting = serializers.IntegerField(help_text="open audits you may give")
    audits = OpenRoundAuditSerializer(many=True, help_text=f"the next {LISTED}, oldest first")


VERDICT_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="a verdict not offered, or no note"),
    403: OpenApiResponse(ErrorSerializer, description="not your role, or your own work"),
    404: OpenApiResponse(ErrorSerializer, description="no audit with this id"),
    409: OpenApiResponse(ErrorSerializer, description="audited already"),
}


@extend_schema(
    methods=["GET"],
    summary="The reviews drawn for audit that you may audit (adjudicators)",
    description=(
        "Lists what is drawn and draws nothing (POST draws). Never your own work: not your "
        "review, one beside it, or a candidate you wrote or adjudicated."
    ),
    responses={200: ReviewAuditsSerializer, 403: ErrorSerializer},
)
@extend_schema(
    methods=["POST"],
    operation_id="audits_reviews_draw",
    summary="Draw the reviews due for audit, then list them (adjudicators)",
    description=(
        "Draws each annotator's due share of resolved reviews, as /audit/ does when it opens, "
        "then answers as GET does. No body."
    ),
    request=None,
    responses={200: ReviewAuditsSerializer, 403: ErrorSerializer},
)
@api_view(["GET", "POST"])
@access.role_required(access.ADJUDICATOR, message="Only adjudicators audit reviews.")
def review_audit_list(request: Request) -> Response:
    if request.method == "POST":
        audits.review_audits_draw()
    open_to = audits.review_audits_open_to(request.user)
    page = list(
        open_to.select_related(
            "review__annotator", "review__candidate__image", "review__candidate__adjudication"
        )
        .prefetch_related(
            Prefetch(
                "review__candidate__reviews",
                queryset=Review.objects.order_by("id").only("id", "candidate_id", "decision"),
            )
        )
        .order_by("id")[:LISTED]
    )
    rows = []
    for audit in page:
        review = audit.review
        candidate = review.candidate
        rows.append(
            {
                "id": audit.pk,
                "drawn_at": audit.drawn_at,
                "candidate": {
                    "id": candidate.pk,
                    "text": candidate.text,
                    "round": candidate.round,
                    "outcome": candidate.status,
                    "adjudicated": hasattr(candidate, "adjudication"),
                    "image": image_ref(request, candidate),
                },
                "review": review,
                "others": [
                    other.decision for other in candidate.reviews.all() if other.pk != review.pk
                ],
            }
        )
    return rendered(ReviewAuditsSerializer, {"waiting": open_to.count(), "audits": rows})


@extend_schema(
    summary="Give a drawn review your verdict: agree, or overturn with a note (adjudicators)",
    request=ReviewVerdictInSerializer,
    responses={200: ReviewVerdictSerializer, **VERDICT_ERRORS},
)
@api_view(["POST"])
@access.role_required(access.ADJUDICATOR, message="Only adjudicators audit reviews.")
def review_audit_give(request: Request, audit_id: int) -> Response:
    incoming = ReviewVerdictInSerializer(data=request.data)
    incoming.is_valid(raise_exception=True)
    audit = audits.review_audit_give(
        user=request.user, audit_id=audit_id, **incoming.validated_data
    )
    return rendered(ReviewVerdictSerializer, audit)


def _check(row: RubricCheck) -> dict:
    return {"check_id": row.check_id, "text": row.text, "tier": row.tier}


@extend_schema(
    methods=["GET"],
    summary="The rubric rounds drawn for audit that you may audit (rubric revisers)",
    description=(
        "Lists what is drawn and draws nothing (POST draws). Never a round you completed or edited."
    ),
    responses={200: RoundAuditsSerializer, 403: ErrorSerializer},
)
@extend_schema(
    methods=["POST"],
    operation_id="audits_rounds_draw",
    summary="Draw the rubric rounds due for audit, then list them (rubric revisers)",
    description=(
        "Draws each reviser's due share of completed human rounds, as /rubrics/audit/ does "
        "when it opens, then answers as GET does. No body."
    ),
    request=None,
    responses={200: RoundAuditsSerializer, 403: ErrorSerializer},
)
@api_view(["GET", "POST"])
@access.role_required(access.RUBRIC_REVISER, message="Only rubric revisers audit rubric rounds.")
def round_audit_list(request: Request) -> Response:
    if request.method == "POST":
        audits.round_audits_draw()
    open_to = audits.round_audits_open_to(request.user)
    checks = RubricCheck.objects.order_by("position")
    page = list(
        open_to.select_related(
            "version__rubric__question__image", "version__made_by", "version__parent"
        )
        .prefetch_related(
            Prefetch("version__checks", queryset=checks),
            Prefetch("version__parent__checks", queryset=checks),
        )
        .order_by("id")[:LISTED]
    )
    rows = []
    for audit in page:
        version = audit.version
        question = version.rubric.question
        checks_now = list(version.checks.all())
        parent = version.parent
        diff = None
        if parent is not None:
            found = version_diff(list(parent.checks.all()), checks_now)
            diff = {
                "parent_stage": parent.stage,
                "added": [_check(row) for row in found.added],
                "removed": [_check(row) for row in found.removed],
                "changed": [
                    {"check_id": new.check_id, "before": old.text, "after": new.text}
                    for old, new in found.changed
                ],
                "retiered": [
                    {"check_id": new.check_id, "before": old.tier, "after": new.tier}
                    for old, new in found.retiered
                ],
            }
        rows.append(
            {
                "id": audit.pk,
                "drawn_at": audit.drawn_at,
                "version": {
                    "id": version.pk,
                    "rubric": version.rubric_id,
                    "stage": version.stage,
                    "made_by": version.made_by.username,
                    "frozen_at": version.frozen_at,
                },
                "question": {
                    "text": question.text,
                    "source_id": question.image.source_id,
                    "domain": question.image.domain,
                },
                "checks": [_check(row) for row in checks_now if row.deleted_at is None],
                "diff": diff,
            }
        )
    return rendered(RoundAuditsSerializer, {"waiting": open_to.count(), "audits": rows})


@extend_schema(
    summary="Give a drawn rubric round your verdict: accept, or flag with a note (revisers)",
    request=RoundVerdictInSerializer,
    responses={200: RoundVerdictSerializer, **VERDICT_ERRORS},
)
@api_view(["POST"])
@access.role_required(access.RUBRIC_REVISER, message="Only rubric revisers audit rubric rounds.")
def round_audit_give(request: Request, audit_id: int) -> Response:
    incoming = RoundVerdictInSerializer(data=request.data)
    incoming.is_valid(raise_exception=True)
    audit = audits.round_audit_give(user=request.user, audit_id=audit_id, **incoming.validated_data)
    return rendered(RoundVerdictSerializer, audit)
