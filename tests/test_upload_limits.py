"""Large bodies are refused by their Content-Length before a byte is read or spooled: every
address takes DATA_UPLOAD_MAX_MEMORY_SIZE (5 MB), the import addresses more, and only from an
admin (core.middleware.RequestSizeMiddleware), and nginx asks the same rule through the upload
gate before it reads a body (core.views.upload_gate). First through Django's test client for every
case, then against gunicorn: a 300 MB body to /login/, /api/images/import/ and /review/1/ is
answered at once, and no temporary file is written."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import urlopen

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.processes import child_database_url

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
GATE_SESSION_QUERIES = 3  # the session, its person, the groups
GATE_TOKEN_QUERIES = 3  # knox: the token and its person, its expiry; the groups


def big_file(size: int = 6 * MB) -> SimpleUploadedFile:
    return SimpleUploadedFile("m.jsonl", b"\n" * size)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "kind"),
    [("/login/", "text"), ("/review/1/", "text"), ("/api/candidates/1/reviews/", "json")],
)
def test_a_large_body_to_an_address_that_takes_no_upload(alice, url, kind):
    client = Client()
    client.force_login(alice)
    response = client.post(url, {"file": big_file()})
    assert response.status_code == 413
    message = response.json()["detail"] if kind == "json" else response.content.decode()
    assert message.startswith("The request is 6.0 MB; this address takes at most 5.0 MB")
    assert message.endswith("so it was refused unread.")


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/api/images/import/", "/import/", "/api/gold/import/"])
def test_an_upload_from_someone_who_may_not_upload(alice, url):
    from knox.models import AuthToken

    expected = (
        "The request is 6.0 MB; only admins, logged in, may send more than 5.0 MB here, so it "
        "was refused unread."
    )
    anonymous = Client().post(url, {"manifest": big_file()})
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    assert expected in anonymous.content.decode()
    session = Client()
    session.force_login(alice)
    assert session.post(url, {"manifest": big_file()}).status_code == 403
    _, key = AuthToken.objects.create(user=alice)
    token = Client(HTTP_AUTHORIZATION=f"Token {key}").post(url, {"manifest": big_file()})
    assert token.status_code == 403 and expected in token.content.decode()


@pytest.mark.django_db
def test_an_admin_may_upload_up_to_the_import_caps(client, root, settings):
    from knox.models import AuthToken

    settings.IMPORT_MAX_MANIFEST_BYTES = 7 * MB
    settings.IMPORT_MAX_TOTAL_BYTES = 0
    client.force_login(root)
    # Through the size check, to the import, which asks for the zip.
    passed = client.post("/api/images/import/", {"manifest": big_file()})
    assert passed.status_code == 400
    assert passed.json()["errors"][0].startswith("No zip was uploaded")
    _, key = AuthToken.objects.create(user=root)
    by_token = Client(HTTP_AUTHORIZATION=f"Token {key}")
    assert by_token.post("/api/images/import/", {"manifest": big_file()}).status_code == 400
    # Over what the import takes: 413, naming the caps.
    over = client.post("/api/images/import/", {"manifest": big_file(24 * MB)})
    assert over.status_code == 413
    assert over.json()["detail"] == (
        "The upload is 24.0 MB, over the 23.0 MB this import takes (IMPORT_MAX_TOTAL_BYTES + "
        "IMPORT_MAX_MANIFEST_BYTES); split it into smaller imports. It was refused unread."
    )


# --- the upload gate nginx asks (deploy/nginx.conf's auth_request) --------------------------

GATE_PATHS = [
    "/api/images/import/",
    "/import/",
    "/api/gold/import/",
    "/training/",
    "/login/",
    "/review/1/",
    "/api/candidates/1/reviews/",
]


def person_client(who: str, alice, root) -> Client:
    """A client for anonymous, alice or root (the admin), by session or by API token."""
    from knox.models import AuthToken

    if who == "anonymous":
        return Client()
    user = {"alice": alice, "root": root}[who.removesuffix("-token")]
    if who.endswith("-token"):
        return Client(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=user)[1]}")
    client = Client()
    client.force_login(user)
    return client


def gate(client: Client, uri: str, size: int | None):
    headers = {"HTTP_X_UPLOAD_URI": uri}
    if size is not None:
        headers["HTTP_X_UPLOAD_LENGTH"] = str(size)
    return client.get("/upload-gate/", **headers)


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["anonymous", "alice", "alice-token", "root", "root-token"])
def test_the_gate_answers_what_the_app_answers(who, alice, root, settings):
    """For every person, path and size, the gate's answer is the app's own: the body it lets
    nginx read is one the app reads (the middleware does not refuse it), and the status and
    text of a refusal are the app's, word for word."""
    settings.IMPORT_MAX_MANIFEST_BYTES = 7 * MB
    settings.IMPORT_MAX_TOTAL_BYTES = 0  # the caps of every upload address: 23 MB
    client = person_client(who, alice, root)
    for path in GATE_PATHS:
        for size in (1024, 6 * MB, 24 * MB):
            asked = gate(client, path, size)
            # The app, sent the same request: a body claiming `size` bytes (none are read
            # when it is refused; a view that reads it finds a short body).
            sent = client.post(
                path, data=b"", content_type="application/octet-stream", CONTENT_LENGTH=str(size)
            )
            refused = "refused unread" in sent.content.decode()
            case = (who, path, size, asked.status_code, sent.status_code)
            if asked.status_code == 204:
                assert not refused, case
                continue
            assert refused and asked.status_code == sent.status_code, case
            assert asked["X-Upload-Refusal"] == sent.content.decode(), case
            assert asked.get("WWW-Authenticate") == sent.get("WWW-Authenticate"), case
            assert asked.content == b"" and not asked.cookies, case
    expected_open = {
        "anonymous": 0,
        "alice": 0,
        "alice-token": 0,
        "root": 4,  # 1 KB and 6 MB to each of the four upload addresses
        "root-token": 4,
    }[who]
    assert (
        sum(
            gate(client, path, size).status_code == 204
            for path in GATE_PATHS[:4]
            for size in (6 * MB, 24 * MB)
        )
        == expected_open
    )


