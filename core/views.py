"""The upload gate: nginx asks it, before reading a body sent to an upload address, whether
the app would read that body (deploy/nginx.conf's auth_request on every upload location)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from .middleware import refusal_response, upload_refusal


@require_safe
def upload_gate(request: HttpRequest) -> HttpResponse:
    """204 when the person of this request (its session cookie or API token, as nginx passes
    them on) may send a body of X-Upload-Length bytes to X-Upload-Uri; else the status the app
    would answer (401, 403, 413), with the app's refusal in X-Upload-Refusal for nginx to send
    (the body of an auth_request's answer never reaches the client). The same rule as
    RequestSizeMiddleware, read from the same function. It reads no body, changes nothing and
    tells a person only about themselves; nginx keeps the location internal."""
    path = unquote(urlsplit(request.headers.get("X-Upload-Uri", "")).path)
    try:
        size: int | None = int(request.headers.get("X-Upload-Length", ""))
    except ValueError:
        size = None  # a length nginx could not pass on counts as large
    refused = upload_refusal(request, path, size)
    if refused is None:
        return HttpResponse(status=204)
    refusal = refusal_response(request, path, *refused)
    answer = HttpResponse(status=refusal.status_code)
    answer["X-Upload-Refusal"] = refusal.content.decode()
    if "WWW-Authenticate" in refusal:
        answer["WWW-Authenticate"] = refusal["WWW-Authenticate"]
    return answer
