"""A team's load: 30 annotators and 15 rubric revisers using the pages as their browsers do.

    .venv/bin/python bench/team_load.py --url http://127.0.0.1:8043 --seconds 120

Each simulated person is an httpx.AsyncClient with its own cookie jar and one connection, which
logs in through /login/ (GET the form for the csrftoken cookie, POST it with the token), then
acts, pausing after each action for a think time drawn uniformly from --think (default 2-10
seconds; `--think 0` never pauses: the saturated run, whose requests per second are the
capacity). What a browser does at once after an action (the claim that the review page sends
on load, the photo it shows, the page a redirect names) follows without a pause.

Annotators (the review page, htmx as review.html sends it: HX-Request and the X-CSRFToken of
the page's hx-headers):
  GET /review/; when it holds nothing, POST /review/ (the claim on load) for the panel, and GET
  the candidate's photo; then, after each pause, one of: submit a decision (accept 70 %,
  revise 15 % with the question plus " (revised)", discard 15 % with one or two of the page's
  reasons; a few accepts with a reason or a comment) with POST /review/<id>/; skip (5 %,
  POST /review/<id>/skip/); undo the last review when the page offers it (5 %,
  POST /review/undo/); open /me/ (4 %) and come back to GET /review/.
Revisers (the workspace, as workspace.html's forms and htmx send them):
  GET /rubrics/, POST /rubrics/claim/ (a plain form: a 302 to the draft), GET the draft's
  workspace; then, after each pause, one htmx edit carrying the draft's revision: edit a
  check's text (30 %), re-tier (18 %), delete with a reason (12 %), add (13 %), move up or
  down (15 %), restore a deleted check (5 %, when there is one), or reload the page (7 %);
  after --round-edits edits (drawn uniformly between its bounds) complete the round (a 204
  with HX-Redirect to /rubrics/, which the browser then loads) and claim the next rubric.

Per endpoint (method and path with ids replaced: /review/{id}/) it prints the count, p50, p95,
p99, max and errors, measured at the client after --warmup; the overall requests per second;
then (unless --no-db-check) it reads the database that DATABASE_URL names with plain SQL and
checks the review and revision rules (see check_database). It imports none of the app's
modules, so it measures any commit's app. A summary goes to bench/out/team_load-<time>.json.

Exit status: 0 when there were no errors and no violations, 1 otherwise (the latency target is
reported, not enforced). Only loopback addresses are accepted for --url. Every loop is bounded
in time and in count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import math
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx

BENCH_DIR = Path(__file__).resolve().parent
TARGET_P95_MS = 100.0
MAX_ACTIONS_PER_USER = 100_000  # a bound besides the clock
MAX_ERRORS_PER_USER = 200  # a person stops after this many failed requests
LOGIN = "POST /login/"  # reported apart: a password hash is slow on purpose
TIERS = ("answer_critical", "valuable", "context")
ANNOTATOR_ACTIONS = {"submit": 0.86, "skip": 0.05, "undo": 0.05, "me": 0.04}
DECISIONS = {"accept": 0.70, "revise": 0.15, "discard": 0.15}
REVISER_ACTIONS = {
    "edit_text": 0.30,
    "retier": 0.18,
    "delete": 0.12,
    "add": 0.13,
    "move": 0.15,
    "restore": 0.05,
    "reload": 0.07,
}
# The CheckEdit op that each successful edit writes (rubrics.models.CheckEdit.Op's values).
EDIT_OPS = {
    "edit_text": "edit",
    "retier": "retier",
    "delete": "delete",
    "add": "add",
    "move": "move",
    "restore": "restore",
    "complete": "complete",
}
WORDS = ("braised", "beef", "red", "wine", "onion", "carrot", "garlic", "thyme", "stock")

# What the pages hold, read as a browser's scripts would find it.
HX_CSRF_RE = re.compile(r"hx-headers='\{\"X-CSRFToken\": \"([^\"]+)\"\}'")
FORM_CSRF_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
REVIEW_FORM_RE = re.compile(r'id="review-form" method="post" action="/review/(\d+)/"')
QUESTION_RE = re.compile(
    r'<blockquote class="question"[^>]*\sdata-testid="question">(.*?)</blockquote>', re.S
)
PHOTO_RE = re.compile(r'<img src="(/images/[^"]+/photo)"')
SUBMISSION_KEY_RE = re.compile(r'name="submission_key" value="([^"]*)"')
REASON_RE = re.compile(r'name="reasons" value="([^"]+)"')
CLAIMING = 'data-testid="claiming"'
EMPTY = 'data-testid="empty"'
UNDO_FORM = 'id="undo-form"'
REVISION_RE = re.compile(r'name="revision" value="(\d+)"')
TIER_GROUP_RE = re.compile(r'<div class="tier-group tier-(\w+)">')
CHECK_RE = re.compile(r'action="/rubrics/versions/\d+/checks/(\d+)/text/"')
RESTORE_RE = re.compile(r'action="/rubrics/versions/\d+/checks/(\d+)/restore/"')
REMOVED_RE = re.compile(r'hx-swap-oob="delete:#check-(\d+)"')
CURRENT_TIER_RE = re.compile(r'name="tier" value="(\w+)"[^>]*\sdisabled')
SOURCE_SELECT = ('<select name="source">', "</select>")
OPTION_RE = re.compile(r'<option value="([^"]+)">')
VERSION_URL_RE = re.compile(r"^/rubrics/versions/(\d+)/$")
HTTP_ERRORS = (httpx.HTTPError,)


# --- pure parts (bench/tests/test_team_load.py) ---------------------------------------------


def normalise(path: str) -> str:
    """An endpoint's name from a path: numbers become {id}, a photo's source id {source_id};
    the query is dropped. /review/123/skip/ -> /review/{id}/skip/."""
    parts = urlsplit(path).path.split("/")
    out = []
    for i, part in enumerate(parts):
        if part.isdigit():
            out.append("{id}")
        elif i >= 2 and parts[i - 1] == "images" and part and i + 1 < len(parts):
            out.append("{source_id}")
        else:
            out.append(part)
    return "/".join(out)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of seconds, in milliseconds (nan for no values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1] * 1000


def parse_think(text: str) -> tuple[float, float]:
    """'2-10' -> (2.0, 10.0); '0' -> (0.0, 0.0); '3' -> (3.0, 3.0)."""
    low, _, high = text.partition("-")
    lo, hi = float(low), float(high or low)
    if not (0 <= lo <= hi <= 600):
        raise ValueError(f"think time {text!r}: want MIN-MAX seconds, 0 <= MIN <= MAX <= 600")
    return lo, hi


def summarise(latencies: list[float], statuses: dict[str, int], errors: int) -> dict:
    """One endpoint's line: count, p50/p95/p99/max (ms), errors, statuses."""
    return {
        "count": len(latencies),
        "p50": round(percentile(latencies, 50), 1),
        "p95": round(percentile(latencies, 95), 1),
        "p99": round(percentile(latencies, 99), 1),
        "max": round(max(latencies) * 1000, 1) if latencies else float("nan"),
        "errors": errors,
        "statuses": dict(sorted(statuses.items())),
    }


