"""Walk every page and API list of the URLconf as each role, under gunicorn, slowest first.

    DATABASE_URL=postgres://... .venv/bin/python bench/walk_pages.py [--top 10]
    DATABASE_URL=postgres://... .venv/bin/python bench/walk_pages.py --make-people

It starts gunicorn (DEBUG=False, --workers 2, on 127.0.0.1:--port, default 8048) against the
database that DATABASE_URL selects, logs in through the login form as one person of each role
(bench-walk-annotator, -adjudicator, -reviser and -admin, a staff superuser; --make-people makes
them, and every walk gives them a fresh random password), and asks for every URL of the URLconf
with GET. A URL's parameters are filled from the database (a candidate, an image, a rubric, its
latest version, a job...); an address whose parameter has no row, or that answers 405 (POST
only), is left out. Before the walk it warms both workers up (the first request of a worker
loads the URLconf and the views).

Per (role, page) it prints:
  seconds   the time to the last byte, measured by the client (one request, not a median)
  queries   the page's SQL queries: the same request made once more in this process with
            Django's test client (logged in as the same person) inside CaptureQueriesContext.
            In process rather than from pg_stat_statements, so that each page's count is its
            own whatever else the server runs; DEBUG stays off in gunicorn
  rss MB    how much the gunicorn workers' resident memory grew over the request (the sum over
            both workers, from /proc; a request that frees memory shows a negative figure)
  status    the HTTP status (403 for a role the page refuses is expected)

sorted slowest first; --top N keeps the N slowest (default: all). --roles and --match narrow the
walk; --no-queries skips the in-process pass; --out writes every row as JSON. The exit status
is 0 whatever the figures: it measures, it does not judge.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")
# Where bench/build_full_size.sh's generators put the shared photo.
os.environ.setdefault("MEDIA_ROOT", str(BENCH_DIR / "out" / "media"))

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import URLPattern, URLResolver, get_resolver  # noqa: E402

from core.access import ADJUDICATOR, ANNOTATOR, RUBRIC_REVISER  # noqa: E402

HOST = "127.0.0.1"
PEOPLE = {
    "annotator": ("bench-walk-annotator", [ANNOTATOR]),
    "adjudicator": ("bench-walk-adjudicator", [ADJUDICATOR]),
    "reviser": ("bench-walk-reviser", [RUBRIC_REVISER]),
    "admin": ("bench-walk-admin", []),
}
# Addresses with a query string worth their own row.
EXTRA = ["/rubrics/checks/?format=json", "/rubrics/checks/?format=csv"]
# Left out: the logout (it ends the session), the docs' catch-all, the static files.
SKIP = re.compile(r"^/(logout/|docs/|static/|media/)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--make-people", action="store_true", help="make the four people, stop")
    parser.add_argument("--port", type=int, default=8048)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60, help="client timeout per request, s")
    parser.add_argument("--top", type=int, default=0, help="print the N slowest (0: all)")
    parser.add_argument("--roles", default=",".join(PEOPLE), help="comma-separated")
    parser.add_argument("--match", default="", help="only addresses this regular expression finds")
    parser.add_argument(
        "--gunicorn-timeout",
        type=int,
        default=30,
        help="gunicorn's worker timeout (default 30, gunicorn's and production's): a page past it "
        "answers 500 and its worker restarts",
    )
    parser.add_argument("--no-queries", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.port in (5433, 8000, 8001):
        parser.error("ports 8000, 8001 and 5433 are the lead's; choose another")
    return args


def make_people() -> None:
    for username, groups in PEOPLE.values():
        user, _ = User.objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = username == PEOPLE["admin"][0]
        user.set_unusable_password()
        user.save()
        user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])


def fresh_passwords() -> dict[str, str]:
    out = {}
    for role, (username, _) in PEOPLE.items():
        user = User.objects.get(username=username)
        out[role] = secrets.token_urlsafe(18)
        user.set_password(out[role])
        user.save(update_fields=["password"])
    return out


# --- the addresses ----------------------------------------------------------------------------


def samples() -> dict[str, str]:
    """A value for each URL parameter name, from the database (absent when it has no row)."""
    from annotation.models import Candidate, FinalQuestion, Image, RoundAudit
    from llm.models import Job, JobItem
    from rubrics.models import Rubric, RubricVersion

    out: dict[str, str] = {}
    rows = {
        "candidate_id": Candidate.objects.order_by("-id").values_list("id", flat=True).first(),
        "image_id": Image.objects.order_by("id").values_list("id", flat=True).first(),
        "question_id": FinalQuestion.objects.order_by("id").values_list("id", flat=True).first(),
        "source_id": FinalQuestion.objects.order_by("id")
        .values_list("image__source_id", flat=True)
        .first()
        or Image.objects.order_by("id").values_list("source_id", flat=True).first(),
        "rubric_id": Rubric.objects.order_by("id").values_list("id", flat=True).first(),
        "version_id": RubricVersion.objects.order_by("-id").values_list("id", flat=True).first(),
        "audit_id": RoundAudit.objects.order_by("id").values_list("id", flat=True).first(),
        "user_id": User.objects.get(username=PEOPLE["annotator"][0]).pk,
        "job_id": Job.objects.order_by("-id").values_list("id", flat=True).first(),
    }
    item = JobItem.objects.order_by("-id").values_list("job_id", "id").first()
    if item:
        rows["job_id"], rows["item_id"] = item
    for name, value in rows.items():
        if value is not None:
            out[name] = str(value)
    return out


def addresses() -> list[str]:
    """Every GET-able address of the URLconf with its parameters filled in; the admin's
    changelists (not its add, change, history or delete forms)."""
    values = samples()
    found: list[str] = []

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            route = str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + route)
            elif isinstance(p, URLPattern):
                found.append(prefix + route)

    walk(get_resolver().url_patterns, "")
    out = []
    for route in found:
        route = route.lstrip("^").rstrip("$").replace("\\Z", "")
        # The admin's changelists and index only: "admin/app/model/" and "admin/".
        if route.startswith("admin/") and not re.fullmatch(r"admin/(\w+/\w+/)?", route):
            continue
        names = re.findall(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)", route)
        names = [a or b for a, b in names]
        if any(name not in values for name in names):
            continue
        url = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m.group(1)], route)
        url = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: values[m.group(1)], url)
        if re.search(r"[\\^$()\[\]*+?]", url):
            continue  # a regular expression left (an optional format suffix, say)
        url = "/" + url
        if not SKIP.match(url):
            out.append(url)
    return sorted(set(out)) + EXTRA


# --- gunicorn ---------------------------------------------------------------------------------


def start_gunicorn(port: int, workers: int, timeout: int) -> subprocess.Popen:
    env = {**os.environ, "DEBUG": "False", "ALLOWED_HOSTS": HOST}
    env.pop("REDIS_URL", None)
    log = (BENCH_DIR / "out" / "walk-gunicorn.log").open("w")
    proc = subprocess.Popen(
        [
            str(REPO / ".venv" / "bin" / "gunicorn"),
            "gamut_site.wsgi",
            "--bind",
            f"{HOST}:{port}",
            "--workers",
            str(workers),
            "--timeout",
            str(timeout),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=log,
    )
    for _ in range(150):
        try:
            httpx.get(f"http://{HOST}:{port}/login/", timeout=2)
            return proc
        except httpx.TransportError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("gunicorn did not start; see bench/out/walk-gunicorn.log")


def workers_rss(master: int) -> int:
    """The resident memory of the master's children, in bytes."""
    total = 0
    for child in Path(f"/proc/{master}/task/{master}/children").read_text().split():
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except FileNotFoundError:
            continue
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        total += int(match.group(1)) * 1024 if match else 0
    return total


