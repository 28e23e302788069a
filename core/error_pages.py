"""Error pages a person can read: the menu, what went wrong in the view's own words, and a way
on. Django's defaults answer a 405 with an empty body (Chrome then shows "This page isn't
working") and a 404 or 403 with a bare line and no menu."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.template import loader
from django.urls import Resolver404, resolve

# Messages Django raises on its own, which say nothing to a person.
_GENERIC = {"", "Http404", "Resolver404", "PermissionDenied"}
# Addresses above others that only take a form's submission.
_NOT_PAGES = {
    "rubrics_claim",
    "job_launch",
    "job_estimate",
    "judging_runs_launch",
    "judging_runs_estimate",
}


def _message(exception) -> str:
    message = exception.args[0] if exception is not None and exception.args else ""
    if not isinstance(message, str) or message in _GENERIC:
        return ""
    return message[:1:].upper() + message[1:] if message else ""


def way_on(request: HttpRequest) -> str:
    """The nearest page above the address (/review/12/ -> /review/), where the person most
    likely came from; home when none answers a visit."""
    parts = [p for p in request.path.split("/") if p]
    while len(parts) > 1:
        parts.pop()
        candidate = "/" + "/".join(parts) + "/"
        try:
            match = resolve(candidate)
        except Resolver404:
            continue
        if match.url_name not in _NOT_PAGES:
            return candidate
    return "/"


def forbidden(request: HttpRequest, exception=None) -> HttpResponse:
    return render(
        request,
        "403.html",
        {
            "message": _message(exception) or "You may not open this page.",
            "way_on": "/",
        },
        status=403,
    )


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form sent with a stale or missing CSRF token: usually a page left open past a log-out
    or a new log-in in another tab. Say that, rather than Django's page for developers."""
    return render(
        request,
        "403.html",
        {
            "heading": "This form is out of date",
            "message": "This form was sent from a page that is out of date (you logged out or in "
            "again since it was opened). Go back, reload the page and send it again.",
            "way_on": way_on(request),
        },
        status=403,
    )


def not_found(request: HttpRequest, exception=None) -> HttpResponse:
    return render(
        request,
        "404.html",
        {
            "message": _message(exception),
            "way_on": way_on(request),
        },
        status=404,
    )


def refused_text(request: HttpRequest, message: str, sent: str) -> HttpResponse:
    """A page's form refused before its view (core.middleware.InputBoundaryMiddleware): what
    is wrong, what was sent in a box to copy back from, and the way back to the form.
    Rendered without the request, as the 500 page is: the person is not known yet there."""
    page = loader.render_to_string(
        "400_refused_text.html", {"message": message, "sent": sent, "way_on": way_on(request)}
    )
    return HttpResponse(page, status=400)


def server_error(request: HttpRequest) -> HttpResponse:
    # Rendered without the request, so no context processor runs: the menu reads the
    # database, which may be what failed.
    return HttpResponseServerError(loader.render_to_string("500.html"))


class MethodNotAllowedPage:
    """Gives the empty 405 of `require_POST` and friends a page that explains it: the address
    takes a form's submission, not a visit. Only bodiless answers are replaced, so the API's
    JSON 405s stay as DRF writes them."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or response.content or getattr(request, "htmx", False):
            return response
        allowed = [m.strip() for m in response.get("Allow", "").split(",") if m.strip()]
        page = render(
            request,
            "405.html",
            {
                "method": request.method,
                "allowed": allowed,
                "way_on": way_on(request),
            },
            status=405,
        )
        page["Allow"] = response.get("Allow", "")
        return page
