"""The download of a release's published leaderboard: the static site as a zip (admins). A GET:
it changes nothing; the zip is streamed as it is built."""

from __future__ import annotations

from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.views.decorators.http import require_GET

from core import access

from ..releases.selectors import latest_release, release_named
from .site import site_folder, zip_stream


@access.role_required(access.ADMIN)
@require_GET
def download(request: HttpRequest) -> StreamingHttpResponse:
    """`?release=NAME`; left out, the latest release."""
    name = request.GET.get("release")
    release = release_named(name) if name else latest_release()
    if release is None:
        raise Http404(f"No release is named {name!r}." if name else "No release has been cut yet.")
    response = StreamingHttpResponse(zip_stream(release), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{site_folder(release)}.zip"'
    return response