def require_loopback(parser: argparse.ArgumentParser, url: str) -> None:
    """A load test only ever targets this machine."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme not in ("http", "https") or not loopback:
        parser.error(f"--url must be http(s) on a loopback address, not {url!r}")


def cpu_ticks(pid: int) -> int:
    """User and system clock ticks of a process, of its live children and of its children that
    have exited (gunicorn's workers; PostgreSQL's backends): /proc, as bench/lib.sh reads it."""

    def fields(p) -> list[str]:  # from field 3 (state) on: the name may hold spaces
        with open(f"/proc/{p}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()

    try:
        own = fields(pid)
    except OSError:
        return 0
    total = sum(int(x) for x in own[11:15])  # utime, stime, cutime, cstime
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                child = fields(entry)
                if int(child[1]) == pid:  # its parent
                    total += int(child[11]) + int(child[12])
    return total


def busy_ticks() -> int:
    """The whole machine's busy clock ticks (/proc/stat: user, nice, system, irq, softirq,
    steal)."""
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    return sum(int(cpu[i]) for i in (1, 2, 3, 6, 7, 8))


def cpu_sample(pids: dict[str, int]) -> dict[str, float]:
    """Seconds of CPU so far: each named process tree, this client, the whole machine."""
    hz = os.sysconf("SC_CLK_TCK")
    sample = {name: cpu_ticks(pid) / hz for name, pid in pids.items()}
    sample["load client"] = time.process_time()
    sample["machine"] = busy_ticks() / hz
    return sample


# --- arguments ------------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8043")
    parser.add_argument("--annotators", type=int, default=30)
    parser.add_argument("--revisers", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=120.0, help="measured; default 120")
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds of load before the measured window, left out of the figures (each "
        "worker's first requests); default 20 with pauses, 10 without",
    )
    parser.add_argument(
        "--think",
        default="2-10",
        help="seconds of pause after each action, MIN-MAX drawn uniformly (default 2-10); "
        "0: no pause (saturated)",
    )
    parser.add_argument(
        "--round-edits",
        default="8-24",
        help="edits of a rubric round before it is completed, MIN-MAX (default 8-24)",
    )
    parser.add_argument("--credentials", type=Path, default=BENCH_DIR / "out" / "revisers.json")
    parser.add_argument(
        "--annotator-names",
        default="bench-annotator-{:02d}",
        help="annotators' user names (numbered from 1); they log in with the revisers' "
        "password (run_team_bench.sh gives it to them)",
    )
    parser.add_argument("--workers", type=int, default=0, help="gunicorn's, for req/s a worker")
    parser.add_argument(
        "--gunicorn-pid", type=int, default=0, help="gunicorn's master: its CPU a request"
    )
    parser.add_argument(
        "--postgres-pid", type=int, default=0, help="PostgreSQL's postmaster: its CPU a request"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-db-check", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not 0 <= args.annotators <= 200 or not 0 <= args.revisers <= 99:
        parser.error("--annotators must be 0-200 and --revisers 0-99")
    if args.annotators + args.revisers < 1:
        parser.error("nobody to simulate")
    if not 1 <= args.seconds <= 3600:
        parser.error("--seconds must be between 1 and 3600")
    try:
        args.think_range = parse_think(args.think)
        args.round_range = tuple(int(x) for x in parse_think(args.round_edits))
    except ValueError as exc:
        parser.error(str(exc))
    if args.warmup is None:
        args.warmup = 20.0 if args.think_range[1] > 0 else 10.0
    if not 0 <= args.warmup <= 600:
        parser.error("--warmup must be between 0 and 600")
    require_loopback(parser, args.url)
    return args


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Stats:
    measure_from: float = 0.0  # time.perf_counter() at the end of the warm-up
    measure_to: float = math.inf
    latencies: dict[str, list[float]] = field(default_factory=dict)
    warmup: dict[str, list[float]] = field(default_factory=dict)  # the warm-up's, apart
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    warmup_requests: int = 0
    refusals: dict[str, int] = field(default_factory=dict)  # expected ones (a race lost)
    # The review rules' evidence: (annotator, candidate) of each review the page said was
    # saved and not taken back; the rubric edits the client saw succeed.
    reviews: set[tuple[str, int]] = field(default_factory=set)
    edits: dict[tuple[int, int], str] = field(default_factory=dict)  # (version, revision): op
    rounds_completed: int = 0
    out_of_work: set[str] = field(default_factory=set)
    cpu: list[dict[str, float]] = field(default_factory=list)  # at the window's start and end

    def record(
        self, key: str, status: int | str, started: float | None, ok: bool, detail: str = ""
    ):
        """One answer (`started` None: an answer already recorded, found wrong afterwards; it
        is counted, not timed again)."""
        now = time.perf_counter()
        if started is None:
            pass
        elif self.measure_from <= started and now <= self.measure_to:
            self.latencies.setdefault(key, []).append(now - started)
        elif started < self.measure_from:
            self.warmup_requests += 1
            self.warmup.setdefault(key, []).append(now - started)
        counts = self.statuses.setdefault(key, {})
        counts[str(status)] = counts.get(str(status), 0) + 1
        if not ok:
            self.errors[key] = self.errors.get(key, 0) + 1
            if len(self.error_samples) < 12:
                self.error_samples.append(f"{key} {status}: {detail[:240]}")


class Browser:
    """One person's browser: cookies, one connection, no redirect followed on its own."""

    def __init__(self, name: str, args, stats: Stats) -> None:
        self.name = name
        self.stats = stats
        self.client = httpx.AsyncClient(
            base_url=args.url,
            timeout=args.timeout,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            follow_redirects=False,
            trust_env=False,
            headers={"User-Agent": "gamut-team-load", "Accept": "text/html"},
        )
        self.csrf = ""  # the token of the last page, as its hx-headers carry it
        self.page_url = "/"
        self.failures = 0

    async def send(
        self, method: str, path: str, *, data=None, htmx: bool = False, expect=(200,), key=None
    ) -> httpx.Response | None:
        """One request, timed and recorded under `key` (default: method and normalised path).
        None when it failed (transport error or an unexpected status)."""
        key = key or f"{method} {normalise(path)}"
        headers = {}
        if method == "POST":
            headers["X-CSRFToken"] = self.csrf
            headers["Referer"] = str(self.client.base_url.join(self.page_url))
        if htmx:
            headers["HX-Request"] = "true"
            headers["HX-Current-URL"] = str(self.client.base_url.join(self.page_url))
        t0 = time.perf_counter()
        try:
            response = await self.client.request(method, path, data=data, headers=headers)
        except HTTP_ERRORS as exc:
            self.stats.record(key, type(exc).__name__, t0, False, f"{self.name}: {exc}")
            self.failures += 1
            return None
        ok = response.status_code in expect
        self.stats.record(key, response.status_code, t0, ok, f"{self.name}: {response.text[:240]}")
        if not ok:
            self.failures += 1
            return None
        found = HX_CSRF_RE.search(response.text)
        if found:
            self.csrf = found.group(1)
        return response

    async def login(self, username: str, password: str) -> bool:
        page = await self.send("GET", "/login/", key="GET /login/")
        if page is None:
            return False
        token = FORM_CSRF_RE.search(page.text)
        if token is None:
            self.stats.record(LOGIN, "no form", None, False, self.name)
            return False
        self.csrf = token.group(1)
        answer = await self.send(
            "POST",
            "/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": self.csrf},
            expect=(302,),
            key=LOGIN,
        )
        return answer is not None and "sessionid" in self.client.cookies


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


