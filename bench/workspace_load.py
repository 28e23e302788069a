"""Load test of the rubric revision workspace: simulated revisers editing their own drafts.

    .venv/bin/python bench/workspace_load.py --url http://127.0.0.1:8002 --users 10 --seconds 60

The revisers and their password come from bench/out/revisers.json (written by
generate_rubric_data.py). Each simulated reviser has its own aiohttp.ClientSession (one
connection, its own cookie jar) and first logs in through /login/ as a browser does: GET the
page for the csrftoken cookie, then POST the form with the token as csrfmiddlewaretoken and
X-CSRFToken. All logins finish before the load starts. Then each reviser, without pause unless
--think is given:

  1. POST /rubrics/claim/, which redirects to its own draft /rubrics/versions/<id>/ (or to the
     queue when no rubric is left: that reviser stops);
  2. loops: GET the workspace page, then --edits-per-get htmx edits (HX-Request: true and
     X-CSRFToken), each carrying the draft's current `revision`, read from the first revision
     field of the page or of the answer to the last edit (which puts it in every form):
     edit a check's text (30 %), re-tier a check (20 %), delete a check with a reason (15 %),
     add a check (15 %, after a random check or at the end, half of them linked to a meta
     item), move a check up or down (20 %). An edit is answered with a fragment (the changed
     check and out-of-band regions), which the client checks and applies to what it knows of
     the draft as a browser would: an answer that carries another check, the whole checklist,
     or not the changed check is an error;
  3. after --round-edits edits on average (uniformly from half to one and a half times that),
     POSTs complete (204 with HX-Redirect) and claims the next rubric.

It prints the request rate, the p50/p95/p99 latency of each endpoint and the errors (any
status other than the expected one; 409 stale refusals also counted apart: there should be none,
since each reviser edits only its own draft), then (unless --no-db-check) reads the database
that DATABASE_URL selects and checks the edit history: see check_database. A summary goes to
bench/out/ as JSON.

Exit status: 0 when there were no errors and no violations, 1 otherwise (the latency target is
reported, not enforced). Only loopback addresses are accepted for --url.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlencode, urlsplit

import aiohttp
from multidict import CIMultiDictProxy
from review_load import Stats, percentile, require_loopback

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
TARGET_P95_MS = 100.0
TIERS = ("answer_critical", "valuable", "context")
EDITS = {"edit_text": 0.30, "retier": 0.20, "delete": 0.15, "add": 0.15, "move": 0.20}
ENDPOINTS = ("login", "claim", "workspace", *EDITS, "complete")
UNTARGETED = ("login",)  # a password hash is slow on purpose
MAX_REQUESTS_PER_USER = 200_000  # a bound besides the clock
MAX_ERRORS_PER_USER = 500  # a reviser stops after this many failed requests
WORDS = (
    "braised",
    "beef",
    "red",
    "wine",
    "onion",
    "carrot",
    "garlic",
    "thyme",
    "bacon",
    "mushroom",
    "stock",
    "shallot",
    "Burgundy",
    "simmer",
    "brown",
    "marinate",
    "oven",
)

REVISION_RE = re.compile(r'name="revision" value="(\d+)"')
TIER_GROUP_RE = re.compile(r'<div class="tier-group tier-(\w+)">')
CHECK_RE = re.compile(r'action="/rubrics/versions/\d+/checks/(\d+)/text/"')
REMOVED_RE = re.compile(r'hx-swap-oob="delete:#check-(\d+)"')
SOURCE_SELECT = ('<select name="source">', "</select>")
OPTION_RE = re.compile(r'<option value="([^"]+)">')
VERSION_URL_RE = re.compile(r"^/rubrics/versions/(\d+)/$")
# A failed request: a transport error or a timeout. aiohttp's timeouts (ServerTimeoutError) are
# ClientError and TimeoutError alike; a bare TimeoutError is caught too, should one come from a
# wait aiohttp does not wrap.
HTTP_ERRORS = (aiohttp.ClientError, TimeoutError)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8002")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        help="seconds of requests before the measured ones, left out of the "
        "figures (workers load the URLconf and templates on their first "
        "requests); errors and edits in it still count; default 5",
    )
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="mean pause in seconds after each workspace GET and each edit "
        "(exponential); default 0",
    )
    parser.add_argument(
        "--edits-per-get",
        type=int,
        default=3,
        help="htmx edits between two GETs of the whole page; default 3",
    )
    parser.add_argument(
        "--round-edits",
        type=int,
        default=30,
        help="mean edits of a round before it is completed; default 30",
    )
    parser.add_argument("--credentials", type=Path, default=BENCH_DIR / "out" / "revisers.json")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--no-db-check", action="store_true", help="skip the checks against the database"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="summary JSON (default bench/out/workspace_load-<time>.json)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.users <= 99:
        parser.error("--users must be between 1 and 99")
    if not 1 <= args.seconds <= 3600:
        parser.error("--seconds must be between 1 and 3600")
    if not 0 <= args.warmup <= 600:
        parser.error("--warmup must be between 0 and 600")
    if not 0 <= args.think <= 600:
        parser.error("--think must be between 0 and 600")
    if not 1 <= args.edits_per_get <= 1000:
        parser.error("--edits-per-get must be between 1 and 1000")
    if not 2 <= args.round_edits <= 10_000:
        parser.error("--round-edits must be between 2 and 10000")
    require_loopback(parser, args.url)
    return args


@dataclass
class WorkspaceStats(Stats):
    latencies: dict[str, list[float]] = field(default_factory=lambda: {e: [] for e in ENDPOINTS})
    statuses: dict[str, dict[int | str, int]] = field(
        default_factory=lambda: {e: {} for e in ENDPOINTS}
    )
    # (version id, revision it produced) -> (op, what the client sent) for each edit answered
    # with success, the completions included.
    seen: dict[tuple[int, int], tuple[str, dict]] = field(default_factory=dict)
    claimed: set[int] = field(default_factory=set)
    completed: list[int] = field(default_factory=list)
    logged_in: int = 0
    revision_jumps: int = 0  # an answer whose revision is not the one sent plus one


@dataclass
class Draft:
    """What the reviser's browser knows of its draft: the last page or partial it got."""

    version_id: int
    revision: int = 0
    checks: list[tuple[int, str]] = field(default_factory=list)  # (pk, tier), shown order
    sources: list[str] = field(default_factory=list)
    edits_left: int = 0

    def read(self, html: str) -> bool:
        found = REVISION_RE.search(html)
        if found is None:
            return False
        self.revision = int(found.group(1))
        checks = []
        parts = TIER_GROUP_RE.split(html)  # text, tier, text, tier, text ...
        for tier, chunk in zip(parts[1::2], parts[2::2], strict=True):
            checks += [(int(pk), tier) for pk in CHECK_RE.findall(chunk)]
        self.checks = checks
        # The first source select and its options, found with str.find (a third of the time of
        # a regex's search over the 200 KB page) and read in place.
        opening, closing = SOURCE_SELECT
        start = html.find(opening)
        end = html.find(closing, start + len(opening)) if start >= 0 else -1
        if end >= 0:
            self.sources = OPTION_RE.findall(html, start + len(opening), end)
        return True

    def apply(self, op: str, pk: int | None, fields: dict[str, str], html: str) -> str:
        """Apply the answer to a successful edit of check `pk` (None: an addition); "" when
        it is the fragment it should be, else what is wrong with it. The order of the checks
        within a tier is not tracked: edits pick checks at random."""
        found = REVISION_RE.search(html)
        if found is None or TIER_GROUP_RE.search(html):
            return "not a fragment with a revision"
        shown = [int(k) for k in CHECK_RE.findall(html)]
        removed = [int(k) for k in REMOVED_RE.findall(html)]
        if op == "add":
            if len(shown) != 1 or removed:
                return f"an addition answered with checks {shown}, removed {removed}"
            after = int(fields["after"]) if fields.get("after") else None
            at = next(
                (i + 1 for i, (k, _) in enumerate(self.checks) if k == after), len(self.checks)
            )
            self.checks.insert(at, (shown[0], fields["tier"]))
        elif op == "delete":
            if shown or removed != [pk]:
                return f"a deletion answered with checks {shown}, removed {removed}"
            self.checks = [c for c in self.checks if c[0] != pk]
        else:
            if shown != [pk] or removed not in ([], [pk]):
                return f"an edit of {pk} answered with checks {shown}, removed {removed}"
            if op == "retier":
                self.checks = [(k, fields["tier"] if k == pk else t) for k, t in self.checks]
        self.revision = int(found.group(1))
        return ""


