"""The logs an operator reads: gunicorn's access line per request (the client behind the proxy,
the user, status and duration), a 500 that names its user, a worker's task lines that name
their job, and no secret in any of them."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from celery.app import trace
from django.conf import settings
from django.test import Client

from tests.processes import child_database_url
from tests.test_worker import free_port, stop

REPO = Path(settings.BASE_DIR)


@pytest.fixture
def console() -> Iterator[io.StringIO]:
    """What settings.LOGGING's console handler writes (its filter and format as configured)."""
    root = logging.getLogger()
    handler = next(h for h in root.handlers if h.name == "console")
    stream = io.StringIO()
    saved, level = handler.setStream(stream), root.level
    # At LOG_LEVEL's default: a library run by an earlier test in this process (inspect_ai's
    # eval) may have raised the root's level.
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        handler.setStream(saved)
        root.setLevel(level)


@pytest.fixture
def gunicorn(transactional_db, tmp_path) -> Iterator[tuple[str, Path]]:
    """gunicorn with the shipped deploy/gunicorn.conf.py on the test database."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(DATABASE_URL=child_database_url(), PYTHONUNBUFFERED="1", WEB_CONCURRENCY="1")
    port = free_port()
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py"]
            + ["-b", f"127.0.0.1:{port}", "gamut_site.wsgi"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/login/", timeout=2)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        stop(proc)
        pytest.fail(f"gunicorn did not answer:\n{log_path.read_text()}")
    try:
        yield base, log_path
    finally:
        stop(proc)


def access_lines(log_path: Path, path: str, count: int) -> list[str]:
    """The access lines of `path` once `count` of them are written (gunicorn writes after the
    response is sent)."""
    pattern = re.compile(rf'"[A-Z]+ {re.escape(path)} HTTP/1\.1"')
    deadline = time.monotonic() + 10
    while True:
        lines = [ln for ln in log_path.read_text().splitlines() if pattern.search(ln)]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_one_access_line_per_request_with_client_user_status_and_duration(gunicorn, alice):
    base, log_path = gunicorn
    client = Client()
    client.force_login(alice)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    # The proxy (loopback, a trusted one) says who the client is; a client's own claim further
    # left is not believed.
    forwarded = {"X-Forwarded-For": "198.51.100.66, 203.0.113.7"}
    with httpx.Client(base_url=base, headers=forwarded, timeout=30) as http:
        http.cookies.set(settings.SESSION_COOKIE_NAME, session)
        assert http.get("/me/").status_code == 200
        http.cookies.clear()
        token = http.get("/login/").cookies["csrftoken"]
        refused = http.post(
            "/login/",
            data={
                "username": "alice",
                "password": "wrong-secret-Xq9",
                "csrfmiddlewaretoken": token,
            },
        )
        assert refused.status_code == 200  # the form again, with its error

    [me] = access_lines(log_path, "/me/", 1)
    assert re.fullmatch(r'203\.0\.113\.7 alice "GET /me/ HTTP/1\.1" 200 \d+ \d+ms', me), me
    get_login, post_login = access_lines(log_path, "/login/", 3)[-2:]
    assert re.fullmatch(r'203\.0\.113\.7 - "GET /login/ HTTP/1\.1" 200 \d+ \d+ms', get_login)
    assert re.fullmatch(r'203\.0\.113\.7 - "POST /login/ HTTP/1\.1" 200 \d+ \d+ms', post_login)
    text = log_path.read_text()
    assert "wrong-secret-Xq9" not in text and session not in text and token not in text
    assert "198.51.100.66" not in text


@pytest.mark.urls("tests.urls_failing")
def test_a_server_error_names_the_user_and_the_client(client, console, alice):
    client.raise_request_exception = False
    client.force_login(alice)
    response = client.get("/failing/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert response.status_code == 500
    assert re.search(
        r" ERROR django\.request \[client 203\.0\.113\.7, user alice\]: "
        r"Internal Server Error: /failing/\n",
        console.getvalue(),
    ), console.getvalue()


def test_a_job_chunks_task_lines_name_the_job(console):
    """Celery's own "received" and "succeeded" lines (as the worker logs them, through
    settings.LOGGING: gamut_site/celery.py) say which job the chunk is of."""
    import llm.tasks  # noqa: F401 (registered, as in a worker, which imports every task module)

    trace.info(
        trace.LOG_RECEIVED,
        {"id": "c0ffee", "name": "llm.tasks.run_job_chunk", "args": "(42,)", "kwargs": "{}"},
    )
    trace.info(
        trace.LOG_SUCCESS,
        {
            "id": "c0ffee",
            "name": "llm.tasks.run_job_chunk",
            "return_value": "8",
            "runtime": 1.5,
            "args": "(42,)",
            "kwargs": "{}",
        },
    )
    trace.info(
        trace.LOG_RECEIVED,
        {"id": "beef", "name": "llm.tasks.sweep_expired_leases", "args": "()", "kwargs": "{}"},
    )
    received, succeeded, sweep = console.getvalue().splitlines()
    assert " [job 42]: Task llm.tasks.run_job_chunk[c0ffee] received" in received
    assert " [job 42]: Task llm.tasks.run_job_chunk[c0ffee] succeeded in 1.5s: 8" in succeeded
    assert "celery.app.trace: Task llm.tasks.sweep_expired_leases[beef] received" in sweep
