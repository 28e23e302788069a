"""The review API: the exact contract that scripts use. Views are thin: check the role, call a
service, render the answer through the serializer the schema documents (core.http.rendered);
errors become status codes at core.http."""

from __future__ import annotations

import uuid

from django.db.models import Count, Prefetch, Q
from django.shortcuts import get_object_or_404
from django.utils.crypto import salted_hmac
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.http import ErrorSerializer, rendered
from core.middleware import takes_upload

from . import services
from .importing import MAX_PROBLEMS_SHOWN, ImportProblems, import_from_upload, read_manifest
from .models import (
    REASON_KEYS,
    Candidate,
    CandidateStatus,
    Decision,
    Image,
    ImportBatch,
    Review,
    image_status,
    status_visible_to,
)


class ImageRefSerializer(serializers.Serializer):
    source_id = serializers.CharField()
    entity = serializers.CharField()
    domain = serializers.CharField()
    url = serializers.CharField(help_text="address of the photo (needs the same authentication)")


class ClaimedCandidateSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    round = serializers.IntegerField()
    image = ImageRefSerializer()
    lease = inline_serializer(
        "Lease", {"expires_at": serializers.DateTimeField(), "seconds": serializers.IntegerField()}
    )


def review_public_id(answer) -> str:
    """A review's id as the API shows it: opaque, derived from the row by a keyed hash
    (Django's salted_hmac with the SECRET_KEY), so that reviews and answers to gold items,
    which are rows of two tables, show ids of one kind, in no order that tells them apart."""
    kind = "review" if isinstance(answer, Review) else "gold"
    digest = salted_hmac("gamut.review-id", f"{kind}:{answer.pk}", algorithm="sha256")
    return str(uuid.UUID(hex=digest.hexdigest()[:32]))


class ReviewOutSerializer(serializers.Serializer):
    """Reads a Review (or a GoldReview: an answer to a gold item reads as any review)."""

    id = serializers.SerializerMethodField(
        help_text="opaque: a review's id, unique, in no particular order"
    )
    annotator = serializers.CharField(source="annotator.username")
    decision = serializers.ChoiceField(choices=Decision.values)
    revised_text = serializers.CharField()
    reasons = serializers.ListField(child=serializers.CharField())
    comment = serializers.CharField()
    seconds = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()

    def get_id(self, answer) -> str:
        return review_public_id(answer)


class AdjudicationClaimSerializer(ClaimedCandidateSerializer):
    """The claimed candidate's fields, the same again under `candidate`, and both reviews."""

    candidate = ClaimedCandidateSerializer()
    reviews = ReviewOutSerializer(many=True)


class AdjudicationOutSerializer(serializers.Serializer):
    """Reads an Adjudication, with `new_candidate` set on it (the revision's child, or None)."""

    id = serializers.IntegerField()
    decision = serializers.CharField()
    revised_text = serializers.CharField()
    candidate_status = serializers.CharField(source="candidate.status")
    new_candidate = serializers.IntegerField(allow_null=True)


class ImportResultSerializer(serializers.Serializer):
    imported = serializers.ListField(child=serializers.CharField())
    skipped = serializers.ListField(child=serializers.CharField())


class ImportErrorsSerializer(serializers.Serializer):
    detail = serializers.CharField()
    field = serializers.CharField(required=False)
    errors = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text=f"The first {MAX_PROBLEMS_SHOWN} problems, a line's as 'line N: ...'.",
    )
    more = serializers.IntegerField(required=False, help_text="How many problems are not listed.")


# The request bodies are validated by these serializers (so the schema says what is accepted),
# then by the services, which also serve the pages and commands (the rules between fields:
# revise needs a text, accept needs an acceptance).
class ReviewInSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=Decision.values)
    revised_text = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=services.MAX_TEXT,
        help_text="required for revise, refused otherwise",
    )
    reasons = serializers.ListField(
        child=serializers.ChoiceField(choices=REASON_KEYS), required=False
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=services.MAX_COMMENT
    )
    seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=services.MAX_SECONDS
    )
    submission_key = serializers.UUIDField(
        required=False,
        allow_null=True,
        help_text=(
            "a key of your choosing for this answer: the same answer sent again under it (a "
            "retry) is answered as the first was, never recorded twice; another answer under "
            "it is a 409 that says what is recorded"
        ),
    )


class AdjudicationInSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=Decision.values)
    revised_text = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=services.MAX_TEXT,
        help_text="required for revise: one annotator's revision or the adjudicator's own",
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=services.MAX_COMMENT
    )
    seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=services.MAX_SECONDS
    )


class CandidateDetailSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    round = serializers.IntegerField()
    status = serializers.ChoiceField(
        choices=["open", "disputed", "accepted", "discarded", "revised"]
    )
    parent = serializers.IntegerField(allow_null=True)
    children = serializers.ListField(child=serializers.IntegerField())
    reviews = ReviewOutSerializer(many=True, help_text="only the reviews you may see")


class ImageDetailSerializer(serializers.Serializer):
    source_id = serializers.CharField()
    entity = serializers.CharField()
    domain = serializers.CharField()
    popularity = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["needs_candidates", "in_review", "awaiting_guard", "has_question"]
    )
    candidates = serializers.ListField(child=serializers.IntegerField())
    question = serializers.CharField(allow_null=True)


def _image_ref(request: Request, candidate: Candidate) -> dict:
    from django.urls import reverse

    image = candidate.image
    return {
        "source_id": image.source_id,
        "entity": image.entity,
        "domain": image.domain,
        "url": request.build_absolute_uri(reverse("image_file", args=[image.source_id])),
    }


def _claimed(request: Request, claimed: services.Claimed) -> dict:
    from django.conf import settings

    candidate = claimed.candidate
    return {
        "id": candidate.pk,
        "text": candidate.text,
        "round": candidate.round,
        "image": _image_ref(request, candidate),
        "lease": {
            "expires_at": claimed.expires_at,
            "seconds": int(settings.REVIEW_LEASE.total_seconds()),
        },
    }


@extend_schema(
    summary="Claim the next candidate to review",
    request=None,
    responses={
        200: ClaimedCandidateSerializer,
        204: OpenApiResponse(description="nothing left"),
        403: ErrorSerializer,
    },
)
@api_view(["POST"])
@access.role_required(access.ANNOTATOR, message="Only annotators review candidates.")
def review_claim(request: Request) -> Response:
    claimed = services.review_claim(user=request.user)
    if claimed is None:
        return Response(status=status.HTTP_204_NO_CONTENT)
    return rendered(ClaimedCandidateSerializer, _claimed(request, claimed))


@extend_schema(
    summary="Submit a review of a candidate",
    request=ReviewInSerializer,
    responses={
        201: ReviewOutSerializer,
        400: ErrorSerializer,
        403: ErrorSerializer,
        404: ErrorSerializer,
        409: ErrorSerializer,
    },
)
@api_view(["POST"])
@access.role_required(access.ANNOTATOR, message="Only annotators review candidates.")
def review_create(request: Request, candidate_id: int) -> Response:
    incoming = ReviewInSerializer(data=request.data)
    incoming.is_valid(raise_exception=True)
    review = services.review_submit(
        user=request.user, candidate_id=candidate_id, **incoming.validated_data
    )
    return rendered(ReviewOutSerializer, review, status=status.HTTP_201_CREATED)


