"""The rubrics API. Views are thin: check the role, call the domain code, answer."""

from __future__ import annotations

from typing import Any

from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, renderer_classes
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.errors import Conflict, DomainError, NotFound
from core.http import ErrorSerializer, rendered
from judging.releases.selectors import release_named

from . import export_jobs, services
from .compiler import TIERS
from .exporting import ExportError
from .models import Origin, RubricCheck, RubricVersion


class ZipRenderer(BaseRenderer):
    """Lets a client ask for `Accept: application/zip` rather than be refused with 406. The zip
    itself leaves as a FileResponse, past every renderer: what reaches this one is an error,
    and it goes out as JSON, saying so."""

    media_type = "application/zip"
    format = "zip"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = JSONRenderer.media_type
        return JSONRenderer().render(data)


# --- the benchmark export, made in the background (rubrics/export_jobs.py) -------------------


class ExportProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(required=False, help_text="questions written so far")
    total = serializers.IntegerField(required=False, help_text="questions to write")
    what = serializers.CharField(required=False, help_text="what done and total count")
    step = serializers.CharField(
        required=False, help_text="what the published site's writing does now (no count)"
    )


class ExportSerializer(serializers.Serializer):
    job = serializers.IntegerField(source="job.pk")
    status = serializers.CharField(
        source="job.status", help_text="queued, running, done, failed or cancelled"
    )
    layout = serializers.ChoiceField(choices=list(export_jobs.LAYOUTS))
    release = serializers.CharField(allow_null=True, help_text="null: the current state")
    started_by = serializers.CharField(source="job.launched_by", allow_null=True)
    created_at = serializers.DateTimeField(source="job.created_at")
    finished_at = serializers.DateTimeField(source="job.finished_at", allow_null=True)
    progress = ExportProgressSerializer(
        allow_null=True, help_text="how far the writing is (null before it starts)"
    )
    file_name = serializers.CharField(allow_null=True)
    bytes = serializers.IntegerField(allow_null=True)
    content_hash = serializers.CharField(allow_null=True)
    questions = serializers.IntegerField(allow_null=True)
    download = serializers.CharField(
        allow_null=True, help_text="where the zip is, once it is written and while it is kept"
    )
    removed = serializers.BooleanField(help_text="the file was removed to make room")
    error = serializers.CharField(help_text="why it failed, when it did")


def _export_data(found: export_jobs.Export) -> dict[str, Any]:
    result = found.result or {}
    return {
        "job": found.job,
        "layout": found.layout,
        "release": found.release,
        "progress": found.job.progress or None,
        "file_name": result.get("name"),
        "bytes": result.get("bytes"),
        "content_hash": result.get("content_hash"),
        "questions": result.get("questions"),
        "download": (
            reverse("api_benchmark_export_file", args=[found.job.pk]) if found.path else None
        ),
        "removed": found.removed,
        "error": found.error,
    }


class ExportRequestSerializer(serializers.Serializer):
    layout = serializers.ChoiceField(choices=list(export_jobs.LAYOUTS), default="gamut")
    release = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="a release's name (GET /api/releases/); left out: the current state",
    )


@extend_schema(
    methods=["GET"],
    summary="The benchmark exports, newest first (admins)",
    description=(
        "The last 20 exports with their state. A finished one has `download`, the address of its "
        "zip (the files of the 5 newest are kept)."
    ),
    responses={200: ExportSerializer(many=True), 401: ErrorSerializer, 403: ErrorSerializer},
)
@extend_schema(
    methods=["POST"],
    summary="Export the benchmark in the background (admins)",
    description=(
        "Starts writing the export as a zip: `gamut.jsonl`, `images/` and `manifest.json`, the "
        "same files as `manage.py export_benchmark`, byte for byte, in a zip whose entries are "
        "sorted by name and carry a fixed date (two exports of the same state are identical). "
        "`layout=huggingface` gives the Hugging Face dataset folder instead (data/test-*.parquet, "
        "README.md, gamut_inspect/, manifest.json). `release` exports that release rather than "
        "the current state. `layout=site` publishes a release's leaderboard as a static site "
        "(the folder `publish_leaderboard` writes; `release` left out: the latest release). "
        "Answers 202 with the export; poll `GET /api/benchmark/exports/{job}/` "
        "until `status` is done, then fetch its `download`. 409 while another export runs, or for "
        "a site when no release has been cut."
    ),
    request=ExportRequestSerializer,
    responses={
        202: ExportSerializer,
        400: ErrorSerializer,
        401: ErrorSerializer,
        403: ErrorSerializer,
        409: ErrorSerializer,
        503: ErrorSerializer,
    },
)
@api_view(["GET", "POST"])
@access.role_required(access.ADMIN, message="Only admins export the benchmark.")
def benchmark_exports(request: Request) -> Response:
    if request.method == "GET":
        return rendered(
            ExportSerializer, [_export_data(e) for e in export_jobs.exports()], many=True
        )
    asked = ExportRequestSerializer(data=request.data)
    asked.is_valid(raise_exception=True)
    layout, release = asked.validated_data["layout"], asked.validated_data.get("release")
    if release and not release_named(release):
        raise NotFound(f"No release is named {release!r}: GET /api/releases/ lists them.")
    try:
        job = export_jobs.launch(request.user, layout, release)
    except ExportError as exc:
        raise Conflict(str(exc)) from exc
    except export_jobs.AlreadyRunning as exc:
        raise Conflict(
            f"An export is being written already (job {exc.job.pk}): wait for it to finish."
        ) from exc
    return rendered(ExportSerializer, _export_data(export_jobs.one(job.pk)), status=202)


