"""CRAG-MM import in the browser (`/import/crag-mm/`) and over the API
(`POST /api/images/import/crag-mm/`), admins only: Parquet shards uploaded as they lie under the
dataset's data/ folder, an optional entities file, a dry run that shows the domain table and
what would be imported."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.errors import TooLarge
from core.http import ErrorSerializer, rendered
from core.middleware import takes_upload

from .crag_mm import SPLITS, crag_mm_from_upload
from .importing import ImportProblems
from .models import ImportBatch


def _outcome(data, files, *, actor, source: str) -> dict:
    outcome = crag_mm_from_upload(
        files.getlist("shards"),
        entities=files.get("entities"),
        split=data.get("split") or "validation",
        revision=(data.get("revision") or "").strip()[:100],
        dry_run=str(data.get("dry_run", "")).lower() in ("1", "true", "on", "yes"),
        actor=actor,
        source=source,
    )
    return {
        "dry_run": outcome.result is None,
        "summary": outcome.lines,
        "imported": outcome.result.imported if outcome.result else [],
        "skipped": outcome.result.skipped if outcome.result else [],
        "to_import": len(outcome.plan.entries),
        "needs_entity": outcome.plan.needs_entity,
        "url_only": len(outcome.plan.url_only),
        "left_out": sum(outcome.plan.left_out.values()) + sum(outcome.plan.unmapped.values()),
    }


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


@takes_upload("IMPORT_MAX_TOTAL_BYTES", "IMPORT_MAX_MANIFEST_BYTES")
@access.role_required(access.ADMIN)
def import_crag_mm_page(request: HttpRequest) -> HttpResponse:
    context: dict = {"splits": SPLITS}
    status = 200
    if request.method == "POST":
        try:
            context["outcome"] = _outcome(
                request.POST, request.FILES, actor=request.user, source=ImportBatch.Source.WEB
            )
        except ImportProblems as exc:
            context["problems"] = exc.problems
            status = 400
        except TooLarge as exc:
            context["problems"] = [exc.message]
            status = 413
    template = "annotation/import_crag_mm.html"
    if request.htmx:
        template += "#result"
    return render(request, template, context, status=status)


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
        body = _outcome(
            request.data, request.FILES, actor=request.user, source=ImportBatch.Source.API
        )
    except ImportProblems as exc:
        return rendered(CragMmProblemsSerializer, {"errors": exc.problems}, status=400)
    return rendered(CragMmOutcomeSerializer, body, status=200 if body["dry_run"] else 201)
