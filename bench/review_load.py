"""Load test of stage-1 review: simulated annotators claiming and reviewing candidates.

    .venv/bin/python bench/review_load.py --url http://127.0.0.1:8001 --users 30 --seconds 60

Each simulated annotator has its own httpx.AsyncClient with `Authorization: Token ...` (tokens
from bench/out/tokens.json, written by generate_review_data.py) and loops, without pause unless
--think is given: POST /api/review/claim/ (200 with a candidate, 204 when nothing is left), then
POST /api/candidates/{id}/reviews/ with a decision (80 % accept, 10 % revise with the text plus
" (revised)", 10 % discard). It prints the request rate, the p50/p95/p99 latency of each
endpoint and the errors, then (unless --no-db-check) reads the database that DATABASE_URL
selects and counts violations of the review rules. A summary goes to bench/out/ as JSON.

Exit status: 0 when there were no errors and no violations, 1 otherwise (the latency target is
reported, not enforced). Only loopback addresses are accepted for --url.
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
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
TARGET_P95_MS = 100.0
MAX_CYCLES_PER_USER = 100_000  # a bound besides the clock
MAX_ERRORS_PER_USER = 500  # a user stops after this many failed requests


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8001")
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        help="seconds of cycles before the measured ones, left out of the "
        "figures (workers load the URLconf etc. on their first request); "
        "errors and reviews in it still count; default 5",
    )
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="mean pause in seconds after each submit (exponential); default 0",
    )
    parser.add_argument("--tokens", type=Path, default=BENCH_DIR / "out" / "tokens.json")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--no-db-check", action="store_true", help="skip the rule checks against the database"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="summary JSON (default bench/out/review_load-<time>.json)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.users <= 500:
        parser.error("--users must be between 1 and 500")
    if not 1 <= args.seconds <= 3600:
        parser.error("--seconds must be between 1 and 3600")
    if not 0 <= args.warmup <= 600:
        parser.error("--warmup must be between 0 and 600")
    if not 0 <= args.think <= 600:
        parser.error("--think must be between 0 and 600")
    require_loopback(parser, args.url)
    return args


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


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"claim": [], "submit": []})
    statuses: dict[str, dict[int | str, int]] = field(
        default_factory=lambda: {"claim": {}, "submit": {}}
    )
    errors: int = 0
    conflicts: int = 0
    error_samples: list[str] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)  # review ids (opaque) from 201s
    decisions: dict[str, int] = field(default_factory=dict)
    users_out_of_work: int = 0

    measure_from: float = 0.0  # time.perf_counter() at the end of the warm-up
    warmup_requests: int = 0

    def record(
        self, endpoint: str, status: int | str, started: float, ok: bool, detail: str = ""
    ) -> None:
        if started >= self.measure_from:
            self.latencies[endpoint].append(time.perf_counter() - started)
        else:
            self.warmup_requests += 1
        counts = self.statuses[endpoint]
        counts[status] = counts.get(status, 0) + 1
        if not ok:
            self.errors += 1
            if status == 409:
                self.conflicts += 1
            if len(self.error_samples) < 10:
                self.error_samples.append(f"{endpoint} {status}: {detail[:200]}")


async def annotator(
    name: str, token: str, args, deadline: float, stats: Stats, rng: random.Random
) -> None:
    headers = {"Authorization": f"Token {token}"}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    errors = 0
    async with httpx.AsyncClient(
        base_url=args.url, headers=headers, timeout=args.timeout, limits=limits, trust_env=False
    ) as client:
        for _ in range(MAX_CYCLES_PER_USER):
            if time.monotonic() >= deadline or errors >= MAX_ERRORS_PER_USER:
                return
            t0 = time.perf_counter()
            try:
                response = await client.post("/api/review/claim/")
            except httpx.HTTPError as exc:
                stats.record("claim", type(exc).__name__, t0, False, str(exc))
                errors += 1
                await asyncio.sleep(0.1)
                continue
            if response.status_code == 204:
                stats.record("claim", 204, t0, True)
                stats.users_out_of_work += 1
                return  # nothing left for this person
            if response.status_code != 200:
                stats.record("claim", response.status_code, t0, False, response.text)
                errors += 1
                await asyncio.sleep(0.1)
                continue
            try:
                candidate = response.json()
                candidate_id, text = int(candidate["id"]), str(candidate["text"])
            except (ValueError, KeyError, TypeError):
                stats.record("claim", "200 without a candidate", t0, False, response.text)
                errors += 1
                continue
            stats.record("claim", 200, t0, True)
            roll = rng.random()
            decision = "accept" if roll < 0.8 else "revise" if roll < 0.9 else "discard"
            body = {
                "decision": decision,
                "reasons": [],
                "comment": "",
                "seconds": rng.randint(20, 300),
            }
            if decision == "revise":
                body["revised_text"] = text + " (revised)"
            elif decision == "discard":
                body["reasons"] = ["boilerplate"]
            stats.decisions[decision] = stats.decisions.get(decision, 0) + 1
            t0 = time.perf_counter()
            try:
                response = await client.post(f"/api/candidates/{candidate_id}/reviews/", json=body)
            except httpx.HTTPError as exc:
                stats.record("submit", type(exc).__name__, t0, False, str(exc))
                errors += 1
                continue
            review_id = None
            if response.status_code == 201:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    review_id = str(response.json()["id"])
            if review_id is not None:
                stats.record("submit", 201, t0, True)
                stats.submitted.append(review_id)
            else:
                stats.record(
                    "submit",
                    response.status_code,
                    t0,
                    False,
                    f"candidate {candidate_id}: {response.text}",
                )
                errors += 1
            if args.think:
                await asyncio.sleep(min(rng.expovariate(1 / args.think), 10 * args.think))


async def run_load(args, tokens: list[dict]) -> tuple[Stats, float, datetime]:
    if len(tokens) < args.users:
        raise SystemExit(f"{args.tokens} has {len(tokens)} tokens; --users is {args.users}")
    stats = Stats()
    started_at = datetime.now(UTC)
    stats.measure_from = time.perf_counter() + args.warmup
    deadline = time.monotonic() + args.warmup + args.seconds
    tasks = [
        asyncio.create_task(
            annotator(
                t["username"],
                t["token"],
                args,
                deadline,
                stats,
                random.Random(args.seed * 1000 + i),
            )
        )
        for i, t in enumerate(tokens[: args.users])
    ]
    # Bounded: every request has a timeout and every loop checks the deadline.
    await asyncio.wait_for(
        asyncio.gather(*tasks), timeout=args.warmup + args.seconds + args.timeout + 30
    )
    return stats, time.perf_counter() - stats.measure_from, started_at


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile, in milliseconds."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1] * 1000


# --- the rules, checked in the database ------------------------------------------------------


def check_database(stats: Stats, started_at: datetime) -> dict[str, int | list]:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")
    import django

    django.setup()
    from django.db.models import Count

    from annotation.candidates import normalize_text
    from annotation.models import (
        Adjudication,
        Candidate,
        CandidateStatus,
        Review,
        ReviewClaim,
    )
    from annotation.review.api import review_public_id

    candidates = {
        c["id"]: c
        for c in Candidate.objects.values(
            "id", "status", "author_id", "co_author_id", "round", "text"
        )
    }
    reviews: dict[int, list[dict]] = {}
    for r in Review.objects.values(
        "id",
        "candidate_id",
        "annotator_id",
        "decision",
        "revised_text",
        "candidate_author_id",
        "candidate_co_author_id",
        "slot",
        "created_at",
    ):
        reviews.setdefault(r["candidate_id"], []).append(r)
    adjudicated = dict(Adjudication.objects.values_list("candidate_id", "decision"))
    children: dict[int, list[int]] = {}
    for parent_id, child_round in Candidate.objects.filter(parent__isnull=False).values_list(
        "parent_id", "round"
    ):
        children.setdefault(parent_id, []).append(child_round)

    found: dict[str, list] = {
        "more_than_two_reviews": [],
        "review_by_author": [],
        "author_copy_mismatch": [],
        "same_annotator_twice": [],
        "open_with_two_reviews": [],
        "resolved_without_two_reviews_or_adjudication": [],
        "status_disagrees_with_reviews": [],
        "revised_without_child": [],
        "submitted_review_missing": [],
        "reviews_written_without_a_201": [],
    }
    outcome = {
        "accept": CandidateStatus.ACCEPTED,
        "discard": CandidateStatus.DISCARDED,
        "revise": CandidateStatus.REVISED,
    }
    for cid, c in candidates.items():
        rs = reviews.get(cid, [])
        if len(rs) > 2:
            found["more_than_two_reviews"].append(cid)
        annotators = [r["annotator_id"] for r in rs]
        if len(set(annotators)) != len(annotators):
            found["same_annotator_twice"].append(cid)
        for r in rs:
            if r["annotator_id"] in (c["author_id"], c["co_author_id"]):
                found["review_by_author"].append(r["id"])
            if (r["candidate_author_id"], r["candidate_co_author_id"]) != (
                c["author_id"],
                c["co_author_id"],
            ):
                found["author_copy_mismatch"].append(r["id"])
        status = c["status"]
        if status == CandidateStatus.OPEN:
            if len(rs) >= 2:
                found["open_with_two_reviews"].append(cid)
            continue
        if len(rs) < 2 and cid not in adjudicated:
            found["resolved_without_two_reviews_or_adjudication"].append(cid)
            continue
        if cid in adjudicated:
            expected = outcome[adjudicated[cid]]
        elif len(rs) == 2:
            first, second = sorted(rs, key=lambda r: r["slot"])
            decisions = {first["decision"], second["decision"]}
            if decisions == {"accept"}:
                expected = CandidateStatus.ACCEPTED
            elif decisions == {"discard"}:
                expected = CandidateStatus.DISCARDED
            elif decisions == {"revise"} and normalize_text(
                first["revised_text"]
            ) == normalize_text(second["revised_text"]):
                expected = CandidateStatus.REVISED
            else:
                expected = CandidateStatus.DISPUTED
        else:
            expected = status
        if status != expected:
            found["status_disagrees_with_reviews"].append(cid)
        if status == CandidateStatus.REVISED and c["round"] + 1 not in children.get(cid, []):
            found["revised_without_child"].append(cid)

    # The API's review ids are opaque (annotation.review.api.review_public_id): matched through it.
    in_db = {review_public_id(r) for r in Review.objects.only("id")}
    found["submitted_review_missing"] = sorted(set(stats.submitted) - in_db)
    written = {review_public_id(r): r.pk for r in Review.objects.filter(created_at__gte=started_at)}
    found["reviews_written_without_a_201"] = sorted(
        pk for public, pk in written.items() if public not in set(stats.submitted)
    )

    summary: dict[str, int | list] = {name: len(ids) for name, ids in found.items()}
    summary["examples"] = [f"{name}: {ids[:5]}" for name, ids in found.items() if ids]
    summary["candidates"] = len(candidates)
    summary["open_candidates_left"] = sum(
        1
        for c in candidates.values()
        if c["status"] == CandidateStatus.OPEN and len(reviews.get(c["id"], [])) == 0
    )
    summary["claims_left"] = ReviewClaim.objects.count()
    summary["status_counts"] = dict(
        Candidate.objects.values_list("status").annotate(n=Count("id")).order_by("status")
    )
    return summary


def main(argv=None) -> int:
    args = parse_args(argv)
    tokens = json.loads(args.tokens.read_text())["annotators"]
    print(
        f"review load: {args.users} annotators, {args.seconds:g} s, think {args.think:g} s, "
        f"against {args.url}",
        flush=True,
    )
    cpu0 = time.process_time()
    stats, elapsed, started_at = asyncio.run(run_load(args, tokens))
    client_cpu = time.process_time() - cpu0

    n_requests = sum(len(v) for v in stats.latencies.values())
    result: dict = {
        "url": args.url,
        "users": args.users,
        "seconds": round(elapsed, 1),
        "think": args.think,
        "requests": n_requests,
        "requests_per_second": round(n_requests / elapsed, 1),
        "reviews_submitted": len(stats.submitted),
        "submits_per_second": round(len(stats.latencies["submit"]) / elapsed, 1),
        "decisions": stats.decisions,
        "errors": stats.errors,
        "conflicts_409": stats.conflicts,
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
        f"({stats.warmup_requests} requests): {result['requests_per_second']} requests/s "
        f"overall, {len(stats.submitted)} reviews in all; load client used "
        f"{client_cpu:.1f} CPU-s"
    )
    print(
        f"{'endpoint':8} {'count':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        "  statuses"
    )
    target_met = True
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
        target_met &= p95 <= TARGET_P95_MS
        print(
            f"{endpoint:8} {len(values):7d} {p50:8.1f} {p95:8.1f} {p99:8.1f} {top:8.1f}  "
            f"{result['statuses'][endpoint]}"
        )
    print(
        f"errors: {stats.errors} (409 conflicts: {stats.conflicts}); annotators who ran out "
        f"of candidates: {stats.users_out_of_work}"
    )
    for sample in stats.error_samples:
        print(f"  {sample}")
    result["target_p95_ms"] = TARGET_P95_MS
    result["target_met"] = bool(target_met)
    print(
        f"target p95 <= {TARGET_P95_MS:g} ms for claim and submit: "
        f"{'met' if target_met else 'NOT met'}"
    )

    violations = 0
    if not args.no_db_check:
        checks = check_database(stats, started_at)
        result["database"] = checks
        rule_names = [
            k
            for k, v in checks.items()
            if isinstance(v, int) and k not in ("candidates", "open_candidates_left", "claims_left")
        ]
        violations = sum(checks[k] for k in rule_names)
        print(
            f"\ndatabase checks ({checks['candidates']} candidates, "
            f"{checks['open_candidates_left']} open without reviews left, "
            f"{checks['claims_left']} claims left): {violations} violations"
        )
        for name in rule_names:
            print(f"  {name:46} {checks[name]}")
        for example in checks["examples"]:
            print(f"  e.g. {example}")
    result["violations"] = violations

    out = args.out or BENCH_DIR / "out" / f"review_load-{datetime.now(UTC):%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"\nsummary: {out}")
    return 0 if stats.errors == 0 and violations == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
