"""The input boundary, in two steps before any view or the database.

RequestSizeMiddleware: a body is refused by its Content-Length before a byte of it is read or
spooled to a temporary file: at most DATA_UPLOAD_MAX_MEMORY_SIZE for every address, more only
for the addresses that take an upload (`@takes_upload`) and from the people who may send one
(upload_refusal; nginx asks the same function through the upload gate, core/views.py).

InputBoundaryMiddleware: every request's path, query, form fields, uploaded file names and JSON
body are looked at once for what no field may hold (control characters, lone surrogates, values
over core.text.MAX_VALUE). Field limits and formats are the services' and serializers'
business; this is the floor under them. A page's form over that floor is refused in the page's
words, what was typed given back: on a page of its own for a plain post (with the text to copy),
above the form for htmx (app.js names the field by its label: X-Refused-Field says which)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user
from django.core.exceptions import MiddlewareNotUsed
from django.http import Http404, HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import Resolver404, resolve

from . import access
from .error_pages import refused_text
from .http import error_response, not_found
from .text import MAX_VALUE, bad_character

MAX_FILE_NAME = 255
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


# A form's key may be named to the page (app.js finds the field by it) when it is one.
_FIELD_KEY = re.compile(r"\A[A-Za-z0-9_.\[\]-]{1,100}\Z")
SOMETHING_SENT = "A text you sent"


def too_long(what: str, value: str, limit: int = MAX_VALUE) -> str:
    return f"{what} is longer than {limit:,} characters ({len(value):,} sent): shorten it."


def _problem(field: str, value: str, *, multiline: bool, limit: int = MAX_VALUE) -> str | None:
    """What is wrong with `value`, the text of `field`, or None. A key is what an address or an
    API call names a value by, so the message names it; a page's form is refused apart."""
    if len(value) > limit:
        return too_long(field, value, limit)
    bad = bad_character(value, multiline=multiline)
    return f"{field} may not contain {bad}." if bad else None


@dataclass(frozen=True)
class Refusal:
    field: str
    message: str
    too_long: str | None = None  # a page form's over-long text, to give back to its sender


def _json_strings(data: Any, path: str = "") -> Iterator[tuple[str, str, bool]]:
    """(field, text, is_key) for every string of a JSON document, keys included."""
    if isinstance(data, str):
        yield path or "body", data, False
    elif isinstance(data, dict):
        for key, value in data.items():
            name = f"{path}.{key}" if path else str(key)
            yield name, str(key), True
            yield from _json_strings(value, name)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _json_strings(value, f"{path}[{index}]" if path else f"[{index}]")


class InputBoundaryMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        found = self._check(request)
        if found is None:
            return self.get_response(request)
        if found.too_long is None or request.path.startswith("/api/"):
            return error_response(request, 400, found.message, found.field)
        if request.headers.get("HX-Request") == "true":
            # app.js says it above the form, which keeps what was typed, and names the field
            # by the label the page gives it.
            response = error_response(request, 400, found.message)
            if _FIELD_KEY.match(found.field):
                response["X-Refused-Field"] = found.field
            return response
        return refused_text(request, found.message, found.too_long)

    def _check(self, request: HttpRequest) -> Refusal | None:
        problem = _problem("path", request.path, multiline=False)
        if problem:
            return Refusal("path", problem)
        for key, values in request.GET.lists():
            for field, text, multiline in ((key, key, False), *((key, v, False) for v in values)):
                problem = _problem(field, text, multiline=multiline)
                if problem:
                    return Refusal(field, problem)
        content_type = request.content_type or ""
        if request.method in ("POST", "PUT", "PATCH"):
            if content_type in _FORMS:
                return self._check_form(request)
            if content_type == "application/json" or content_type.endswith("+json"):
                return self._check_json(request)
        return None

    def _check_form(self, request: HttpRequest) -> Refusal | None:
        try:
            fields = request.POST
        except MultiPartParserError:
            return None  # not a readable form: the view's parser answers that, with its 400
        api = request.path.startswith("/api/")
        for key, values in fields.lists():
            for text in (key, *values):
                if len(text) > MAX_VALUE and not api:
                    # A page's field: its key is no word the person knows (app.js names it).
                    return Refusal(key, too_long(SOMETHING_SENT, text), too_long=text)
            problem = _problem(key, key, multiline=False)
            for value in values:
                problem = problem or _problem(key, value, multiline=True)
            if problem:
                return Refusal(key, problem)
        for key, upload in request.FILES.items():
            problem = _problem(key, upload.name or "", multiline=False, limit=MAX_FILE_NAME)
            if problem:
                return Refusal(key, f"the file name of {problem}")
        return None

    def _check_json(self, request: HttpRequest) -> Refusal | None:
        try:
            data = json.loads(request.body or b"null")
        except (ValueError, UnicodeDecodeError):
            return None  # not JSON: the parser of the view answers that, with its own 400
        except RecursionError:
            return Refusal("body", "body: the JSON nests too deeply.")
        try:
            for field, text, is_key in _json_strings(data):
                problem = _problem(field, text, multiline=not is_key)
                if problem:
                    return Refusal(field, problem)
        except RecursionError:
            return Refusal("body", "body: the JSON nests too deeply.")
        return None


