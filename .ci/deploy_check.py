"""The deployment of .ci/deploy_check.sh, driven through nginx as a person and a script would.

`deploy`: TLS with the site's certificate, a login, a static file from disk, the documentation
behind the login page's Help link, a body too large for a path that takes no upload, the upload
gate (a 200 MB body from anyone who may not upload refused before nginx reads it, an admin's
import by API token), an import over 1 MB in the browser's form, an LLM job of the generation
stage run by the Celery worker against the fake Gemini server, and the logs of the web and the
worker. `restored`: after deploy/restore.sh, the same photo and the job's candidates are back.

Exits 1 with the first thing that is wrong; prints what it checked and how long each took."""

from __future__ import annotations

import io
import json
import os
import re
import select
import socket
import ssl
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
from PIL import Image

WORK = Path(os.environ["DEPLOY_WORK"])
HTTPS = f"https://localhost:{os.environ['DEPLOY_HTTPS_PORT']}"
HTTP = f"http://localhost:{os.environ['DEPLOY_HTTP_PORT']}"
ADMIN, PASSWORD = "deploy-admin", os.environ["DEPLOY_ADMIN_PASSWORD"]
MEMBER, MEMBER_PASSWORD = "deploy-annotator", os.environ["DEPLOY_MEMBER_PASSWORD"]
ADMIN_TOKEN, MEMBER_TOKEN = os.environ["DEPLOY_ADMIN_TOKEN"], os.environ["DEPLOY_MEMBER_TOKEN"]
MB = 1024 * 1024
SOURCE_ID = "deploy-stew"


def fail(message: str) -> None:
    print(f"FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition: bool, message: str) -> None:
    if not condition:
        fail(message)


def client(local_address: str = "127.0.0.1") -> httpx.Client:
    """A client that trusts only the deployment's own certificate, from a given loopback
    address (nginx then forwards that address as the client's)."""
    context = ssl.create_default_context(cafile=str(WORK / "tls.crt"))
    transport = httpx.HTTPTransport(verify=context, local_address=local_address)
    return httpx.Client(base_url=HTTPS, transport=transport, timeout=120, headers={"Origin": HTTPS})


def noise_png(width: int, height: int) -> bytes:
    """A PNG that does not compress: random pixels, about 3 bytes each."""
    buffer = io.BytesIO()
    Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)).save(
        buffer, format="PNG"
    )
    return buffer.getvalue()


def login(http: httpx.Client, username: str = ADMIN, password: str = PASSWORD) -> None:
    page = http.get("/login/")
    check(page.status_code == 200, f"the login page answered {page.status_code}")
    token = http.cookies["csrftoken"]
    answer = http.post(
        "/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
    )
    check(
        answer.status_code == 302 and answer.headers["location"] == "/",
        f"the login answered {answer.status_code} {answer.headers.get('location')}: "
        f"{answer.text[:300]}",
    )
    home = http.get("/")
    check(
        home.status_code == 200 and username in home.text, f"home after login: {home.status_code}"
    )


def arrived(conn: ssl.SSLSocket) -> bytes | None:
    """What the server has answered so far, None when nothing yet (TLS's own records, such as
    TLS 1.3's session tickets, make the socket readable without an answer)."""
    if not select.select([conn], [], [], 0)[0]:
        return None
    conn.settimeout(0)
    try:
        return conn.recv(65536)
    except ssl.SSLWantReadError:
        return None
    finally:
        conn.settimeout(120)


