"""The review API: the exact contract that scripts use. Views are thin: check the role, call a
service, render the answer through the serializer the schema documents (core.http.rendered);
errors become status codes at core.http."""

from __future__ import annotations

import uuid

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from django.utils.crypto import salted_hmac
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.http import ErrorSerializer, rendered

from ..candidates import MAX_SECONDS, MAX_TEXT, Claimed
from ..models import (
    REASON_KEYS,
    Candidate,
    Decision,
    Review,
    status_visible_to,
)
from . import services


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


# The request bodies are validated by these serializers (so the schema says what is accepted),
# then by the services, which also serve the pages and commands (the rules between fields:
# revise needs a text, accept needs an acceptance).
class ReviewInSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=Decision.values)
    revised_text = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=MAX_TEXT,
        help_text="required for revise, refused otherwise",
    )
    reasons = serializers.ListField(
        child=serializers.ChoiceField(choices=REASON_KEYS), required=False
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=services.MAX_COMMENT
    )
    seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_SECONDS
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
        max_length=MAX_TEXT,
        help_text="required for revise: one annotator's revision or the adjudicator's own",
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=services.MAX_COMMENT
    )
    seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_SECONDS
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


def image_ref(request: Request, candidate: Candidate) -> dict:
    from django.urls import reverse

    image = candidate.image
    return {
        "source_id": image.source_id,
        "entity": image.entity,
        "domain": image.domain,
        "url": request.build_absolute_uri(reverse("image_file", args=[image.source_id])),
    }


def _claimed(request: Request, claimed: Claimed) -> dict:
    from django.conf import settings

    candidate = claimed.candidate
    return {
        "id": candidate.pk,
        "text": candidate.text,
        "round": candidate.round,
        "image": image_ref(request, candidate),
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