def _export_or_404(job_id: int) -> export_jobs.Export:
    found = export_jobs.one(job_id)
    if found is None:
        raise NotFound(f"No export has the number {job_id}.")
    return found


@extend_schema(
    summary="One benchmark export and its state (admins)",
    responses={
        200: ExportSerializer,
        401: ErrorSerializer,
        403: ErrorSerializer,
        404: ErrorSerializer,
    },
)
@api_view(["GET"])
@access.role_required(access.ADMIN, message="Only admins export the benchmark.")
def benchmark_export(request: Request, job_id: int) -> Response:
    return rendered(ExportSerializer, _export_data(_export_or_404(job_id)))


@extend_schema(
    summary="Download a finished benchmark export as a zip (admins)",
    description=(
        "The zip an export wrote; its name holds the start of the content hash. 409 while the "
        "export is not finished (or failed), 410 once its file was removed to make room."
    ),
    responses={
        (200, "application/zip"): OpenApiResponse(
            OpenApiTypes.BINARY, description="the export as a zip"
        ),
        **{(code, JSONRenderer.media_type): ErrorSerializer for code in (401, 403, 404, 409, 410)},
    },
)
@api_view(["GET"])
@renderer_classes([JSONRenderer, ZipRenderer])
@access.role_required(access.ADMIN, message="Only admins export the benchmark.")
def benchmark_export_file(request: Request, job_id: int) -> FileResponse | Response:
    found = _export_or_404(job_id)
    if found.removed:
        return rendered(
            ErrorSerializer,
            {"detail": "This export's file was removed to make room: export again."},
            status=410,
        )
    path = found.path
    if path is None:
        detail = (
            f"This export failed: {found.error}"
            if found.error
            else "This export is not finished yet: its status says when it is."
        )
        raise Conflict(detail)
    return FileResponse(
        path.open("rb"), as_attachment=True, content_type="application/zip", filename=path.name
    )


# --- the revision workspace over the API (rubric revisers) ----------------------------------
#
# The same services as the htmx workspace (rubrics/services.py): each edit carries the draft's
# `revision` and is refused with 409 when another save came in between (optimistic locking),
# answered with the version as it stands now, so a script can reload and decide again.


class WorkspaceCheckSerializer(serializers.Serializer):
    pk = serializers.IntegerField(help_text="what the edit endpoints take")
    check_id = serializers.CharField(help_text="the compiler's id, or H<n> when added by hand")
    text = serializers.CharField()
    tier = serializers.ChoiceField(choices=TIERS)
    position = serializers.IntegerField()
    kind = serializers.CharField()
    source = serializers.CharField(help_text="the meta item or meta-insight it came from")
    rule = serializers.CharField()
    origin = serializers.ChoiceField(choices=Origin.values)
    snippets = serializers.ListField(child=serializers.CharField())
    deleted = serializers.BooleanField()
    delete_reason = serializers.CharField()


class WarningSerializer(serializers.Serializer):
    kind = serializers.CharField()
    message = serializers.CharField()
    source = serializers.CharField()
    check_ids = serializers.ListField(child=serializers.CharField())


class VersionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    rubric = serializers.IntegerField()
    source_id = serializers.CharField()
    question = serializers.CharField()
    stage = serializers.CharField()
    revision = serializers.IntegerField(help_text="send it back with every edit")
    frozen = serializers.BooleanField()
    editable = serializers.BooleanField(help_text="a draft, and you are a rubric reviser")
    meta_rubric = serializers.DictField()
    checks = WorkspaceCheckSerializer(many=True, help_text="in order, deleted ones included")
    warnings = WarningSerializer(many=True)