def send_large(path: str, headers: dict[str, str], total: int = 200 * MB) -> dict:
    """POST a multipart body of `total` bytes over TLS, 64 KiB at a time, looking for an answer
    before each piece: the time to the answer, how much had been sent by then, the answer."""
    context = ssl.create_default_context(cafile=str(WORK / "tls.crt"))
    port = int(os.environ["DEPLOY_HTTPS_PORT"])
    conn = context.wrap_socket(
        socket.create_connection(("127.0.0.1", port), timeout=120), server_hostname="localhost"
    )
    head = "".join(
        f"{k}: {v}\r\n"
        for k, v in {
            "Host": f"localhost:{port}",
            "Content-Type": "multipart/form-data; boundary=gamut-boundary",
            "Content-Length": str(total),
            **headers,
        }.items()
    )
    piece = b"\n" * (64 * 1024)
    sent = 0
    started = time.monotonic()
    conn.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode())
    answer = None
    try:
        while sent < total and answer is None:
            conn.sendall(piece[: total - sent])
            sent += min(len(piece), total - sent)
            answer = arrived(conn)
    except OSError:
        pass  # the server stopped reading: the answer is there
    answer = answer or b""
    while b"\r\n\r\n" not in answer:
        data = conn.recv(65536)
        if not data:
            break
        answer += data
    seconds = time.monotonic() - started
    head_part, _, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length: (\d+)", head_part)
    while length and len(body) < int(length.group(1)):
        data = conn.recv(65536)
        if not data:
            break
        body += data
    conn.close()
    status = int(head_part.split(b" ", 2)[1]) if head_part else 0
    return {
        "status": status,
        "head": head_part.decode(),
        "body": body.decode(),
        "sent": sent,
        "seconds": seconds,
    }


def upload_gate(member: httpx.Client) -> None:
    """Large bodies from anyone who may not upload are refused by nginx before it reads them
    (the upload gate, deploy/nginx.conf): the answer comes while the client has most of the
    body still to send, and nginx writes nothing of it to disk."""
    error_log = WORK / "nginx-error.log"
    logged_before = len(error_log.read_bytes())
    # Under each address's cap (over it, nginx answers 413 before anything else).
    cases = [
        ("/api/images/import/", {}, 200 * MB, 401, "anonymous"),
        (
            "/import/",
            {"Cookie": f"sessionid={member.cookies['sessionid']}"},
            200 * MB,
            403,
            "annotator",
        ),
        (
            "/api/gold/import/",
            {"Authorization": f"Token {MEMBER_TOKEN}"},
            60 * MB,
            403,
            "annotator, token",
        ),
    ]
    for path, headers, total, status, who in cases:
        sent = send_large(path, headers, total)
        check(
            sent["status"] == status and "only admins, logged in, may send" in sent["body"],
            f"a {total // MB} MB POST to {path} ({who}) answered {sent['head'][:200]} "
            f"{sent['body']!r}",
        )
        if path.startswith("/api/"):
            check(
                "application/json" in sent["head"] and json.loads(sent["body"])["detail"],
                f"{path}: {sent['head']}",
            )
        check(
            sent["sent"] < total / 4,
            f"{path} ({who}): answered only after {sent['sent'] / MB:.0f} MB of {total // MB} MB",
        )
        print(
            f"a {total // MB} MB POST to {path} ({who}) through nginx: {sent['status']} in "
            f"{sent['seconds'] * 1000:.0f} ms, {sent['sent'] / MB:.1f} MB of it sent by then"
        )
    logged = error_log.read_bytes()[logged_before:].decode()
    check(
        "buffered to a temporary file" not in logged,
        f"nginx wrote a refused body to disk: {logged[-500:]}",
    )
    # A body of undeclared length (chunked) takes the 5 MiB of every path.
    context = ssl.create_default_context(cafile=str(WORK / "tls.crt"))
    with httpx.Client(base_url=HTTPS, verify=context, timeout=60) as anonymous:
        chunked = anonymous.post(
            "/api/images/import/", content=iter([b"x" * MB] * 8), headers={"Origin": HTTPS}
        )
        check(chunked.status_code == 413, f"8 MB chunked answered {chunked.status_code}")
    # The same over HTTP/2, where a body need not say its length at all (curl -T - sends none).
    h2 = subprocess.run(
        ["curl", "-s", "--http2", "--cacert", str(WORK / "tls.crt"), "-o", "/dev/null"]
        + ["-w", "%{http_version} %{http_code}", "-T", "-", f"{HTTPS}/api/images/import/"],
        input=b"x" * (8 * MB),
        capture_output=True,
        timeout=60,
    )
    check(h2.stdout == b"2 413", f"8 MB over HTTP/2 without a length answered {h2.stdout!r}")
    with httpx.Client(base_url=HTTPS, verify=context, timeout=60) as anonymous:
        # The gate itself is nginx's own: not an address from outside.
        outside = anonymous.get("/upload-gate/", headers={"X-Upload-Uri": "/import/"})
        check(outside.status_code == 404, f"/upload-gate/ answered {outside.status_code}")
        # The import pages still answer a GET: the login for anonymous visitors.
        page = anonymous.get("/import/")
        check(
            page.status_code == 302 and page.headers["location"].startswith("/login/"),
            f"GET /import/ anonymous answered {page.status_code}",
        )
    page = member.get("/import/")
    check(page.status_code == 403, f"GET /import/ by an annotator answered {page.status_code}")

    # An admin's import by API token, over 1 MB, through the gate to the app.
    photo = noise_png(700, 560)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as bundle:
        bundle.writestr("soup.png", photo)
    manifest = {"source_id": "deploy-soup", "image": "soup.png", "entity": "Borscht"}
    manifest |= {"domain": "food", "popularity": "head"}
    body = archive.getvalue()
    check(len(body) > MB, f"the zip is only {len(body)} bytes")
    with httpx.Client(base_url=HTTPS, verify=context, timeout=120) as api:
        imported = api.post(
            "/api/images/import/",
            headers={"Authorization": f"Token {ADMIN_TOKEN}"},
            files={
                "manifest": ("manifest.jsonl", json.dumps(manifest).encode()),
                "images": ("photos.zip", body, "application/zip"),
            },
        )
    check(
        imported.status_code == 201 and imported.json()["imported"] == ["deploy-soup"],
        f"the admin's import by token answered {imported.status_code}: {imported.text[:300]}",
    )
    print(f"an admin's {len(body) / 1e6:.1f} MB import by API token through the gate: ok")