class Person:
    """What a simulated person shares: the browser, the clock, the pauses."""

    def __init__(self, browser: Browser, args, deadline: float, rng: random.Random) -> None:
        self.b = browser
        self.args = args
        self.deadline = deadline
        self.rng = rng
        # People start within the first half of the warm-up, not all at once.
        self.start_after = rng.uniform(0, args.warmup / 2)

    def going(self) -> bool:
        return time.monotonic() < self.deadline and self.b.failures < MAX_ERRORS_PER_USER

    async def think(self) -> None:
        lo, hi = self.args.think_range
        if hi > 0:
            pause = self.rng.uniform(lo, hi)
            await asyncio.sleep(max(0.0, min(pause, self.deadline - time.monotonic())))

    async def stumble(self) -> None:
        """After a failed request: a short pause, so a broken server is not hammered."""
        await asyncio.sleep(0.2)


# --- annotators -----------------------------------------------------------------------------


class Annotator(Person):
    async def open_review(self) -> str | None:
        """GET /review/ as a browser opens it: the claim it sends on load when it holds
        nothing, and the photo. The panel's HTML, or None."""
        page = await self.b.send("GET", "/review/")
        if page is None:
            return None
        self.b.page_url = "/review/"
        html = page.text
        if CLAIMING in html:  # hx-trigger="load": the claim, a POST with the page's token
            panel = await self.b.send("POST", "/review/", data={}, htmx=True)
            if panel is None:
                return None
            html = panel.text
        await self.photo(html)
        return html

    async def photo(self, html: str) -> None:
        found = PHOTO_RE.search(html)
        if found:
            await self.b.send("GET", found.group(1), expect=(200,))

    async def run(self) -> None:
        b, rng, stats = self.b, self.rng, self.b.stats
        await asyncio.sleep(self.start_after)
        html = await self.open_review()
        last_reviewed: int | None = None
        for _ in range(MAX_ACTIONS_PER_USER):
            if not self.going():
                return
            await self.think()
            if not self.going():
                return
            if html is None:
                await self.stumble()
                html = await self.open_review()
                continue
            shown = REVIEW_FORM_RE.search(html)
            if EMPTY in html or (shown is None and CLAIMING not in html):
                stats.out_of_work.add(b.name)  # nothing left: ask again later, as a person
                html = await self.open_review()
                continue
            action = pick(rng, ANNOTATOR_ACTIONS)
            if action == "undo" and UNDO_FORM not in html:
                action = "submit"
            if action == "me":
                if await b.send("GET", "/me/") is not None:
                    b.page_url = "/me/"
                    await self.think()
                html = await self.open_review()
                continue
            if shown is None:
                html = await self.open_review()
                continue
            candidate = int(shown.group(1))
            if action == "skip":
                answer = await b.send("POST", f"/review/{candidate}/skip/", data={}, htmx=True)
                html = answer.text if answer is not None else None
                if html is not None:
                    await self.photo(html)
                continue
            if action == "undo":
                answer = await b.send(
                    "POST", "/review/undo/", data={}, htmx=True, expect=(200, 409)
                )
                html = answer.text if answer is not None else None
                if answer is not None and answer.status_code == 409:
                    stats.refusals["undo: resolved meanwhile"] = (
                        stats.refusals.get("undo: resolved meanwhile", 0) + 1
                    )
                elif html is not None and "Review taken back" in html and last_reviewed:
                    stats.reviews.discard((b.name, last_reviewed))
                    last_reviewed = None
                if html is not None:
                    await self.photo(html)
                continue
            form = self.decide(html)
            answer = await b.send("POST", f"/review/{candidate}/", data=form, htmx=True)
            html = answer.text if answer is not None else None
            if html is None:
                continue
            if "Review saved." in html:
                stats.reviews.add((b.name, candidate))
                last_reviewed = candidate
            else:  # the candidate was gone for this person (a lease lost): said in a notice
                stats.refusals["submit: candidate gone"] = (
                    stats.refusals.get("submit: candidate gone", 0) + 1
                )
            await self.photo(html)

    def decide(self, html: str) -> dict:
        rng = self.rng
        decision = pick(rng, DECISIONS)
        key = SUBMISSION_KEY_RE.search(html)
        reasons = REASON_RE.findall(html)
        form: dict = {
            "seconds": str(rng.randint(8, 120)),
            "submission_key": key.group(1) if key else "",
            "decision": decision,
            "comment": "",
        }
        if decision == "revise":
            question = QUESTION_RE.search(html)
            text = question.group(1) if question else "A question"
            # Unescaped as the textarea would hold it; two identical revisions agree.
            text = (
                text.replace("&#x27;", "'")
                .replace("&quot;", '"')
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
            )
            form["revised_text"] = text + " (revised)"
        chosen = []
        if reasons and decision == "discard":
            chosen = rng.sample(reasons, k=min(len(reasons), rng.choice((1, 1, 2))))
        elif reasons and rng.random() < 0.1:
            chosen = [rng.choice(reasons)]
        if chosen:
            form["reasons"] = chosen
        if rng.random() < 0.1:
            form["comment"] = f"bench: {words(rng, 5)}"
        return form