class StaleSerializer(ErrorSerializer):
    current = VersionSerializer(
        required=False, help_text="the version as it stands now, when someone saved in between"
    )


class EditedSerializer(serializers.Serializer):
    check = WorkspaceCheckSerializer()
    revision = serializers.IntegerField(help_text="the draft's revision after this edit")


class _Revision(serializers.Serializer):
    revision = serializers.IntegerField(help_text="the revision the edit was made on")


class CheckChangeSerializer(_Revision):
    text = serializers.CharField(
        required=False, allow_blank=True, help_text="new text (give text or tier, not both)"
    )
    tier = serializers.CharField(required=False, help_text="answer_critical, valuable, context")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("text" in attrs) == ("tier" in attrs):
            raise serializers.ValidationError({"text": "Give text or tier (one change a request)."})
        return attrs


class CheckDeleteSerializer(_Revision):
    reason = serializers.CharField(allow_blank=True, help_text="why the check goes")


class CheckAddSerializer(_Revision):
    text = serializers.CharField(allow_blank=True)
    tier = serializers.CharField()
    source = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="a meta item or meta-insight id to link it to",
    )
    after = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="the pk of the check it goes after (none: last)",
    )


class CheckMoveSerializer(_Revision):
    direction = serializers.ChoiceField(
        choices=["up", "down"], required=False, help_text="one place within its tier"
    )
    to_position = serializers.IntegerField(
        required=False, min_value=1, help_text="or a position in the whole list"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("direction" in attrs) == ("to_position" in attrs):
            raise serializers.ValidationError({"direction": "Give direction or to_position."})
        return attrs


def _check(row: RubricCheck) -> dict[str, Any]:
    return {
        "pk": row.pk,
        "check_id": row.check_id,
        "text": row.text,
        "tier": row.tier,
        "position": row.position,
        "kind": row.kind,
        "source": row.source,
        "rule": row.rule,
        "origin": row.origin,
        "snippets": list(row.snippets),
        "deleted": row.deleted_at is not None,
        "delete_reason": row.delete_reason,
    }


def version_dict(version: RubricVersion, user: Any) -> dict[str, Any]:
    rows = list(version.checks.order_by("position", "pk"))
    question = version.rubric.question
    return {
        "id": version.pk,
        "rubric": version.rubric_id,
        "source_id": question.image.source_id,
        "question": question.text,
        "stage": version.stage,
        "revision": version.revision,
        "frozen": version.frozen_at is not None,
        "editable": version.frozen_at is None and services.is_reviser(user),
        "meta_rubric": version.meta_rubric,
        "checks": [_check(row) for row in rows],
        "warnings": [
            {"kind": w.kind, "message": w.message, "source": w.source, "check_ids": w.check_ids}
            for w in services.rubric_warnings(version.meta_rubric, rows)
        ],
    }


def _version(version_id: int) -> RubricVersion | None:
    return (
        RubricVersion.objects.select_related("rubric__question__image")
        .filter(pk=version_id)
        .first()
    )


def _refusal(exc: DomainError, version_id: int, user: Any) -> Response:
    body: dict[str, Any] = {"detail": exc.message}
    if exc.field:
        body["field"] = exc.field
    if isinstance(exc, services.Stale):
        # As the page does: the current state comes with the refusal.
        body["field"] = "revision"
        version = _version(version_id)
        if version is not None:
            body["current"] = version_dict(version, user)
    return rendered(StaleSerializer, body, status=exc.status)


def _reviser_only(request: Request) -> Response | None:
    if not services.is_reviser(request.user):
        return rendered(
            ErrorSerializer, {"detail": "Only rubric revisers edit rubrics."}, status=403
        )
    return None


def _edit(
    request: Request,
    version_id: int,
    serializer_class: type[serializers.Serializer],
    action: Any,
    *,
    created: bool = False,
    **fields: Any,
) -> Response:
    from llm.api import validated

    if (denied := _reviser_only(request)) is not None:
        return denied
    data, invalid = validated(serializer_class, request)
    if invalid is not None:
        return invalid
    assert data is not None
    try:
        row = action(user=request.user, version_id=version_id, **fields, **data)
    except DomainError as exc:
        return _refusal(exc, version_id, request.user)
    return rendered(
        EditedSerializer,
        {"check": _check(row), "revision": data["revision"] + 1},
        status=201 if created else 200,
    )


_EDIT_ERRORS = {
    **dict.fromkeys((400, 403, 404), ErrorSerializer),
    409: StaleSerializer,
}


@extend_schema(
    summary="Claim the next rubric waiting for a human round (rubric revisers)",
    request=None,
    responses={200: VersionSerializer, 204: None, 403: ErrorSerializer},
    description="The draft you hold, or the next one opened for you (held for 30 "
    "minutes from your last edit); 204 when none is waiting.",
)
@api_view(["POST"])
def workspace_claim(request: Request) -> Response:
    if (denied := _reviser_only(request)) is not None:
        return denied
    version = services.revision_claim(user=request.user)
    if version is None:
        return Response(status=204)
    return rendered(VersionSerializer, version_dict(_version(version.pk), request.user))


@extend_schema(
    summary="A rubric version: its checks, revision and warnings (revisers, admins)",
    responses={200: VersionSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
)
@api_view(["GET"])
def workspace_detail(request: Request, version_id: int) -> Response:
    if not (services.is_reviser(request.user) or access.is_admin(request.user)):
        return rendered(
            ErrorSerializer,
            {"detail": "Only rubric revisers and admins read rubric versions."},
            status=403,
        )
    version = _version(version_id)
    if version is None:
        return rendered(
            ErrorSerializer, {"detail": f"There is no rubric version {version_id}."}, status=404
        )
    return rendered(VersionSerializer, version_dict(version, request.user))


@extend_schema(
    summary="Add a check by hand (rubric revisers)",
    request=CheckAddSerializer,
    responses={201: EditedSerializer, **_EDIT_ERRORS},
)
@api_view(["POST"])
def workspace_check_add(request: Request, version_id: int) -> Response:
    def add(*, after: int | None = None, **fields: Any) -> RubricCheck:
        return services.check_add(after_check_pk=after, **fields)

    return _edit(request, version_id, CheckAddSerializer, add, created=True)


@extend_schema(
    methods=["PATCH"],
    summary="Change a check's text or tier (rubric revisers)",
    request=CheckChangeSerializer,
    responses={200: EditedSerializer, **_EDIT_ERRORS},
)
@extend_schema(
    methods=["DELETE"],
    summary="Delete a check, with a reason (rubric revisers)",
    request=CheckDeleteSerializer,
    responses={200: EditedSerializer, **_EDIT_ERRORS},
)
@api_view(["PATCH", "DELETE"])
def workspace_check_change(request: Request, version_id: int, check_pk: int) -> Response:
    if request.method == "DELETE":
        return _edit(
            request, version_id, CheckDeleteSerializer, services.check_delete, check_pk=check_pk
        )

    def change(*, text: str | None = None, tier: str | None = None, **fields: Any):
        if text is not None:
            return services.check_edit_text(text=text, **fields)
        return services.check_retier(tier=tier, **fields)

    return _edit(request, version_id, CheckChangeSerializer, change, check_pk=check_pk)


@extend_schema(
    summary="Restore a deleted check (rubric revisers)",
    request=_Revision,
    responses={200: EditedSerializer, **_EDIT_ERRORS},
)
@api_view(["POST"])
def workspace_check_restore(request: Request, version_id: int, check_pk: int) -> Response:
    return _edit(request, version_id, _Revision, services.check_restore, check_pk=check_pk)


@extend_schema(
    summary="Move a check up or down within its tier, or to a position (rubric revisers)",
    request=CheckMoveSerializer,
    responses={200: EditedSerializer, **_EDIT_ERRORS},
)
@api_view(["POST"])
def workspace_check_move(request: Request, version_id: int, check_pk: int) -> Response:
    return _edit(request, version_id, CheckMoveSerializer, services.check_move, check_pk=check_pk)


@extend_schema(
    summary="Complete the round: the draft is frozen (rubric revisers)",
    request=_Revision,
    responses={200: VersionSerializer, **_EDIT_ERRORS},
)
@api_view(["POST"])
def workspace_complete(request: Request, version_id: int) -> Response:
    from llm.api import validated

    if (denied := _reviser_only(request)) is not None:
        return denied
    data, invalid = validated(_Revision, request)
    if invalid is not None:
        return invalid
    assert data is not None
    try:
        services.revision_complete(
            user=request.user, version_id=version_id, revision=data["revision"]
        )
    except DomainError as exc:
        return _refusal(exc, version_id, request.user)
    return rendered(VersionSerializer, version_dict(_version(version_id), request.user))
