"""Images over the API: an image with its candidates and question, the imports (a JSONL manifest
and a zip; CRAG-MM's Parquet shards, with a dry run), and the entity confirmations (the page is
/entities/): the proposals waiting, and confirming or correcting one. The same services as the
pages, so the same refusals."""

from __future__ import annotations

from django.db.models import Count, Q
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.http import ErrorSerializer, rendered
from core.middleware import takes_upload

from ..candidates import ENTITY_MAX
from ..models import (
    AuditEvent,
    CandidateStatus,
    Image,
    ImportBatch,
    Popularity,
    image_status,
)
from . import services
from .crag_mm import SPLITS, crag_mm_outcome
from .entities import MARKER
from .importing import (
    MAX_PROBLEMS_SHOWN,
    ImportProblems,
    import_from_upload,
    read_manifest,
)

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


class CragMmOutcomeSerializer(serializers.Serializer):
    """A dry run's plan or an import's result: the same fields for both."""

    dry_run = serializers.BooleanField()
    summary = serializers.ListField(child=serializers.CharField())
    imported = serializers.ListField(child=serializers.CharField(), help_text="empty in a dry run")
    skipped = serializers.ListField(child=serializers.CharField(), help_text="empty in a dry run")
    to_import = serializers.IntegerField()
    needs_entity = serializers.IntegerField()
    url_only = serializers.IntegerField()
    left_out = serializers.IntegerField()


class CragMmProblemsSerializer(serializers.Serializer):
    """The import's problems; a request the input boundary refuses has the error body."""

    errors = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="every problem"
    )
    detail = serializers.CharField(required=False)
    field = serializers.CharField(required=False)


@extend_schema(
    summary="Import CRAG-MM Parquet shards (admins)",
    description="Multipart: `shards` (one or more `<split>-*.parquet` files as under the "
    "dataset's data/ folder), `split` (validation or public_test), optional `entities` (JSONL "
    "or CSV: session_id, entity, popularity, egocentric), `revision`, `dry_run`. Every row is "
    "checked first; one bad row and nothing is imported (400 with every problem, by shard "
    "and row).",
    request={
        "multipart/form-data": inline_serializer(
            "CragMmImportRequest",
            {
                "shards": serializers.ListField(child=serializers.FileField()),
                "split": serializers.ChoiceField(choices=SPLITS, default="validation"),
                "entities": serializers.FileField(required=False),
                "revision": serializers.CharField(required=False),
                "dry_run": serializers.BooleanField(required=False),
            },
        )
    },
    responses={
        200: OpenApiResponse(CragMmOutcomeSerializer, description="a dry run"),
        201: OpenApiResponse(CragMmOutcomeSerializer, description="imported"),
        400: CragMmProblemsSerializer,
        401: ErrorSerializer,
        403: ErrorSerializer,
        413: OpenApiResponse(
            ErrorSerializer,
            description="the entities file is over IMPORT_MAX_MANIFEST_BYTES, or the body "
            "over the upload caps (or over 5 MB from anyone but an admin), refused unread",
        ),
    },
)
@takes_upload("IMPORT_MAX_TOTAL_BYTES", "IMPORT_MAX_MANIFEST_BYTES")
@api_view(["POST"])
@parser_classes([MultiPartParser])
@access.role_required(access.ADMIN, message="Only admins import images.")
def import_crag_mm_api(request: Request) -> Response:
    try:
        body = crag_mm_outcome(
            request.data, request.FILES, actor=request.user, source=ImportBatch.Source.API
        )
    except ImportProblems as exc:
        return rendered(CragMmProblemsSerializer, {"errors": exc.problems}, status=400)
    return rendered(CragMmOutcomeSerializer, body, status=200 if body["dry_run"] else 201)