# --- revisers -------------------------------------------------------------------------------


@dataclass
class Draft:
    """What the reviser's browser shows of its draft."""

    version_id: int
    revision: int = 0
    tiers: dict[int, str] = field(default_factory=dict)  # live check pk -> tier
    deleted: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    edits_left: int = 0

    def read(self, html: str) -> bool:
        found = REVISION_RE.search(html)
        if found is None:
            return False
        self.revision = int(found.group(1))
        parts = TIER_GROUP_RE.split(html)  # text, tier, text, tier, ...
        self.tiers = {
            int(pk): tier
            for tier, chunk in zip(parts[1::2], parts[2::2], strict=True)
            for pk in CHECK_RE.findall(chunk)
        }
        self.deleted = [int(pk) for pk in RESTORE_RE.findall(html)]
        opening, closing = SOURCE_SELECT
        start = html.find(opening)
        end = html.find(closing, start) if start >= 0 else -1
        if end >= 0:
            self.sources = OPTION_RE.findall(html, start, end)
        return True

    def apply(self, op: str, pk: int | None, sent: int, html: str) -> str:
        """Apply an edit's answer (a fragment); '' when it is what it should be."""
        found = REVISION_RE.search(html)
        if found is None or TIER_GROUP_RE.search(html):
            return "not a fragment with a revision"
        if int(found.group(1)) != sent + 1:
            return f"revision {found.group(1)} after {sent}"
        shown = [int(k) for k in CHECK_RE.findall(html)]
        removed = [int(k) for k in REMOVED_RE.findall(html)]
        tier = CURRENT_TIER_RE.search(html)
        if op == "delete":
            if shown or removed != [pk]:
                return f"a deletion answered with checks {shown}, removed {removed}"
            self.tiers.pop(pk, None)
            self.deleted.append(pk)
        else:
            if len(shown) != 1 or (pk is not None and shown != [pk]) or tier is None:
                return f"{op} of {pk} answered with checks {shown}"
            self.tiers[shown[0]] = tier.group(1)
            if op == "restore":
                self.deleted = [d for d in self.deleted if d != pk]
        self.revision = sent + 1
        return ""