@pytest.mark.django_db
def test_the_gate_says_who_is_refused_and_why(alice, root):
    anonymous = gate(Client(), "/api/images/import/", 300 * MB)
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    assert json.loads(anonymous["X-Upload-Refusal"]) == {
        "detail": "The request is 300.0 MB; only admins, logged in, may send more than 5.0 MB "
        "here, so it was refused unread."
    }
    page = gate(person_client("alice", alice, root), "/import/", 300 * MB)
    assert page.status_code == 403 and page["X-Upload-Refusal"].startswith("The request is")
    # The path as the client wrote it, percent-encoded and with a query, as the app reads it.
    encoded = gate(person_client("root", alice, root), "/api/images/%69mport/?x=1", 300 * MB)
    assert encoded.status_code == 204
    assert gate(Client(), "/api/images/%69mport/?x=1", 300 * MB).status_code == 401
    # A length not said counts as large: refused to anyone who may not upload.
    assert gate(Client(), "/import/", None).status_code == 401
    assert gate(person_client("root", alice, root), "/import/", None).status_code == 204
    unsaid = gate(Client(), "/login/", None)
    assert unsaid.status_code == 413
    assert unsaid["X-Upload-Refusal"].startswith("The request does not say its length;")


@pytest.mark.django_db
def test_the_gate_is_cheap_and_changes_nothing(alice, root, django_assert_num_queries):
    """A small body is let through without asking who sends it; a large one costs the
    session's (or token's) lookup and the person's groups. The gate answers GET and HEAD only,
    sets no cookie and leaves the session as it was."""
    from knox.models import AuthToken

    admin = person_client("root", alice, root)
    with django_assert_num_queries(0):
        assert gate(Client(), "/import/", 1024).status_code == 204
    with django_assert_num_queries(GATE_SESSION_QUERIES):
        answer = gate(admin, "/import/", 300 * MB)
    assert answer.status_code == 204 and not answer.cookies
    token = Client(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=alice)[1]}")
    with django_assert_num_queries(GATE_TOKEN_QUERIES):
        assert gate(token, "/import/", 300 * MB).status_code == 403
    headers = {"HTTP_X_UPLOAD_URI": "/import/", "HTTP_X_UPLOAD_LENGTH": str(300 * MB)}
    for method in (admin.post, admin.put, admin.delete):
        assert method("/upload-gate/", **headers).status_code == 405
    assert admin.head("/upload-gate/", **headers).status_code == 204
    # The admin's session still works for the import page and its form's CSRF token.
    assert admin.get("/import/").status_code == 200


