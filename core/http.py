"""Domain errors as HTTP answers, in one place: the DRF exception handler for the API, `refuse`
for pages and htmx partials, and a middleware backstop for anything a view let through."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.template import loader
from django.utils.http import url_has_allowed_host_and_scheme
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from .error_pages import not_found as page_not_found  # the site's own 404 page
from .error_pages import server_error as page_server_error  # the site's own 500 page
from .errors import DomainError


class ErrorSerializer(serializers.Serializer):
    """Every refusal of the API has this body."""

    detail = serializers.CharField()
    field = serializers.CharField(required=False, help_text="the input at fault, when one is")


def rendered(
    serializer: type[serializers.BaseSerializer],
    data: Any,
    *,
    many: bool = False,
    status: int = 200,
    **context: Any,
) -> Response:
    """An API answer rendered through the serializer its schema names (an object or a dict
    read through the serializer's fields), so that the body is what the schema documents: a
    field the serializer lacks is not sent, a field it needs and the data lacks is an error
    here rather than a silent change of the contract."""
    return Response(serializer(data, many=many, context=context).data, status=status)


def _first_message(detail) -> str:
    if isinstance(detail, dict) and detail:
        return _first_message(next(iter(detail.values())))
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail)


def _first_error(detail) -> tuple[str, str | None]:
    """The first message of a DRF validation error and the input (top-level field) it is
    about."""
    if isinstance(detail, dict) and detail:
        key = next(iter(detail))
        return _first_message(detail[key]), None if key == "non_field_errors" else str(key)
    return _first_message(detail), None


def api_exception_handler(exc, context) -> Response | None:
    """DRF's handler, with domain errors and validation errors in the one error body:
    {"detail": "...", "field": "..."}."""
    if isinstance(exc, DomainError):
        return Response(exc.body(), status=exc.status)
    if isinstance(exc, exceptions.ValidationError):
        message, field = _first_error(exc.detail)
        body = {"detail": f"{field}: {message}" if field else message}
        if field:
            body["field"] = field
        return Response(body, status=400)
    return drf_exception_handler(exc, context)


def refuse(
    request: HttpRequest,
    exc: DomainError,
    *,
    redirect_to: str,
    partial: Callable[[], HttpResponse] | None = None,
) -> HttpResponse:
    """A refused page action: 404 stays a 404; an htmx request gets `partial()` (the region
    again, showing the refusal), a plain post the message and post-redirect-get."""
    if exc.status == 404:
        raise Http404(exc.message) from exc
    if request.htmx and partial is not None:
        return partial(exc)
    messages.error(request, exc.message)
    return redirect(redirect_to)


class DomainErrorMiddleware:
    """The backstop: a domain error that escapes a view is the 4xx it stands for, never a
    500 (JSON under /api/, plain text elsewhere)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not isinstance(exc, DomainError):
            return None
        return error_response(request, exc.status, exc.message, exc.field)


def safe_next(request: HttpRequest) -> bool:
    """Whether `next` is a path on this site. Only a path that starts with "/": redirect()
    takes a bare word for a URL name (`next=id` raised NoReverseMatch) and a relative one
    would land beneath the address that was posted to."""
    target = request.POST.get("next") or ""
    return target.startswith("/") and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )


def error_response(
    request: HttpRequest,
    status: int,
    message: str,
    field: str | None = None,
    *,
    path: str | None = None,
) -> HttpResponse:
    """The refusal as the address `path` (by default the request's) gives it: the API's error
    body under /api/, plain text elsewhere."""
    if (request.path if path is None else path).startswith("/api/"):
        body = {"detail": message, **({"field": field} if field else {})}
        return JsonResponse(body, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: under /api/ an address that matches no route (/api/candidates/abc/) gets
    the API's JSON error body, as every other refusal there; pages keep Django's 404 page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)

    return page_not_found(request, exception)


DATABASE_UNAVAILABLE = (
    "The database is not answering (it may be restarting), so nothing was read or saved for "
    "this request. Try again in a few seconds."
)
SERVER_ERROR = (
    "The server failed to answer this request. If it saved something, that is kept: read it "
    "back before sending the request again."
)
RETRY_AFTER_SECONDS = 5


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: an exception no view handled. The database not answering (a restart, an
    outage: Django's OperationalError or InterfaceError, whichever part of the request met it)
    is a 503 with Retry-After, not a 500: the request may simply be sent again. Under /api/
    both are the API's JSON error body; pages get a plain page rendered without the request,
    so nothing on it reads the database."""
    failure = sys.exc_info()[1]  # handler500 is called while Django handles the exception
    if isinstance(failure, OperationalError | InterfaceError):
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse({"detail": DATABASE_UNAVAILABLE}, status=503)
        else:
            page = loader.render_to_string("503.html", {"path": request.path})
            response = HttpResponse(page, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": SERVER_ERROR}, status=500)

    return page_server_error(request)
