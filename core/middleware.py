"""The input boundary: every request's path, query, form fields, uploaded file names and JSON
body are looked at once, before any view or the database, for what no field may hold (control
characters, lone surrogates, values over core.text.MAX_VALUE). Field limits and formats are
the services' and serializers' business; this is the floor under them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError

from .http import error_response
from .text import MAX_VALUE, bad_character

MAX_FILE_NAME = 255
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def _problem(field: str, value: str, *, multiline: bool, limit: int = MAX_VALUE) -> str | None:
    if len(value) > limit:
        return f"{field} is longer than {limit} characters."
    bad = bad_character(value, multiline=multiline)
    return f"{field} may not contain {bad}." if bad else None


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
        if found is not None:
            field, message = found
            return error_response(request, 400, message, field)
        return self.get_response(request)

    def _check(self, request: HttpRequest) -> tuple[str, str] | None:
        problem = _problem("path", request.path, multiline=False)
        if problem:
            return "path", problem
        for key, values in request.GET.lists():
            for field, text, multiline in ((key, key, False), *((key, v, False) for v in values)):
                problem = _problem(field, text, multiline=multiline)
                if problem:
                    return field, problem
        content_type = request.content_type or ""
        if request.method in ("POST", "PUT", "PATCH"):
            if content_type in _FORMS:
                return self._check_form(request)
            if content_type == "application/json" or content_type.endswith("+json"):
                return self._check_json(request)
        return None

    def _check_form(self, request: HttpRequest) -> tuple[str, str] | None:
        try:
            fields = request.POST
        except MultiPartParserError:
            return None  # not a readable form: the view's parser answers that, with its 400
        for key, values in fields.lists():
            problem = _problem(key, key, multiline=False)
            for value in values:
                problem = problem or _problem(key, value, multiline=True)
            if problem:
                return key, problem
        for key, upload in request.FILES.items():
            problem = _problem(key, upload.name or "", multiline=False, limit=MAX_FILE_NAME)
            if problem:
                return key, f"the file name of {problem}"
        return None

    def _check_json(self, request: HttpRequest) -> tuple[str, str] | None:
        try:
            data = json.loads(request.body or b"null")
        except (ValueError, UnicodeDecodeError):
            return None  # not JSON: the parser of the view answers that, with its own 400
        except RecursionError:
            return "body", "body: the JSON nests too deeply."
        try:
            for field, text, is_key in _json_strings(data):
                problem = _problem(field, text, multiline=not is_key)
                if problem:
                    return field, problem
        except RecursionError:
            return "body", "body: the JSON nests too deeply."
        return None
