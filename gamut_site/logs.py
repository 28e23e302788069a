"""What the logs say about a line that only the app knows: who asked and from where, and which
job a worker's line belongs to.

- The access log is gunicorn's (deploy/gunicorn.conf.py), one line per request; gunicorn sees
  only the proxy's address and no user, so `access_log_middleware` hands it the client's address
  behind our proxies and the user's name through the request's WSGI environ (`gamut.client`,
  `gamut.user`, read by the format's `%({gamut.client}e)s`).
- `LogContext` (a filter on settings.LOGGING's handler) adds `context` to every record: the client
  and user of a request's record (Django's "Internal Server Error" lines carry the request), and
  the job of a Celery task's lines (Celery passes the task's name and arguments with its
  "received" and "succeeded" lines, `extra={"data": ...}`).

Nothing here writes a header, a body or a setting: no password, token or key reaches the log.
"""

from __future__ import annotations

import ast
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from gamut_site.proxies import client_ip

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse


def user_name(request: HttpRequest) -> str:
    """The signed-in user's name, or "-"."""
    user = getattr(request, "user", None)
    if user is None:
        return "-"
    try:
        return user.get_username() if user.is_authenticated else "-"
    except DatabaseError:
        # The session's user could not be read (the database is down): the line is written
        # all the same, saying so, rather than lost with the error it would report.
        return "?"


def access_log_middleware(get_response: Callable[[HttpRequest], HttpResponse]):
    """First in MIDDLEWARE: after the response, the client and user for gunicorn's access log."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        request.META["gamut.client"] = client_ip(request) or "-"
        request.META["gamut.user"] = user_name(request)
        return response

    return middleware


def _job_of(task_name: str, args: Sequence[Any]) -> str:
    """ "job N" when the task takes a `job_id` (llm.tasks.run_job_chunk does), else "".
    Imported late: the web's logging is configured before Celery's app has its tasks."""
    from gamut_site.celery import app

    task = app.tasks.get(task_name)
    if task is None:
        return ""
    try:
        bound = inspect.signature(task.run).bind_partial(*args)
    except TypeError:
        return ""
    job = bound.arguments.get("job_id")
    return "" if job is None else f"job {job}"


def _task_context(record: logging.LogRecord) -> str:
    data = getattr(record, "data", None)
    if isinstance(data, dict) and "name" in data:
        # Celery's own "Task ... received/succeeded" lines: the arguments come as their repr.
        try:
            args = ast.literal_eval(str(data.get("args") or "()"))
        except (ValueError, SyntaxError):
            return ""
        return _job_of(str(data["name"]), args if isinstance(args, tuple | list) else ())
    from celery import current_task

    if current_task and current_task.request and current_task.request.id:
        return _job_of(current_task.name, current_task.request.args or ())
    return ""


class LogContext(logging.Filter):
    """Sets `record.context`: " [client 203.0.113.7, user alice]" for a request's records,
    " [job 12]" for a job's task, "" for the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        parts = []
        request = getattr(record, "request", None)
        # django.server passes its socket as `request`: only an HttpRequest has META.
        if request is not None and hasattr(request, "META"):
            parts += [f"client {client_ip(request) or '-'}", f"user {user_name(request)}"]
        job = _task_context(record)
        if job:
            parts.append(job)
        record.context = f" [{', '.join(parts)}]" if parts else ""
        return True
