"""The rubrics API. Views are thin: check the role, call the domain code, answer."""

from __future__ import annotations

import tempfile

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import api_view, renderer_classes
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from core import access
from core.http import ErrorSerializer

from .exporting import ExportError, export_to_zip


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


@extend_schema(
    summary="Export the benchmark (admins): a zip of gamut.jsonl, images/ and manifest.json",
    description=(
        "The same files as `manage.py export_benchmark`, byte for byte, in a zip whose entries "
        "are sorted by name and carry a fixed date: two exports of the same state are "
        "identical. The file name holds the start of the content hash."
    ),
    responses={
        (200, "application/zip"): OpenApiResponse(
            OpenApiTypes.BINARY, description="the export as a zip"
        ),
        **{(code, JSONRenderer.media_type): ErrorSerializer for code in (401, 403, 500)},
    },
)
@api_view(["GET"])
@renderer_classes([JSONRenderer, ZipRenderer])
@access.role_required(access.ADMIN, message="Only admins export the benchmark.")
def benchmark_export(request: Request) -> FileResponse | Response:
    # On disk, not in memory: the photos make an export large. No context manager: the
    # response owns the file once it is returned and closes (and so deletes) it.
    handle = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        manifest = export_to_zip(handle)
    except ExportError as exc:
        handle.close()
        return Response({"detail": str(exc)}, status=500)
    except BaseException:
        handle.close()
        raise
    handle.seek(0)
    short_hash = manifest.content_hash.removeprefix("sha256:")[:12]
    return FileResponse(
        handle,
        as_attachment=True,
        content_type="application/zip",
        filename=f"gamut-benchmark-{short_hash}.zip",
    )
