"""The entity confirmations over the API (the page is /entities/): the proposals waiting, and
confirming or correcting one. The same service as the page, so the same refusals."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.http import ErrorSerializer

from . import services
from .llm_entities import MARKER
from .models import AuditEvent, Image, Popularity
from .services import ENTITY_MAX

LISTED = 100  # proposals per answer, oldest first: confirmed ones leave the list


class ProposalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    source_id = serializers.CharField()
    domain = serializers.CharField()
    entity = serializers.CharField(help_text="the proposed entity")
    popularity = serializers.ChoiceField(choices=Popularity.values)
    reason = serializers.CharField(help_text="the model's reason (empty if not recorded)")
    source_query = serializers.CharField()
    source_answer = serializers.CharField()
    url = serializers.CharField(help_text="address of the photo (needs the same authentication)")


class ConfirmInSerializer(serializers.Serializer):
    proposed = serializers.CharField(
        max_length=ENTITY_MAX, help_text="the proposal as read: a confirmation counts only for it"
    )
    entity = serializers.CharField(
        required=False,
        allow_blank=True,  # refused by the service: sent blank is a correction, not a confirm
        max_length=ENTITY_MAX,
        help_text="the corrected entity; leave it out to confirm the proposal",
    )


class ConfirmOutSerializer(serializers.Serializer):
    image = serializers.IntegerField()
    action = serializers.ChoiceField(choices=["entity.confirm", "entity.correct"])
    entity = serializers.CharField()
    by = serializers.CharField()
    at = serializers.DateTimeField()


@extend_schema(
    summary="The proposed entities waiting for an annotator's confirmation (oldest 100)",
    responses={200: ProposalSerializer(many=True), 403: ErrorSerializer},
)
@api_view(["GET"])
@access.role_required(access.ANNOTATOR, message="Only annotators confirm entities.")
def proposal_list(request: Request) -> Response:
    images = list(Image.objects.entity_proposed().order_by("pk")[:LISTED])
    reasons: dict[int, str] = {}
    for image_id, data in (
        AuditEvent.objects.filter(action=MARKER, image__in=images)
        .order_by("pk")
        .values_list("image_id", "data")
    ):
        reasons[image_id] = ((data or {}).get("result") or {}).get("reason", "")
    return Response(
        [
            {
                "id": image.pk,
                "source_id": image.source_id,
                "domain": image.domain,
                "entity": image.entity,
                "popularity": image.popularity,
                "reason": reasons.get(image.pk, ""),
                "source_query": image.source_query,
                "source_answer": image.source_answer,
                "url": request.build_absolute_uri(reverse("image_file", args=[image.source_id])),
            }
            for image in images
        ]
    )


@extend_schema(
    summary="Confirm an image's proposed entity, or correct it (with `entity`)",
    request=ConfirmInSerializer,
    responses={
        200: ConfirmOutSerializer,
        400: ErrorSerializer,
        403: ErrorSerializer,
        404: ErrorSerializer,
        409: ErrorSerializer,
    },
)
@api_view(["POST"])
@access.role_required(access.ANNOTATOR, message="Only annotators confirm entities.")
def proposal_confirm(request: Request, image_id: int) -> Response:
    incoming = ConfirmInSerializer(data=request.data)
    incoming.is_valid(raise_exception=True)
    event = services.image_entity_confirm(
        user=request.user,
        image_id=image_id,
        proposed=incoming.validated_data["proposed"],
        corrected=incoming.validated_data.get("entity", "") if "entity" in request.data else None,
    )
    return Response(
        {
            "image": image_id,
            "action": event.action,
            "entity": event.data["entity"],
            "by": request.user.get_username(),
            "at": event.at,
        }
    )