@extend_schema(
    summary="A candidate, with the reviews you may see",
    responses={200: CandidateDetailSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
)
@api_view(["GET"])
@access.role_required(access.MEMBER)
def candidate_detail(request: Request, candidate_id: int) -> Response:
    visible = Review.objects.visible_to(request.user).select_related("annotator")
    candidate = get_object_or_404(
        Candidate.objects.prefetch_related(
            Prefetch("reviews", queryset=visible, to_attr="visible_reviews"),
            "children",
        ),
        pk=candidate_id,
    )
    return rendered(
        CandidateDetailSerializer,
        {
            "id": candidate.pk,
            "text": candidate.text,
            "round": candidate.round,
            "status": status_visible_to(candidate, request.user),
            "parent": candidate.parent_id,
            "children": [child.pk for child in candidate.children.all()],
            "reviews": candidate.visible_reviews,
        },
    )


@extend_schema(
    summary="Claim the next disputed candidate, with both reviews",
    request=None,
    responses={
        200: AdjudicationClaimSerializer,
        204: OpenApiResponse(description="nothing disputed"),
        403: ErrorSerializer,
    },
)
@api_view(["POST"])
@access.role_required(access.ADJUDICATOR, message="Only adjudicators resolve disputes.")
def adjudication_claim(request: Request) -> Response:
    claimed = services.adjudication_claim(user=request.user)
    if claimed is None:
        return Response(status=status.HTTP_204_NO_CONTENT)
    reviews = Review.objects.filter(candidate=claimed.candidate).select_related("annotator")
    body = _claimed(request, claimed)
    return rendered(AdjudicationClaimSerializer, {**body, "candidate": body, "reviews": reviews})


@extend_schema(
    summary="Settle a disputed candidate",
    request=AdjudicationInSerializer,
    responses={
        201: AdjudicationOutSerializer,
        400: ErrorSerializer,
        403: ErrorSerializer,
        404: ErrorSerializer,
        409: ErrorSerializer,
    },
)
@api_view(["POST"])
@access.role_required(access.ADJUDICATOR, message="Only adjudicators resolve disputes.")
def adjudication_create(request: Request, candidate_id: int) -> Response:
    incoming = AdjudicationInSerializer(data=request.data)
    incoming.is_valid(raise_exception=True)
    adjudication = services.adjudication_resolve(
        user=request.user, candidate_id=candidate_id, **incoming.validated_data
    )
    child = adjudication.candidate.children.order_by("-id").first()
    adjudication.new_candidate = child.pk if child else None
    return rendered(AdjudicationOutSerializer, adjudication, status=status.HTTP_201_CREATED)


@extend_schema(
    summary="An image, its candidates and its question",
    responses={200: ImageDetailSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
)
@api_view(["GET"])
@access.role_required(access.MEMBER)
def image_detail(request: Request, source_id: str) -> Response:
    image = get_object_or_404(
        Image.objects.with_counts()
        .annotate(n_gold=Count("candidates", filter=Q(candidates__status=CandidateStatus.GOLD)))
        .select_related("question"),
        source_id=source_id,
    )
    question = getattr(image, "question", None) if image.has_question else None
    # A gold item reads as an open candidate to all but admins (status_visible_to), so it
    # counts as one here too: an image "needing candidates" while listing an open one would
    # point at it.
    pending = image.n_pending + (0 if request.user.is_staff else image.n_gold)
    return rendered(
        ImageDetailSerializer,
        {
            "source_id": image.source_id,
            "entity": image.entity,
            "domain": image.domain,
            "popularity": image.popularity,
            "status": image_status(
                n_pending=pending,
                n_accepted=image.n_accepted,
                has_question=image.has_question,
            ),
            "candidates": list(image.candidates.order_by("id").values_list("id", flat=True)),
            "question": question.text if question else None,
        },
    )


@extend_schema(
    summary="Import images (admins): a JSONL manifest and a zip of the images it names",
    request={
        "multipart/form-data": inline_serializer(
            "ImportUpload",
            {
                "manifest": serializers.FileField(),
                "images": serializers.FileField(required=False),
            },
        )
    },
    responses={
        201: ImportResultSerializer,
        400: ImportErrorsSerializer,
        403: ErrorSerializer,
        413: OpenApiResponse(
            ErrorSerializer,
            description="the manifest is over IMPORT_MAX_MANIFEST_BYTES, or the body over "
            "the upload caps (or over 5 MB from anyone but an admin), refused unread",
        ),
    },
)
@takes_upload("IMPORT_MAX_TOTAL_BYTES", "IMPORT_MAX_MANIFEST_BYTES")
@api_view(["POST"])
@parser_classes([MultiPartParser])
@access.role_required(access.ADMIN, message="Only admins import images.")
def images_import(request: Request) -> Response:
    manifest = request.FILES.get("manifest")
    if manifest is None:
        missing = "manifest: a JSONL file is required"
        return import_refused("manifest", [missing], detail=f"{missing}.")
    try:
        result = import_from_upload(
            read_manifest(manifest),
            request.FILES.get("images"),
            actor=request.user,
            source=ImportBatch.Source.API,
            file_name=manifest.name,
        )
    except ImportProblems as exc:
        return import_refused(None, exc.problems)
    return rendered(ImportResultSerializer, result, status=status.HTTP_201_CREATED)


def import_refused(field: str | None, problems: list, *, detail: str = "") -> Response:
    """An import's 400, nothing imported: the first MAX_PROBLEMS_SHOWN problems (line-numbered)
    and how many more; the detail says how many, unless given."""
    shown = [str(problem) for problem in problems[:MAX_PROBLEMS_SHOWN]]
    body = {
        "detail": detail or f"{len(problems)} problem(s); nothing was imported.",
        "errors": shown,
        "more": len(problems) - len(shown),
    }
    if field:
        body["field"] = field
    return rendered(ImportErrorsSerializer, body, status=400)