def log_in(base: str, username: str, password: str, timeout: float) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=timeout, follow_redirects=False)
    client.get("/login/")
    response = client.post(
        "/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
        headers={"Referer": f"{base}/login/"},
    )
    if response.status_code != 302:
        raise SystemExit(f"{username} could not log in ({response.status_code})")
    return client


def count_queries(username: str, url: str) -> int:
    client = Client(HTTP_HOST=HOST)
    client.force_login(User.objects.get(username=username))
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
        if response.streaming:
            b"".join(response.streaming_content)
    return len(captured)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.make_people:
        make_people()
        print(f"made {', '.join(u for u, _ in PEOPLE.values())}")
        return 0
    if not User.objects.filter(username__startswith="bench-walk-").exists():
        make_people()
    roles = [r for r in args.roles.split(",") if r in PEOPLE]
    passwords = fresh_passwords()
    urls = [u for u in addresses() if re.search(args.match, u)]
    (BENCH_DIR / "out").mkdir(exist_ok=True)
    base = f"http://{HOST}:{args.port}"
    proc = start_gunicorn(args.port, args.workers, args.gunicorn_timeout)
    rows = []
    try:
        clients = {r: log_in(base, PEOPLE[r][0], passwords[r], args.timeout) for r in roles}
        for client in clients.values():  # both workers load the URLconf and the views
            for _ in range(2 * args.workers):
                client.get("/")
        for role, client in clients.items():
            for url in urls:
                before = workers_rss(proc.pid)
                started = time.perf_counter()
                try:
                    response = client.get(url)
                    status = response.status_code
                except httpx.TimeoutException:
                    status = "timeout"
                seconds = time.perf_counter() - started
                grown = (workers_rss(proc.pid) - before) / 2**20
                if status == 405:
                    continue
                rows.append(
                    {
                        "role": role,
                        "url": url,
                        "status": status,
                        "seconds": seconds,
                        "rss_mb": grown,
                    }
                )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if not args.no_queries:
        for row in rows:
            # Refusals and redirects aside: a page that ran past the timeout is counted too.
            if row["status"] not in (301, 302, 400, 403, 404):
                row["queries"] = count_queries(PEOPLE[row["role"]][0], row["url"])
    rows.sort(key=lambda r: -r["seconds"])
    shown = rows[: args.top] if args.top else rows
    print(f"{len(rows)} pages ({len(urls)} addresses x {len(roles)} roles, 405s left out)")
    print(f"{'seconds':>8} {'queries':>7} {'rss MB':>7} {'status':>6}  role         address")
    for r in shown:
        print(
            f"{r['seconds']:8.2f} {r.get('queries', ''):>7} {r['rss_mb']:7.1f} "
            f"{r['status']!s:>6}  {r['role']:<12} {r['url']}"
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