# --- against gunicorn -------------------------------------------------------------------------

CLAIMED = 300 * MB
BOUNDARY = "gamut-boundary"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def gunicorn(transactional_db, tmp_path):
    """gunicorn serving the test database, its temporary files in a folder of their own."""
    port = free_port()
    spool = tmp_path / "spool"
    spool.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        "DATABASE_URL": child_database_url(),
        "TMPDIR": str(spool),
        "GAMUT_VAR_DIR": str(tmp_path / "var"),
        "MEDIA_ROOT": str(tmp_path / "media"),
    }
    log = (tmp_path / "gunicorn.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "gamut_site.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--timeout",
            "60",
            "--preload",  # both workers answer at once: the time measured is the request's
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urlopen(f"http://127.0.0.1:{port}/login/", timeout=5) as page:
                    if page.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "gunicorn.log").read_text()) from None
                time.sleep(0.2)
        yield port, spool
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def send_part(port: int, path: str, headers: dict[str, str], body: bytes) -> socket.socket:
    """A multipart POST that claims CLAIMED bytes and sends only `body` of them: a server
    that reads the body before answering waits for the rest."""
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
        f"Content-Length: {CLAIMED}",
        *(f"{k}: {v}" for k, v in headers.items()),
        "",
        "",
    ]
    part = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="manifest"; '
        'filename="m.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode()
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.sendall("\r\n".join(head).encode() + part + body)
    return conn


def answer(conn: socket.socket, wait: float) -> bytes:
    conn.settimeout(wait)
    received = b""
    try:
        while b"\r\n\r\n" not in received or not received.endswith((b"}", b".")):
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
    except TimeoutError:
        pass
    return received


def spooled(spool: Path) -> list[str]:
    return sorted(p.name for p in spool.iterdir())


def test_gunicorn_refuses_300_mb_unread_and_spools_nothing(gunicorn, alice, root):
    port, spool = gunicorn
    from knox.models import AuthToken

    _, alice_key = AuthToken.objects.create(user=alice)
    cases = [
        ("/login/", {}, "text/plain", "this address takes at most 5.0 MB"),
        ("/review/1/", {}, "text/plain", "this address takes at most 5.0 MB"),
        ("/api/images/import/", {}, "application/json", "only admins, logged in, may send"),
        (
            "/api/images/import/",
            {"Authorization": f"Token {alice_key}"},
            "application/json",
            "only admins, logged in, may send",
        ),
    ]
    statuses = [b"413", b"413", b"401", b"403"]
    for (path, headers, content_type, message), status in zip(cases, statuses, strict=True):
        started = time.monotonic()
        conn = send_part(port, path, headers, b"\n" * 65536)
        reply = answer(conn, wait=10)
        seconds = time.monotonic() - started
        assert reply.startswith(b"HTTP/1.1 " + status), (path, reply[:300])
        assert f"Content-Type: {content_type}".encode() in reply, reply[:300]
        assert b"300.0 MB" in reply and message.encode() in reply, reply
        assert seconds < 2, (path, seconds)
        print(
            f"{path} {sorted(headers)}: {status.decode()} in {seconds * 1000:.0f} ms"
        )  # for the record
        assert spooled(spool) == [], path  # asked while the connection is still open
        conn.close()

    # An admin's upload of the same size is read: the server waits for the body, and spools
    # it to a temporary file past FILE_UPLOAD_MAX_MEMORY_SIZE (the folder watched above).
    client = Client()
    client.force_login(root)
    cookie = client.cookies["sessionid"].value
    conn = send_part(
        port, "/api/images/import/", {"Cookie": f"sessionid={cookie}"}, b"\n" * (6 * MB)
    )
    assert answer(conn, wait=2) == b""
    deadline = time.monotonic() + 10
    while not spooled(spool) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert spooled(spool), "the admin's upload was not spooled where the test looks"
    conn.close()
