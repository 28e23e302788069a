"""LLM throughput of the job system against the fake Gemini server (issue 4, "Benchmark").

N structured calls (default 5,000) through the job system, in-process: a kind registered here,
one chunk holding every item, the kind's concurrency (its request slots) = C, with twice as
many items in progress; the real google-genai client talks to
tests/fake_llm.py, which answers each call after --delay seconds (default 0.2) and runs in a
process of its own so that its CPU is not counted. In the same run the bare google-genai async
client makes the same number of calls with the same C, for comparison: the client the gateway's
Gemini provider makes (its aiohttp session), called directly. The chunk runs through the Celery
task's body (llm.tasks.run_job_chunk), with DEBUG off and the loaded heap frozen before either
side is timed, as in a worker. Prints calls/s against the ideal C / delay, and CPU (this
process's user + system time) per call.

The database is a throwaway SQLite file (migrated first), or with --postgres a throwaway
PostgreSQL on 127.0.0.1:5437 (data in /tmp/gamut-bench-pg-llm, started by .ci/postgres.sh and
stopped afterwards; a fresh database each run): every call reads the answer cache and writes a
ledger row, and every item records its outcome, as in production. The rate limiter is in memory
(the model has no per-minute limit). Loopback only; every loop is bounded.

    .venv/bin/python bench/llm_throughput.py                     # C = 32, 5,000 calls, 200 ms
    .venv/bin/python bench/llm_throughput.py --concurrency 64 --calls 2000 --delay 0.2
    .venv/bin/python bench/llm_throughput.py --postgres          # the same on PostgreSQL
    .venv/bin/python bench/llm_throughput.py --skip-bare --runs 3  # the job system, 3 times
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
PG_PORT = 5437  # 5433 and 5439 are other people's; the other benchmarks use 5434-5436
PG_DIR = Path("/tmp/gamut-bench-pg-llm")
PG_DATABASE = "gamut_llm_bench"


def start_postgres() -> str:
    """A throwaway PostgreSQL (.ci/postgres.sh) with a fresh, empty database: its URL."""
    started = subprocess.run(
        [str(REPO / ".ci/postgres.sh"), "start", str(PG_PORT), str(PG_DIR)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    url = started.stdout.strip().splitlines()[-1]
    admin = [
        "psql",
        "-h",
        "127.0.0.1",
        "-p",
        str(PG_PORT),
        "-U",
        "postgres",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        "SET client_min_messages = warning",
        "-c",
    ]
    subprocess.run([*admin, f"DROP DATABASE IF EXISTS {PG_DATABASE}"], check=True)
    subprocess.run([*admin, f"CREATE DATABASE {PG_DATABASE}"], check=True)
    return url.rsplit("/", 1)[0] + f"/{PG_DATABASE}"


def stop_postgres() -> None:
    subprocess.run(
        [str(REPO / ".ci/postgres.sh"), "stop", str(PG_PORT), str(PG_DIR)],
        check=False,
        capture_output=True,
        cwd=REPO,
    )


def serve_fake(delay: float) -> None:
    """Child process: the fake server, answering every call after `delay`; stops on EOF."""
    from http.server import ThreadingHTTPServer

    from tests.fake_llm import Reply, start_fake_llm

    # The default listen backlog (5) resets connections when C of them open at once.
    ThreadingHTTPServer.request_queue_size = 1024
    fake, server = start_fake_llm()
    fake.default = Reply(text=json.dumps({"answer": "forty-two", "score": 7}), delay=delay)
    # The fake records every request: drop them as they come, or 10,000 bodies pile up.
    fake.requests = _Discard()
    print(fake.base_url, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.shutdown()


class _Discard(list):
    def append(self, _item: Any) -> None:
        pass


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def report(label: str, calls: int, ok: int, wall: float, cpu_s: float, ideal: float) -> dict:
    rate = ok / wall if wall else 0.0
    line = (
        f"{label:<12} {ok:>6}/{calls} ok  {wall:7.2f} s  {rate:7.1f} calls/s  "
        f"{100 * rate / ideal:5.1f}% of ideal {ideal:.0f}/s  "
        f"CPU {1000 * cpu_s / max(ok, 1):5.2f} ms/call"
    )
    print(line, flush=True)
    return {
        "label": label,
        "calls": calls,
        "ok": ok,
        "wall_s": round(wall, 3),
        "calls_per_s": round(rate, 1),
        "percent_of_ideal": round(100 * rate / ideal, 1),
        "cpu_ms_per_call": round(1000 * cpu_s / max(ok, 1), 2),
    }


def bare(base_url: str, key: str, calls: int, concurrency: int, schema: dict) -> tuple[int, float]:
    """The bare google-genai async client: `calls` structured calls, `concurrency` in flight.
    The client is the one the gateway's Gemini provider makes (the same HTTP options and
    aiohttp session), called directly: what the job system adds is all that differs."""
    from google.genai import types

    from llm.providers import GatewaySettings, Gemini

    async def main() -> int:
        provider = Gemini(
            GatewaySettings(gemini_api_key=key, gemini_base_url=base_url, timeout_s=60)
        )
        client = provider._client
        config = types.GenerateContentConfig(
            response_mime_type="application/json", response_json_schema=schema
        )
        gate = asyncio.Semaphore(concurrency)
        ok = 0

        async def one(n: int) -> None:
            nonlocal ok
            async with gate:
                response = await client.aio.models.generate_content(
                    model="gemini-2.5-flash", contents=f"Bench call {n}: answer.", config=config
                )
                json.loads(response.text or "")
                ok += 1

        await asyncio.gather(*(one(n) for n in range(calls)))
        await provider.aclose()
        return ok

    started = time.perf_counter()
    ok = asyncio.run(main())
    return ok, time.perf_counter() - started


def through_jobs(
    base_url: str, key: str, calls: int, concurrency: int, run: int = 0
) -> tuple[int, float, int]:
    """The job system: one job of `calls` items, one chunk, the kind's concurrency = C. Each
    run's prompts differ (`run`), so no answer comes from the cache of an earlier run."""
    from pydantic import BaseModel

    from llm import jobs, tasks
    from llm.gateway import Gateway, GatewaySettings, ModelConfig
    from llm.models import Job
    from llm.ratelimit import MemoryTokenBucket

    class Answer(BaseModel):
        answer: str
        score: int

    model = ModelConfig(
        name="bench", provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )

    async def handler(gateway: Gateway, payload: dict[str, Any]) -> jobs.ItemResult:
        context = jobs.current_item.get()
        call = await gateway.call_structured(
            model,
            prompt=[f"Bench call {payload['n']} of run {run}: answer."],
            schema=Answer,
            stage="bench",
            job_id=context.job_id,
        )
        if not call.ok:
            raise jobs.ItemFailed(f"{call.outcome}: {call.error}", call)
        return jobs.ItemResult.of_calls({"score": call.output.score}, call)

    jobs.register_kind("bench.throughput", handler, chunk_size=calls, concurrency=concurrency)
    tasks.run_job_chunk.delay_on_commit = lambda job_id: None  # this process runs the chunk
    conf = GatewaySettings(
        gemini_api_key=key,
        gemini_base_url=base_url,
        timeout_s=60,
        max_attempts=2,
        backoff_base_s=0.05,
        backoff_cap_s=0.1,
    )
    job = jobs.job_launch(
        kind="bench.throughput", items=[(f"call-{n:05d}", {"n": n}) for n in range(calls)]
    )
    tasks.GATEWAY_FACTORY = lambda: Gateway(limiter=MemoryTokenBucket(), conf=conf)
    started = time.perf_counter()
    claimed = tasks.run_job_chunk(job.pk)  # the task's body, as a worker runs it
    wall = time.perf_counter() - started
    job = Job.objects.get(pk=job.pk)
    assert claimed == calls, f"one chunk should hold every item, it held {claimed}"
    return job.items_done, wall, job.items_failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument(
        "--postgres",
        action="store_true",
        help=f"a throwaway PostgreSQL on port {PG_PORT} instead of SQLite",
    )
    parser.add_argument("--runs", type=int, default=1, help="job system runs (one job each)")
    parser.add_argument("--skip-bare", action="store_true", help="no bare-client run")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.delay)
        return
    if args.postgres and not shutil.which("psql"):
        raise SystemExit("--postgres needs psql and /usr/lib/postgresql/*/bin")

    workdir = Path(tempfile.mkdtemp(prefix="gamut-llm-bench-"))
    database = start_postgres() if args.postgres else f"sqlite:///{workdir / 'bench.sqlite3'}"
    try:
        run_benchmark(args, workdir, database)
    finally:
        if args.postgres:
            stop_postgres()