# What a multipart body carries beside the files an import's caps count: the parts' headers,
# and a zip's own headers and directory (about 100 bytes a member).
UPLOAD_OVERHEAD = 16 * 1024 * 1024


def takes_upload(*caps: str, role: str = access.ADMIN) -> Callable:
    """Marks a view whose body may be larger than DATA_UPLOAD_MAX_MEMORY_SIZE: up to the sum of
    the named settings (and UPLOAD_OVERHEAD), from a person holding `role`. Outermost, so that
    the function the URL resolves to carries it."""

    def mark(view: Callable) -> Callable:
        view.upload_caps = caps
        view.upload_role = role
        return view

    return mark


def upload_cap(view: Callable | None) -> int | None:
    """The most a body sent to `view` may hold when it is marked @takes_upload: the sum of its
    settings and UPLOAD_OVERHEAD (deploy/nginx.conf's sizes are these, tests/test_deploy.py
    holds them equal); None for any other view."""
    caps = getattr(view, "upload_caps", None)
    if not caps:
        return None
    return sum(getattr(settings, name) for name in caps) + UPLOAD_OVERHEAD


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:,.1f} MB"


def sender(request: HttpRequest):
    """The person sending the request: the API token's when it carries one, else the
    session's."""
    token = access.api_token_user(request)
    return token if token is not None else get_user(request)


def upload_refusal(request: HttpRequest, path: str, size: int | None) -> tuple[int, str] | None:
    """The one rule for large bodies, asked by RequestSizeMiddleware before Django reads a body
    and by the upload gate (core/views.py) before nginx reads one: None when a body of `size`
    bytes sent to `path` by the person of `request` may be read; else the status and the
    message: 413 for a body larger than the address takes, 401 (nobody logged in) or 403 (no
    role) for a large body to an upload address from someone who may not upload. A body whose
    length is not said (`size` None) counts as large. Who is sending is asked (one session or
    token lookup) only for a large body to an upload address."""
    small = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if small is None or (size is not None and size <= small):
        return None
    said = "does not say its length" if size is None else f"is {_mb(size)}"
    try:
        view = resolve(path).func
    except Resolver404:
        view = None
    cap = upload_cap(view)
    if cap is None:
        return 413, (
            f"The request {said}; this address takes at most {_mb(small)}, so it was refused "
            "unread."
        )
    person = sender(request)
    if not access.has_role(person, view.upload_role):
        return 403 if person.is_authenticated else 401, (
            f"The request {said}; only {access.audience(view.upload_role)}, logged in, may "
            f"send more than {_mb(small)} here, so it was refused unread."
        )
    if size is not None and size > cap:
        return 413, (
            f"The upload is {_mb(size)}, over the {_mb(cap)} this import takes "
            f"({' + '.join(view.upload_caps)}); split it into smaller imports. It was "
            "refused unread."
        )
    return None


def refusal_response(request: HttpRequest, path: str, status: int, message: str) -> HttpResponse:
    """upload_refusal's answer as the app gives it for `path`: the API's error body or plain
    text, with the API's scheme named on a 401."""
    response = error_response(request, status, message, path=path)
    if status == 401:
        response["WWW-Authenticate"] = "Token"
    return response


class RequestSizeMiddleware:
    """Refuses a body by its Content-Length before it is read (upload_refusal): a 300 MB post
    to /login/, or an upload from someone who may not upload, costs the server nothing. After
    the session middleware (who is asking); before anything that reads the body
    (InputBoundaryMiddleware, CSRF). A body without a Content-Length (chunked) is not read by
    Django at all."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0  # what Django reads of such a body: nothing
        refused = upload_refusal(request, request.path_info, size)
        if refused is None:
            return self.get_response(request)
        # The server closes the connection (gunicorn's sync workers always do; its threaded
        # ones after draining at most 64 KB): the unread body is never read.
        return refusal_response(request, request.path, *refused)


class DebugNotFoundMiddleware:
    """Under DEBUG (`make run`) Django answers a 404 with its debug page, which lists every
    address of the site: this answers with the site's own not-found page instead, as production
    does (handler404). Not used when DEBUG is off: handler404 already does it there. Inside
    CommonMiddleware, whose redirect adds a missing slash to a 404 first."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        if not settings.DEBUG:
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            resolve(request.path_info)
        except Resolver404:
            return not_found(request)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return not_found(request, exception) if isinstance(exception, Http404) else None