class Response(NamedTuple):
    status_code: int
    headers: CIMultiDictProxy[str]
    text: str


class Browser:
    """One reviser's browser: an aiohttp session with its own cookie jar and one connection,
    which follows no redirect. Each answer is read whole and decoded once."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")  # the paths asked for are absolute
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1),
            # unsafe: the jar refuses cookies from an IP address otherwise (127.0.0.1)
            cookie_jar=aiohttp.CookieJar(unsafe=True),
            # --timeout bounds each phase (the wait for the connection included), not the
            # whole request
            timeout=aiohttp.ClientTimeout(
                total=None, connect=timeout, sock_connect=timeout, sock_read=timeout
            ),
            trust_env=False,
        )

    def cookie(self, name: str) -> str | None:
        for morsel in self.session.cookie_jar:  # a few cookies, of one host
            if morsel.key == name:
                return morsel.value
        return None

    async def request(
        self,
        method: str,
        path: str,
        data: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        form = None
        if data is not None:  # encoded here: aiohttp's FormData builds a multipart writer too
            form = urlencode(data).encode()
            headers = {**(headers or {}), "Content-Type": "application/x-www-form-urlencoded"}
        async with self.session.request(
            method, self.base_url + path, data=form, headers=headers, allow_redirects=False
        ) as response:
            body = await response.read()
        # the charset the answer names, else UTF-8, with replacement characters
        text = body.decode(response.charset or "utf-8", "replace")
        return Response(response.status, response.headers, text)

    async def get(self, path: str) -> Response:
        return await self.request("GET", path)

    async def post(self, path: str, data: dict[str, str], headers: dict[str, str]) -> Response:
        return await self.request("POST", path, data, headers)


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def edit_request(
    rng: random.Random, draft: Draft, name: str, n: int
) -> tuple[str, int | None, str, dict[str, str], dict]:
    """(op, check pk or None for an addition, path, form fields, what the CheckEdit's `after`
    should hold) of one random edit."""
    op = rng.choices(list(EDITS), weights=list(EDITS.values()))[0]
    if not draft.checks:
        op = "add"  # everything deleted: only an addition is possible
    base = f"/rubrics/versions/{draft.version_id}"
    if op == "add":
        after = str(rng.choice(draft.checks)[0]) if draft.checks and rng.random() < 0.5 else ""
        source = rng.choice(draft.sources) if draft.sources and rng.random() < 0.5 else ""
        text = f"The response states that {words(rng, 6)} (added by {name}, {n})."
        tier = rng.choice(TIERS)
        return (
            op,
            None,
            f"{base}/checks/add/",
            {"text": text, "tier": tier, "source": source, "after": after},
            {"text": text, "tier": tier},
        )
    pk, tier = rng.choice(draft.checks)
    path = f"{base}/checks/{pk}/"
    if op == "edit_text":
        text = f"The response states that {words(rng, 8)} (edit {n} by {name})."
        return op, pk, path + "text/", {"text": text}, {"text": text}
    if op == "retier":
        new = rng.choice([t for t in TIERS if t != tier])
        return op, pk, path + "tier/", {"tier": new}, {"tier": new}
    if op == "delete":
        reason = f"bench: redundant with another check ({name}, {n})"
        return op, pk, path + "delete/", {"reason": reason}, {"deleted": True, "reason": reason}
    return op, pk, path + "move/", {"direction": rng.choice(("up", "down"))}, {}


async def login(client: Browser, username: str, password: str, stats: WorkspaceStats) -> bool:
    t0 = time.perf_counter()
    try:
        page = await client.get("/login/")
        token = client.cookie("csrftoken")
        if page.status_code != 200 or not token:
            stats.record("login", page.status_code, t0, False, "no login form or no csrftoken")
            return False
        response = await client.post(
            "/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={"X-CSRFToken": token},
        )
    except HTTP_ERRORS as exc:
        stats.record("login", type(exc).__name__, t0, False, str(exc))
        return False
    ok = response.status_code == 302 and client.cookie("sessionid") is not None
    stats.record("login", response.status_code, t0, ok, f"{username}: {response.text[:200]}")
    stats.logged_in += ok
    return ok


async def reviser(
    client: Browser,
    name: str,
    args,
    deadline: float,
    stats: WorkspaceStats,
    rng: random.Random,
) -> None:
    errors = 0
    draft: Draft | None = None
    page_due = True
    edits_since_page = 0
    n = 0

    def htmx_headers() -> dict[str, str]:
        return {"HX-Request": "true", "X-CSRFToken": client.cookie("csrftoken") or ""}

    async def think() -> None:
        if args.think:
            await asyncio.sleep(min(rng.expovariate(1 / args.think), 10 * args.think))

    for _ in range(MAX_REQUESTS_PER_USER):
        if time.monotonic() >= deadline or errors >= MAX_ERRORS_PER_USER:
            return
        n += 1
        if draft is None:  # claim the next rubric
            t0 = time.perf_counter()
            token = client.cookie("csrftoken") or ""
            try:
                response = await client.post(
                    "/rubrics/claim/",
                    data={"csrfmiddlewaretoken": token},
                    headers={"X-CSRFToken": token},
                )
            except HTTP_ERRORS as exc:
                stats.record("claim", type(exc).__name__, t0, False, str(exc))
                errors += 1
                await asyncio.sleep(0.1)
                continue
            location = urlsplit(response.headers.get("location", "")).path
            found = VERSION_URL_RE.match(location)
            if response.status_code == 302 and location == "/rubrics/":
                stats.record("claim", "302 to the queue", t0, True)
                stats.users_out_of_work += 1
                return  # no rubric left for this reviser
            if response.status_code != 302 or found is None:
                stats.record(
                    "claim", response.status_code, t0, False, f"{location} {response.text}"
                )
                errors += 1
                await asyncio.sleep(0.1)
                continue
            stats.record("claim", 302, t0, True)
            draft = Draft(int(found.group(1)))
            draft.edits_left = rng.randint(args.round_edits // 2, args.round_edits * 3 // 2)
            stats.claimed.add(draft.version_id)
            page_due = True
            continue
        if page_due:  # the whole page (after a claim: following its redirect)
            t0 = time.perf_counter()
            try:
                response = await client.get(f"/rubrics/versions/{draft.version_id}/")
            except HTTP_ERRORS as exc:
                stats.record("workspace", type(exc).__name__, t0, False, str(exc))
                errors += 1
                await asyncio.sleep(0.1)
                continue
            ok = response.status_code == 200 and draft.read(response.text)
            stats.record(
                "workspace",
                response.status_code if ok else f"{response.status_code} without a checklist",
                t0,
                ok,
                response.text[:200],
            )
            if not ok:
                errors += 1
                await asyncio.sleep(0.1)
                continue
            page_due = False
            edits_since_page = 0
            await think()
            continue
        if draft.edits_left <= 0:  # complete the round
            t0 = time.perf_counter()
            sent = draft.revision
            try:
                response = await client.post(
                    f"/rubrics/versions/{draft.version_id}/complete/",
                    data={"revision": str(sent)},
                    headers=htmx_headers(),
                )
            except HTTP_ERRORS as exc:
                stats.record("complete", type(exc).__name__, t0, False, str(exc))
                errors += 1
                page_due = True
                continue
            ok = response.status_code == 204 and response.headers.get("hx-redirect")
            stats.record(
                "complete",
                response.status_code,
                t0,
                bool(ok),
                f"version {draft.version_id}: {response.text}",
            )
            if not ok:
                errors += 1
                page_due = True  # reload, and try again
                continue
            stats.seen[(draft.version_id, sent + 1)] = ("complete", {})
            stats.completed.append(draft.version_id)
            draft = None
            continue
        op, pk, path, fields, expected = edit_request(rng, draft, name, n)
        sent = draft.revision
        t0 = time.perf_counter()
        try:
            response = await client.post(
                path, data={**fields, "revision": str(sent)}, headers=htmx_headers()
            )
        except HTTP_ERRORS as exc:
            stats.record(op, type(exc).__name__, t0, False, str(exc))
            errors += 1
            page_due = True
            continue
        if response.status_code == 200:
            wrong = draft.apply(op, pk, fields, response.text)
            read = not wrong
        else:  # a refusal brings the whole checklist as it stands
            wrong = "" if draft.read(response.text) else "without a checklist"
            read = not wrong
        ok = response.status_code == 200 and read
        stats.record(
            op,
            f"{response.status_code}, not the answer expected" if wrong else response.status_code,
            t0,
            ok,
            f"version {draft.version_id} revision {sent}: {wrong} {response.text[:300]}",
        )
        if not ok:
            errors += 1
            page_due = page_due or not read  # a 409 brings the current state: go on from it
        else:
            if draft.revision != sent + 1:
                stats.revision_jumps += 1
            stats.seen[(draft.version_id, sent + 1)] = (op, expected)
            draft.edits_left -= 1
            edits_since_page += 1
            page_due = edits_since_page >= args.edits_per_get
        await think()


async def run_load(args, credentials: dict) -> tuple[WorkspaceStats, float, datetime]:
    names = credentials["revisers"]
    if len(names) < args.users:
        raise SystemExit(f"{args.credentials} has {len(names)} revisers; --users is {args.users}")
    stats = WorkspaceStats()
    started_at = datetime.now(UTC)
    async with contextlib.AsyncExitStack() as stack:
        clients = [Browser(args.url, args.timeout) for _ in names[: args.users]]
        for client in clients:
            await stack.enter_async_context(client.session)
        # Everyone logs in first (hashing a password is slow on purpose); timed apart.
        logins = await asyncio.wait_for(
            asyncio.gather(
                *(
                    login(client, name, credentials["password"], stats)
                    for client, name in zip(clients, names, strict=False)
                )
            ),
            timeout=2 * args.timeout + 30,
        )
        stats.measure_from = time.perf_counter() + args.warmup
        deadline = time.monotonic() + args.warmup + args.seconds
        tasks = [
            asyncio.create_task(
                reviser(client, name, args, deadline, stats, random.Random(args.seed * 1000 + i))
            )
            for i, (client, name, ok) in enumerate(zip(clients, names, logins, strict=False))
            if ok
        ]
        # Bounded: every request has a timeout and every loop checks the deadline.
        await asyncio.wait_for(
            asyncio.gather(*tasks), timeout=args.warmup + args.seconds + args.timeout + 30
        )
    return stats, time.perf_counter() - stats.measure_from, started_at


# --- the rules, checked in the database ------------------------------------------------------


def check_database(stats: WorkspaceStats, started_at: datetime) -> dict[str, int | list]:
    """The edit history of every human version (all of them, not only this run's):

    * its CheckEdit revisions are 1..n, without gaps or duplicates, and n is the version's
      `revision`;
    * a frozen version's last edit is its completion, made at its freeze, and no edit comes
      after it; a frozen version holds no claim;
    * no version has two live claims, and no reviser holds live claims on two drafts;
    * every edit the client saw succeed is in the database with the operation and the values
      it sent, and every edit written during the run was seen by the client.
    """
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")
    import django

    django.setup()
    from django.db.models import Count
    from django.utils import timezone

    from rubrics.models import HUMAN_STAGES, CheckEdit, RevisionClaim, RubricVersion

    now = timezone.now()
    versions = {
        v["id"]: v
        for v in RubricVersion.objects.filter(stage__in=HUMAN_STAGES).values(
            "id", "revision", "frozen_at", "made_by_id"
        )
    }
    edits: dict[int, list[dict]] = {}
    for e in CheckEdit.objects.order_by("id").values(
        "id", "version_id", "op", "revision", "at", "after"
    ):
        edits.setdefault(e["version_id"], []).append(e)

    found: dict[str, list] = {
        "revisions_not_1_to_n": [],
        "revision_counter_disagrees": [],
        "frozen_without_completion_last": [],
        "edit_after_freeze": [],
        "frozen_with_a_claim": [],
        "version_with_two_live_claims": [],
        "reviser_with_two_live_drafts": [],
        "edit_seen_missing": [],
        "edit_seen_differs": [],
        "edits_written_without_a_success": [],
    }
    for vid, v in versions.items():
        history = edits.get(vid, [])
        revisions = sorted(e["revision"] for e in history)
        if revisions != list(range(1, len(history) + 1)):
            found["revisions_not_1_to_n"].append(vid)
        if v["revision"] != len(history):
            found["revision_counter_disagrees"].append(vid)
        if v["frozen_at"] is None:
            continue
        last = max(history, key=lambda e: e["revision"], default=None)
        if last is None or last["op"] != CheckEdit.Op.COMPLETE or last["at"] != v["frozen_at"]:
            found["frozen_without_completion_last"].append(vid)
        if any(e["at"] > v["frozen_at"] or (last and e["id"] > last["id"]) for e in history):
            found["edit_after_freeze"].append(vid)
    found["frozen_with_a_claim"] = list(
        RevisionClaim.objects.filter(version__frozen_at__isnull=False).values_list(
            "version_id", flat=True
        )
    )
    live = RevisionClaim.objects.filter(expires_at__gt=now)
    found["version_with_two_live_claims"] = list(
        live.values("version_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values_list("version_id", flat=True)
    )
    found["reviser_with_two_live_drafts"] = list(
        live.filter(version__frozen_at__isnull=True)
        .values("reviser_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values_list("reviser_id", flat=True)
    )

    by_key = {(e["version_id"], e["revision"]): e for history in edits.values() for e in history}
    ops = {
        "edit_text": CheckEdit.Op.EDIT,
        "retier": CheckEdit.Op.RETIER,
        "delete": CheckEdit.Op.DELETE,
        "add": CheckEdit.Op.ADD,
        "move": CheckEdit.Op.MOVE,
        "complete": CheckEdit.Op.COMPLETE,
    }
    for key, (op, expected) in stats.seen.items():
        row = by_key.get(key)
        if row is None:
            found["edit_seen_missing"].append(key)
            continue
        after = row["after"] or {}
        if row["op"] != ops[op] or any(after.get(k) != v for k, v in expected.items()):
            found["edit_seen_differs"].append(key)
    found["edits_written_without_a_success"] = sorted(
        key for key, e in by_key.items() if e["at"] >= started_at and key not in stats.seen
    )

    summary: dict[str, int | list] = {name: len(ids) for name, ids in found.items()}
    summary["examples"] = [f"{name}: {ids[:5]}" for name, ids in found.items() if ids]
    summary["human_versions"] = len(versions)
    summary["frozen"] = sum(1 for v in versions.values() if v["frozen_at"] is not None)
    summary["edits"] = sum(len(h) for h in edits.values())
    summary["rubrics_waiting"] = (
        RubricVersion.objects.latest_per_rubric()
        .filter(frozen_at__isnull=False, stage="llm_refined_1")
        .count()
    )
    return summary


def main(argv=None) -> int:
    args = parse_args(argv)
    credentials = json.loads(args.credentials.read_text())
    print(
        f"workspace load: {args.users} revisers, {args.seconds:g} s, think {args.think:g} s, "
        f"{args.edits_per_get} edits a page, about {args.round_edits} edits a round, "
        f"against {args.url}",
        flush=True,
    )
    cpu0 = time.process_time()
    stats, elapsed, started_at = asyncio.run(run_load(args, credentials))
    client_cpu = time.process_time() - cpu0

    measured = [e for e in ENDPOINTS if e not in UNTARGETED]
    n_requests = sum(len(stats.latencies[e]) for e in measured)
    n_edits = sum(len(stats.latencies[e]) for e in EDITS)
    result: dict = {
        "url": args.url,
        "users": args.users,
        "seconds": round(elapsed, 1),
        "think": args.think,
        "edits_per_get": args.edits_per_get,
        "round_edits": args.round_edits,
        "requests": n_requests,
        "requests_per_second": round(n_requests / elapsed, 1),
        "edits_per_second": round(n_edits / elapsed, 1),
        "edits_seen": len(stats.seen),
        "rounds_completed": len(stats.completed),
        "drafts_claimed": len(stats.claimed),
        "logged_in": stats.logged_in,
        "errors": stats.errors,
        "conflicts_409": stats.conflicts,
        "revision_jumps": stats.revision_jumps,
        "warmup_seconds": args.warmup,
        "warmup_requests": stats.warmup_requests,
        "client_cpu_seconds": round(client_cpu, 1),
        "users_out_of_work": stats.users_out_of_work,
        "error_samples": stats.error_samples,
        "statuses": {k: {str(s): n for s, n in v.items()} for k, v in stats.statuses.items()},
        "latency_ms": {},
    }
    print(
        f"\n{n_requests} requests in {elapsed:.1f} s after a {args.warmup:g} s warm-up "
        f"({stats.warmup_requests} requests, logins included): "
        f"{result['requests_per_second']} requests/s overall, {n_edits} edits "
        f"({result['edits_per_second']}/s), {len(stats.completed)} rounds completed in all; "
        f"load client used {client_cpu:.1f} CPU-s"
    )
    print(
        f"{'endpoint':9} {'count':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        "  statuses"
    )
    missed = []
    for endpoint, values in stats.latencies.items():
        p50, p95, p99 = (percentile(values, q) for q in (50, 95, 99))
        top = max(values) * 1000 if values else float("nan")
        result["latency_ms"][endpoint] = {
            "count": len(values),
            "p50": round(p50, 1),
            "p95": round(p95, 1),
            "p99": round(p99, 1),
            "max": round(top, 1),
        }
        if endpoint not in UNTARGETED and values and not p95 <= TARGET_P95_MS:
            missed.append(endpoint)
        print(
            f"{endpoint:9} {len(values):7d} {p50:8.1f} {p95:8.1f} {p99:8.1f} {top:8.1f}  "
            f"{result['statuses'][endpoint]}"
        )
    print(
        f"errors: {stats.errors} (409 conflicts: {stats.conflicts}); answers whose revision "
        f"was not the one sent + 1: {stats.revision_jumps}; revisers logged in: "
        f"{stats.logged_in}/{args.users}; revisers who ran out of rubrics: "
        f"{stats.users_out_of_work}"
    )
    for sample in stats.error_samples:
        print(f"  {sample}")
    result["target_p95_ms"] = TARGET_P95_MS
    result["target_met"] = not missed
    result["target_missed_by"] = missed
    print(
        f"target p95 <= {TARGET_P95_MS:g} ms for every endpoint but login: "
        f"{'met' if not missed else 'NOT met (' + ', '.join(missed) + ')'}"
    )

    violations = 0
    if not args.no_db_check:
        checks = check_database(stats, started_at)
        result["database"] = checks
        rule_names = [
            k
            for k, v in checks.items()
            if isinstance(v, int)
            and k not in ("human_versions", "frozen", "edits", "rubrics_waiting")
        ]
        violations = sum(checks[k] for k in rule_names)
        print(
            f"\ndatabase checks ({checks['human_versions']} human versions, "
            f"{checks['frozen']} frozen, {checks['edits']} edits, "
            f"{checks['rubrics_waiting']} rubrics still waiting): {violations} violations"
        )
        for name in rule_names:
            print(f"  {name:46} {checks[name]}")
        for example in checks["examples"]:
            print(f"  e.g. {example}")
    result["violations"] = violations

    out = args.out or BENCH_DIR / "out" / f"workspace_load-{datetime.now(UTC):%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"\nsummary: {out}")
    ok = stats.errors == 0 and violations == 0 and stats.revision_jumps == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