def run_benchmark(args: argparse.Namespace, workdir: Path, database: str) -> None:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=database,
        GAMUT_VAR_DIR=str(workdir),
        LOG_LEVEL="WARNING",
        DEBUG="False",  # as a production worker: no query log kept per statement
    )
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from pydantic import BaseModel

    from tests.fake_llm import GEMINI_KEY

    call_command("migrate", verbosity=0)
    # What a worker's first chunk task does (llm/tasks.py), done here before either side is
    # timed: collect, then freeze the loaded heap, so full collections scan only new objects.
    from llm.tasks import freeze_loaded_heap

    freeze_loaded_heap()
    where = (
        f"PostgreSQL {database.rsplit('@', 1)[-1]}"
        if connection.vendor == "postgresql"
        else f"SQLite {workdir / 'bench.sqlite3'}"
    )

    class Answer(BaseModel):
        answer: str
        score: int

    fake = subprocess.Popen(
        [sys.executable, __file__, "--serve-fake", "--delay", str(args.delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert fake.stdout is not None
        base_url = fake.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise SystemExit(f"the fake server did not start: {base_url!r}")
        ideal = args.concurrency / args.delay
        print(
            f"{args.calls} structured calls, C = {args.concurrency}, fake answers in "
            f"{args.delay * 1000:.0f} ms, ideal {ideal:.0f} calls/s, "
            f"{os.cpu_count()} CPUs, {where}",
            flush=True,
        )
        bare_result = None
        if not args.skip_bare:
            before = cpu()
            ok, wall = bare(
                base_url, GEMINI_KEY, args.calls, args.concurrency, Answer.model_json_schema()
            )
            bare_result = report("bare client", args.calls, ok, wall, cpu() - before, ideal)
        for run in range(args.runs):
            before = cpu()
            ok, wall, failed = through_jobs(base_url, GEMINI_KEY, args.calls, args.concurrency, run)
            result = report("job system", args.calls, ok, wall, cpu() - before, ideal)
            if failed:
                print(f"job system: {failed} items failed", flush=True)
            if bare_result is not None:
                ratio = result["calls_per_s"] / max(bare_result["calls_per_s"], 1e-9)
                cpu_ratio = result["cpu_ms_per_call"] / max(bare_result["cpu_ms_per_call"], 1e-9)
                print(
                    f"job system / bare client: {100 * ratio:.0f}% of its rate, "
                    f"{cpu_ratio:.2f} x its CPU per call",
                    flush=True,
                )
                print(
                    f"target: CPU per call <= 2 x the bare client's -> "
                    f"{'met' if cpu_ratio <= 2 else 'NOT met'}",
                    flush=True,
                )
            print(
                f"target: job system >= 85% of ideal -> "
                f"{'met' if result['percent_of_ideal'] >= 85 else 'NOT met'}",
                flush=True,
            )
    finally:
        if fake.stdin:
            fake.stdin.close()
        try:
            fake.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fake.kill()
            fake.wait()


if __name__ == "__main__":
    main()