class Reviser(Person):
    async def claim(self) -> Draft | None:
        """The queue, a pause, then the claim form; the workspace it redirects to."""
        b = self.b
        if await b.send("GET", "/rubrics/") is None:
            return None
        b.page_url = "/rubrics/"
        await self.think()
        answer = await b.send(
            "POST", "/rubrics/claim/", data={"csrfmiddlewaretoken": b.csrf}, expect=(302,)
        )
        if answer is None:
            return None
        location = urlsplit(answer.headers.get("location", "")).path
        found = VERSION_URL_RE.match(location)
        if found is None:  # the queue: nothing is waiting
            b.stats.out_of_work.add(b.name)
            return None
        draft = Draft(int(found.group(1)))
        lo, hi = self.args.round_range
        draft.edits_left = self.rng.randint(lo, hi)
        if not await self.load(draft):
            return None
        return draft

    async def load(self, draft: Draft) -> bool:
        path = f"/rubrics/versions/{draft.version_id}/"
        page = await self.b.send("GET", path)
        if page is None:
            return False
        self.b.page_url = path
        if not draft.read(page.text):
            self.b.stats.record(f"GET {normalise(path)}", "no checklist", None, False, self.b.name)
            return False
        return True

    async def run(self) -> None:
        b, stats = self.b, self.b.stats
        await asyncio.sleep(self.start_after)
        draft = None
        for _ in range(MAX_ACTIONS_PER_USER):
            if not self.going():
                return
            if draft is None:
                draft = await self.claim()
                if draft is None:
                    await self.think()
                    await self.stumble()
                continue
            await self.think()
            if not self.going():
                return
            base = f"/rubrics/versions/{draft.version_id}"
            if draft.edits_left <= 0:
                sent = draft.revision
                answer = await b.send(
                    "POST",
                    f"{base}/complete/",
                    data={"revision": str(sent)},
                    htmx=True,
                    expect=(204,),
                )
                if answer is None or not answer.headers.get("hx-redirect"):
                    if answer is not None:
                        stats.record(
                            f"POST {normalise(base)}/complete/",
                            "204 without HX-Redirect",
                            None,
                            False,
                            b.name,
                        )
                    await self.load(draft)
                    continue
                stats.edits[(draft.version_id, sent + 1)] = "complete"
                stats.rounds_completed += 1
                draft = None
                continue
            action = pick(self.rng, REVISER_ACTIONS)
            if action == "restore" and not draft.deleted:
                action = "edit_text"
            if action == "reload" or (not draft.tiers and action != "add"):
                await self.load(draft)
                continue
            op, pk, path, form = self.edit(draft, action)
            sent = draft.revision
            answer = await b.send("POST", path, data={**form, "revision": str(sent)}, htmx=True)
            if answer is None:
                await self.load(draft)  # the refusal is drawn; a person would reload
                continue
            wrong = draft.apply(op, pk, sent, answer.text)
            if wrong:
                stats.record(
                    f"POST {normalise(path)}",
                    "200, not the answer expected",
                    None,
                    False,
                    f"{b.name}: {wrong}",
                )
                await self.load(draft)
                continue
            stats.edits[(draft.version_id, sent + 1)] = EDIT_OPS[op]
            draft.edits_left -= 1

    def edit(self, draft: Draft, op: str) -> tuple[str, int | None, str, dict]:
        rng, name = self.rng, self.b.name
        base = f"/rubrics/versions/{draft.version_id}/checks"
        if op == "add" or not draft.tiers:
            after = str(rng.choice(list(draft.tiers))) if draft.tiers and rng.random() < 0.5 else ""
            source = rng.choice(draft.sources) if draft.sources and rng.random() < 0.5 else ""
            return (
                "add",
                None,
                f"{base}/add/",
                {
                    "text": f"The response states that {words(rng, 6)} (added by {name}).",
                    "tier": rng.choice(TIERS),
                    "source": source,
                    "after": after,
                },
            )
        if op == "restore":
            pk = rng.choice(draft.deleted)
            return op, pk, f"{base}/{pk}/restore/", {}
        pk = rng.choice(list(draft.tiers))
        if op == "edit_text":
            text = f"The response states that {words(rng, 8)} ({name})."
            return op, pk, f"{base}/{pk}/text/", {"text": text}
        if op == "retier":
            tier = rng.choice([t for t in TIERS if t != draft.tiers[pk]])
            return op, pk, f"{base}/{pk}/tier/", {"tier": tier}
        if op == "delete":
            return op, pk, f"{base}/{pk}/delete/", {"reason": f"bench: redundant ({name})"}
        return "move", pk, f"{base}/{pk}/move/", {"direction": rng.choice(("up", "down"))}


# --- the run --------------------------------------------------------------------------------