def restored() -> None:
    with client() as http:
        login(http)
        served = http.get(f"/images/{SOURCE_ID}/photo")
        check(
            served.status_code == 200 and served.content == (WORK / "photo.png").read_bytes(),
            f"after the restore the photo answered {served.status_code}",
        )
        image = http.get(f"/api/images/{SOURCE_ID}/").json()
        check(len(image["candidates"]) == 3, f"after the restore: {image}")
        jobs = http.get("/api/jobs/").json()
        check(
            [(j["kind"], j["status"], j["done"]) for j in jobs]
            == [("annotation.generate", "done", 1)],
            f"after the restore the jobs are {jobs}",
        )
    print("after the restore: the photo, its candidates and the job are back")


def deploy() -> None:
    began = time.monotonic()
    redirect = httpx.get(f"{HTTP}/login/")
    check(
        redirect.status_code == 301 and redirect.headers["location"].startswith("https://"),
        f"plain HTTP answered {redirect.status_code} {redirect.headers.get('location')}",
    )

    with client("127.0.0.2") as http:
        login(http)
        hsts = http.get("/login/").headers.get("strict-transport-security", "")
        check("max-age=" in hsts, f"no HSTS header over TLS: {hsts!r}")
        print(f"login through nginx with TLS: ok ({time.monotonic() - began:.1f} s)")

        # A static file from disk (nginx's own cache header), by the name the page links.
        stylesheet = re.search(r'href="(/static/[^"]+\.css)"', http.get("/login/").text)
        check(stylesheet is not None, "the login page links no stylesheet")
        static = http.get(stylesheet.group(1), headers={"Accept-Encoding": "gzip"})
        check(
            static.status_code == 200
            and static.headers.get("cache-control") == "public, max-age=31536000, immutable",
            f"{stylesheet.group(1)}: {static.status_code} {static.headers.get('cache-control')}",
        )

        # The documentation, served by the app behind nginx: the login page's Help link opens it.
        help_link = re.search(
            r'href="(/docs/[^"#]*)[^"]*" target="_blank"', http.get("/login/").text
        )
        check(help_link is not None, "the login page links no help")
        docs = http.get(help_link.group(1))
        check(
            docs.status_code == 200 and "Who reads what" in docs.text,
            f"{help_link.group(1)}: {docs.status_code} {docs.text[:200]!r}",
        )
        print(f"the documentation through nginx ({help_link.group(1)}): ok")

        # A body too large for a path that takes no upload: nginx refuses it unread.
        large = http.post("/review/1/", content=b"x" * (6 * 1024 * 1024))
        check(large.status_code == 413, f"a 6 MB body to /review/1/ answered {large.status_code}")

        with client() as member:
            login(member, MEMBER, MEMBER_PASSWORD)
            upload_gate(member)

        # The import page (its GET goes past the gate, as every GET does), then a manifest and
        # a zip of a photo over 1 MB.
        form = http.get("/import/")
        check(
            form.status_code == 200 and "csrfmiddlewaretoken" in form.text,
            f"GET /import/ by the admin answered {form.status_code}",
        )
        started = time.monotonic()
        photo = noise_png(760, 560)
        (WORK / "photo.png").write_bytes(photo)
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as bundle:
            bundle.writestr("stew.png", photo)
        manifest = json.dumps(
            {
                "source_id": SOURCE_ID,
                "image": "stew.png",
                "entity": "Beef bourguignon",
                "domain": "food",
                "popularity": "head",
            }
        )
        body = archive.getvalue()
        check(len(body) > 1024 * 1024, f"the zip is only {len(body)} bytes")
        page = http.post(
            "/import/",
            data={"csrfmiddlewaretoken": http.cookies["csrftoken"]},
            files={
                "manifest": ("manifest.jsonl", manifest.encode()),
                "images": ("photos.zip", body, "application/zip"),
            },
        )
        check(
            page.status_code == 200 and "Imported 1 image" in page.text,
            f"the import answered {page.status_code}: {page.text[:500]}",
        )
        served = http.get(f"/images/{SOURCE_ID}/photo")
        check(
            served.status_code == 200 and served.content == photo,
            f"the imported photo answered {served.status_code}",
        )
        print(
            f"import of a {len(body) / 1e6:.1f} MB zip through nginx: ok "
            f"({time.monotonic() - started:.1f} s)"
        )

        # An LLM job: the generation stage for that photo, run by the worker.
        started = time.monotonic()
        launched = http.post(
            "/api/jobs/launch/",
            json={"stage": "generate", "scope": "ids", "ids": [SOURCE_ID]},
            headers={"X-CSRFToken": http.cookies["csrftoken"]},
        )
        check(
            launched.status_code == 201,
            f"the launch answered {launched.status_code}: {launched.text[:500]}",
        )
        job_id = launched.json()["job"]["id"]
        deadline = time.monotonic() + 120
        while True:
            job = http.get(f"/api/jobs/{job_id}/").json()
            if job["over"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        check(
            job["status"] == "done" and job["done"] == 1 and job["failed"] == 0,
            f"the job ended {job['status']}, {job['done']} done, {job['failed']} failed: "
            f"{job['failures']} {job['last_error']}",
        )
        image = http.get(f"/api/images/{SOURCE_ID}/").json()
        check(
            len(image.get("candidates", [])) == 3,
            f"the job made {len(image.get('candidates', []))} candidates, not 3: {image}",
        )
        print(
            f"generation job {job_id} through the worker: ok ({time.monotonic() - started:.1f} s)"
        )

    # The logs: gunicorn's access line names the client behind nginx (127.0.0.2) and the user;
    # the worker's lines name the job; no password anywhere.
    web_log = (WORK / "web.log").read_text()
    check(
        re.search(rf'^127\.0\.0\.2 {ADMIN} "GET / HTTP/1\.[01]" 200 \d+ \d+ms$', web_log, re.M)
        is not None,
        "no access line with the client behind the proxy and the user for GET /",
    )
    worker_log = (WORK / "worker.log").read_text()
    check(
        f"[job {job_id}]: Task llm.tasks.run_job_chunk" in worker_log,
        f"the worker's lines do not name job {job_id}",
    )
    for name in ("web.log", "worker.log", "beat.log", "nginx-access.log"):
        check(PASSWORD not in (WORK / name).read_text(), f"the password is in {name}")
    print(f"logs: ok; through the proxy in {time.monotonic() - began:.1f} s")


if __name__ == "__main__":
    {"deploy": deploy, "restored": restored}[sys.argv[1]]()