async def run_load(args, credentials: dict) -> tuple[Stats, float, datetime, dict]:
    password = credentials["password"]
    revisers = credentials["revisers"][: args.revisers]
    if len(revisers) < args.revisers:
        raise SystemExit(f"{args.credentials} names {len(revisers)} revisers; want {args.revisers}")
    annotators = [args.annotator_names.format(i) for i in range(1, args.annotators + 1)]
    stats = Stats()
    started_at = datetime.now(UTC)
    people = [("annotator", n) for n in annotators] + [("reviser", n) for n in revisers]
    async with contextlib.AsyncExitStack() as stack:
        browsers = []
        for _, name in people:
            browser = Browser(name, args, stats)
            await stack.enter_async_context(browser.client)
            browsers.append(browser)
        # Everyone logs in first, four at a time (a password hash is slow on purpose); timed
        # apart and before the warm-up.
        gate = asyncio.Semaphore(4)

        async def login(browser):
            async with gate:
                return await browser.login(browser.name, password)

        t_login = time.perf_counter()
        logged_in = await asyncio.wait_for(
            asyncio.gather(*(login(b) for b in browsers)), timeout=len(browsers) * args.timeout
        )
        login_seconds = time.perf_counter() - t_login
        stats.measure_from = time.perf_counter() + args.warmup
        stats.measure_to = stats.measure_from + args.seconds
        deadline = time.monotonic() + args.warmup + args.seconds
        pids = {"gunicorn": args.gunicorn_pid, "PostgreSQL": args.postgres_pid}
        pids = {name: pid for name, pid in pids.items() if pid}

        async def sample_cpu():
            for at in (stats.measure_from, stats.measure_to):
                await asyncio.sleep(max(0.0, at - time.perf_counter()))
                stats.cpu.append(cpu_sample(pids))

        sampler = asyncio.create_task(sample_cpu())
        tasks = []
        for i, ((role, _), browser, ok) in enumerate(zip(people, browsers, logged_in, strict=True)):
            if not ok:
                continue
            kind = Annotator if role == "annotator" else Reviser
            person = kind(browser, args, deadline, random.Random(args.seed * 1000 + i))
            tasks.append(asyncio.create_task(person.run()))
        # Bounded: every request has a timeout and every loop checks the deadline.
        await asyncio.wait_for(
            asyncio.gather(*tasks, sampler),
            timeout=args.warmup + args.seconds + 2 * args.timeout + 30,
        )
    elapsed = min(time.perf_counter(), stats.measure_to) - stats.measure_from
    logins = {
        "people": len(people),
        "logged_in": sum(logged_in),
        "seconds": round(login_seconds, 1),
    }
    return stats, elapsed, started_at, logins


# --- the rules, checked in the database with SQL --------------------------------------------


def normalize_text(text: str) -> str:
    """As the app compares two revisions: case and spacing aside."""
    return re.sub(r"\s+", " ", text or "").strip().casefold()


def check_database(stats: Stats, started_at: datetime, dsn: str) -> dict:
    """The review and revision rules over the whole database, with plain SQL (psycopg):

    reviews: no candidate with more than two reviews, nor two by one person, nor one by its
    author or co-author, nor with author copies that differ from the candidate's; no open
    candidate with two reviews; every candidate reviewed during the run has the status its two
    reviews (or its adjudication) give, and a revised one its child of the next round; every
    review the page said was saved (and not taken back) is in the database, and every review
    written during the run is one of those.
    revisions: each human version's edit revisions run 1..n and n is its revision; a frozen
    version's last edit is its completion, at its freeze, and it holds no claim; no version has
    two live claims, no reviser two live drafts; every edit the client saw succeed is there with
    its operation, and every edit written during the run was seen.
    """
    import psycopg

    found: dict[str, list] = {}
    with psycopg.connect(dsn) as db, db.cursor() as cur:

        def rows(sql, *params):
            cur.execute(sql, params)
            return cur.fetchall()

        def ids(name, sql, *params):
            found[name] = [r[0] for r in rows(sql, *params)]

        ids(
            "more_than_two_reviews",
            "SELECT candidate_id FROM annotation_review GROUP BY candidate_id HAVING count(*) > 2",
        )
        ids(
            "same_annotator_twice",
            "SELECT candidate_id FROM annotation_review "
            "GROUP BY candidate_id, annotator_id HAVING count(*) > 1",
        )
        ids(
            "review_by_author",
            "SELECT r.id FROM annotation_review r JOIN annotation_candidate c "
            "ON c.id = r.candidate_id WHERE r.annotator_id IN (c.author_id, c.co_author_id)",
        )
        ids(
            "author_copy_mismatch",
            "SELECT r.id FROM annotation_review r JOIN annotation_candidate c "
            "ON c.id = r.candidate_id WHERE r.candidate_author_id IS DISTINCT FROM c.author_id "
            "OR r.candidate_co_author_id IS DISTINCT FROM c.co_author_id",
        )
        ids(
            "open_with_two_reviews",
            "SELECT c.id FROM annotation_candidate c JOIN "
            "annotation_review r ON r.candidate_id = c.id WHERE c.status = 'open' "
            "GROUP BY c.id HAVING count(*) >= 2",
        )
        touched = rows(
            "SELECT c.id, c.status, c.round, a.decision, "
            "  array_agg(r.decision ORDER BY r.slot), array_agg(r.revised_text ORDER BY r.slot), "
            "  (SELECT array_agg(k.round) FROM annotation_candidate k WHERE k.parent_id = c.id) "
            "FROM annotation_candidate c JOIN annotation_review r ON r.candidate_id = c.id "
            "LEFT JOIN annotation_adjudication a ON a.candidate_id = c.id "
            "WHERE c.id IN (SELECT candidate_id FROM annotation_review WHERE created_at >= %s) "
            "GROUP BY c.id, a.decision",
            started_at,
        )
        outcome = {"accept": "accepted", "discard": "discarded", "revise": "revised"}
        wrong_status, no_child, short = [], [], []
        for cid, status, round_, adjudicated, decisions, texts, children in touched:
            if status == "open":
                continue
            if adjudicated:
                expected = outcome[adjudicated]
            elif len(decisions) != 2:
                short.append(cid)
                continue
            elif set(decisions) == {"accept"}:
                expected = "accepted"
            elif set(decisions) == {"discard"}:
                expected = "discarded"
            elif set(decisions) == {"revise"} and normalize_text(texts[0]) == normalize_text(
                texts[1]
            ):
                expected = "revised"
            else:
                expected = "disputed"
            if status != expected:
                wrong_status.append(cid)
            if status == "revised" and round_ + 1 not in (children or []):
                no_child.append(cid)
        found["resolved_without_two_reviews_or_adjudication"] = short
        found["status_disagrees_with_reviews"] = wrong_status
        found["revised_without_child"] = no_child
        written = {
            (name, cid)
            for name, cid in rows(
                "SELECT u.username, r.candidate_id FROM annotation_review r "
                "JOIN auth_user u ON u.id = r.annotator_id WHERE r.created_at >= %s",
                started_at,
            )
        }
        found["saved_review_missing"] = sorted(stats.reviews - written)
        found["review_written_without_a_saved_page"] = sorted(written - stats.reviews)

        versions = {
            vid: (revision, frozen_at)
            for vid, revision, frozen_at in rows(
                "SELECT id, revision, frozen_at FROM rubrics_rubricversion "
                "WHERE stage IN ('human_1', 'human_2')"
            )
        }
        history: dict[int, list] = {}
        for eid, vid, op, revision, at in rows(
            "SELECT id, version_id, op, revision, at FROM rubrics_checkedit ORDER BY id"
        ):
            history.setdefault(vid, []).append((eid, op, revision, at))
        found.update(
            {
                "revisions_not_1_to_n": [],
                "revision_counter_disagrees": [],
                "frozen_without_completion_last": [],
                "edit_after_freeze": [],
            }
        )
        for vid, (revision, frozen_at) in versions.items():
            edits = history.get(vid, [])
            if sorted(e[2] for e in edits) != list(range(1, len(edits) + 1)):
                found["revisions_not_1_to_n"].append(vid)
            if revision != len(edits):
                found["revision_counter_disagrees"].append(vid)
            if frozen_at is None:
                continue
            last = max(edits, key=lambda e: e[2], default=None)
            if last is None or last[1] != "complete" or last[3] != frozen_at:
                found["frozen_without_completion_last"].append(vid)
            if any(e[3] > frozen_at or (last and e[0] > last[0]) for e in edits):
                found["edit_after_freeze"].append(vid)
        ids(
            "frozen_with_a_claim",
            "SELECT c.version_id FROM rubrics_revisionclaim c JOIN "
            "rubrics_rubricversion v ON v.id = c.version_id WHERE v.frozen_at IS NOT NULL",
        )
        ids(
            "version_with_two_live_claims",
            "SELECT version_id FROM rubrics_revisionclaim "
            "WHERE expires_at > now() GROUP BY version_id HAVING count(*) > 1",
        )
        ids(
            "reviser_with_two_live_drafts",
            "SELECT c.reviser_id FROM rubrics_revisionclaim c "
            "JOIN rubrics_rubricversion v ON v.id = c.version_id WHERE c.expires_at > now() "
            "AND v.frozen_at IS NULL GROUP BY c.reviser_id HAVING count(*) > 1",
        )
        by_key = {(vid, e[2]): e for vid, edits in history.items() for e in edits}
        found["edit_seen_missing"] = [k for k in stats.edits if k not in by_key]
        found["edit_seen_differs"] = [
            k for k, op in stats.edits.items() if k in by_key and by_key[k][1] != op
        ]
        found["edits_written_without_a_success"] = sorted(
            k for k, e in by_key.items() if e[3] >= started_at and k not in stats.edits
        )
        counts = dict(rows("SELECT status, count(*) FROM annotation_candidate GROUP BY status"))
        waiting = rows(
            "SELECT count(*) FROM annotation_candidate WHERE status = 'open' AND id NOT IN "
            "(SELECT candidate_id FROM annotation_review)"
        )[0][0]
        frozen = rows(
            "SELECT count(*) FROM rubrics_rubricversion WHERE stage = 'human_1' "
            "AND frozen_at >= %s",
            started_at,
        )[0][0]
    summary: dict = {name: len(v) for name, v in found.items()}
    summary["violations"] = sum(summary.values())
    summary["examples"] = [f"{name}: {v[:5]}" for name, v in found.items() if v]
    summary["candidates_reviewed_in_run"] = len(touched)
    summary["status_counts"] = counts
    summary["open_without_reviews_left"] = waiting
    summary["rounds_frozen_in_run"] = frozen
    return summary


# --- report ---------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    credentials = json.loads(args.credentials.read_text())
    lo, hi = args.think_range
    print(
        f"team load: {args.annotators} annotators and {args.revisers} revisers, think "
        f"{'none (saturated)' if hi == 0 else f'{lo:g}-{hi:g} s'}, {args.warmup:g} s warm-up, "
        f"{args.seconds:g} s measured, against {args.url}",
        flush=True,
    )
    cpu0 = time.process_time()
    stats, elapsed, started_at, logins = asyncio.run(run_load(args, credentials))
    client_cpu = time.process_time() - cpu0
    n_requests = sum(len(v) for k, v in stats.latencies.items() if "/login/" not in k)
    result: dict = {
        "url": args.url,
        "annotators": args.annotators,
        "revisers": args.revisers,
        "think": [lo, hi],
        "warmup_seconds": args.warmup,
        "seconds": round(elapsed, 1),
        "requests": n_requests,
        "requests_per_second": round(n_requests / elapsed, 1),
        "workers": args.workers or None,
        "requests_per_second_per_worker": (
            round(n_requests / elapsed / args.workers, 1) if args.workers else None
        ),
        "logins": logins,
        "warmup_requests": stats.warmup_requests,
        "reviews_saved": len(stats.reviews),
        "edits_seen": len(stats.edits),
        "rounds_completed": stats.rounds_completed,
        "expected_refusals": stats.refusals,
        "people_out_of_work": sorted(stats.out_of_work),
        "errors": sum(stats.errors.values()),
        "error_samples": stats.error_samples,
        "client_cpu_seconds": round(client_cpu, 1),
        "endpoints": {},
    }
    print(
        f"\n{n_requests} requests in {elapsed:.1f} s after the warm-up ({stats.warmup_requests} "
        f"requests): {result['requests_per_second']} requests/s"
        + (f", {result['requests_per_second_per_worker']} a worker" if args.workers else "")
        + f"; {len(stats.reviews)} reviews saved, {len(stats.edits)} rubric edits, "
        f"{stats.rounds_completed} rounds completed; {logins['logged_in']}/{logins['people']} "
        f"logged in ({logins['seconds']} s); load client {client_cpu:.1f} CPU-s"
    )
    if len(stats.cpu) == 2 and n_requests:
        first, last = stats.cpu
        used = {name: last[name] - first[name] for name in first}
        machine = used.pop("machine")
        ours = sum(used.values())
        result["cpu_ms_per_request"] = {k: round(1000 * v / n_requests, 1) for k, v in used.items()}
        result["cpu_seconds_in_window"] = {k: round(v, 1) for k, v in used.items()}
        result["cpu_seconds_in_window"]["everything else"] = round(machine - ours, 1)
        print(
            "CPU over the measured window: "
            + ", ".join(f"{k} {v:.1f} ms" for k, v in result["cpu_ms_per_request"].items())
            + " a request; everything else on the machine "
            f"{machine - ours:.1f} CPU-s of {os.cpu_count() * elapsed:.0f}"
        )
    print(
        f"{'endpoint':44} {'count':>6} {'p50':>7} {'p95':>7} {'p99':>7} {'max':>7} "
        f"{'err':>4}  statuses"
    )
    missed = []
    for key in sorted(set(stats.statuses) | set(stats.latencies), key=lambda k: (k.split()[1], k)):
        line = summarise(
            stats.latencies.get(key, []), stats.statuses.get(key, {}), stats.errors.get(key, 0)
        )
        result["endpoints"][key] = line
        if key != LOGIN and line["count"] and not line["p95"] <= TARGET_P95_MS:
            missed.append(key)
        print(
            f"{key:44} {line['count']:6d} {line['p50']:7.1f} {line['p95']:7.1f} "
            f"{line['p99']:7.1f} {line['max']:7.1f} {line['errors']:4d}  {line['statuses']}"
        )
    # What happens only once a sitting (the claim on load, the queue before the first rubric)
    # falls in the warm-up: shown apart, its workers maybe not yet warm.
    only_warm = {
        key: summarise(values, {}, 0)
        for key, values in sorted(stats.warmup.items())
        if key != LOGIN and not stats.latencies.get(key)
    }
    result["warmup_only_endpoints"] = only_warm
    for key, line in only_warm.items():
        print(
            f"{key:44} {line['count']:6d} {line['p50']:7.1f} {line['p95']:7.1f} "
            f"{line['p99']:7.1f} {line['max']:7.1f}       (in the warm-up only)"
        )
    print(
        f"errors: {result['errors']}; expected refusals (a race lost): {stats.refusals or 0}; "
        f"people who found nothing to do: {len(stats.out_of_work)}"
    )
    for sample in stats.error_samples:
        print(f"  {sample}")
    result["target_p95_ms"] = TARGET_P95_MS
    result["target_met"] = not missed
    result["target_missed_by"] = missed
    print(
        f"target p95 < {TARGET_P95_MS:g} ms for every endpoint (login aside): "
        f"{'met' if not missed else 'NOT met: ' + ', '.join(missed)}"
        + (" (no pause: capacity, not the target)" if hi == 0 else "")
    )
    violations = 0
    if not args.no_db_check:
        dsn = os.environ.get("DATABASE_URL", "")
        if not dsn.startswith("postgres"):
            raise SystemExit("the database checks need DATABASE_URL (PostgreSQL); or --no-db-check")
        checks = check_database(stats, started_at, dsn)
        result["database"] = checks
        violations = checks["violations"]
        print(
            f"\ndatabase checks ({checks['candidates_reviewed_in_run']} candidates reviewed in "
            f"the run, {checks['rounds_frozen_in_run']} rounds frozen, "
            f"{checks['open_without_reviews_left']} candidates still waiting): "
            f"{violations} violations"
        )
        for example in checks["examples"]:
            print(f"  e.g. {example}")
    result["violations"] = violations
    out = args.out or BENCH_DIR / "out" / f"team_load-{datetime.now(UTC):%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"\nsummary: {out}")
    return 0 if result["errors"] == 0 and violations == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
