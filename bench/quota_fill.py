"""One job filling its model's quota (issue 22, section 3): the calls a second a job makes,
as a share of the model's per-minute limit, with 1, 2 and 3 Celery workers.

A structured job of --items calls (default 3,000) runs on real Celery worker processes
(`celery -A gamut_site worker`, prefork, --processes each, default 1) against a throwaway
redis-server (the broker and the rate limiter the workers share) and a throwaway PostgreSQL
(.ci/postgres.sh, migrated first); each call goes through the job system, the gateway and the
real google-genai client to tests/fake_llm.py, which answers every call after --delay seconds
(default 2) in a process of its own. The model is limited to --rpm requests a minute (default
3,000: 50 a second). Each run starts its workers, launches the job of fresh calls, waits for
it, and reads its ledger: every call's send time (its row's time less its latency).

Per run it prints the calls a second from the first send to the last answer, and in the steady
middle of the run (from the 10th to the 90th percentile of the send times), each as a share of
the limit; the most calls sent in any 60 s and in any 1 s (never above the limit: the Redis
bucket holds a second's worth); the job's pace (chunks at once, requests in flight each); and
whether the target (90% of the quota) was met. Loopback only; every wait is bounded.

    .venv/bin/python bench/quota_fill.py                            # 1, 2, 3 workers of 1 process
    .venv/bin/python bench/quota_fill.py --workers 1 --processes 4  # one worker as compose runs it
    .venv/bin/python bench/quota_fill.py --items 1000 --delay 0.5 --pg-port 5445 --redis-port 6451
"""

from __future__ import annotations

import argparse
import bisect
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
KIND = "bench.quota"
PG_DATABASE = "gamut_quota_bench"
TARGET = 0.90  # of the quota


# ---------------------------------------------------------------------------------------------
# The kind, registered in the workers (`-I bench.quota_fill`) and in this process.


def register() -> None:
    from pydantic import BaseModel

    from llm.gateway import Gateway, ModelConfig
    from llm.jobs import ItemFailed, ItemResult, current_item, register_kind

    class Answer(BaseModel):
        answer: str
        score: int

    async def one_call(gateway: Gateway, payload: dict[str, Any]) -> ItemResult:
        context = current_item.get()
        params = context.params
        model = ModelConfig(
            name=f"bench-quota-{params['run']}",  # a bucket of its own for each run
            provider="gemini",
            model="gemini-2.5-flash",
            requests_per_minute=int(params["rpm"]),
        )
        call = await gateway.call_structured(
            model,
            prompt=[f"Bench item {payload['n']} of run {params['run']}: answer."],
            schema=Answer,
            stage="bench",
            fresh=True,
            job_id=context.job_id,
        )
        if not call.ok:
            raise ItemFailed(f"{call.outcome}: {call.error}", call)
        return ItemResult.of_calls({}, call)

    # As the generation and judge stages: chunks of 20, 8 request slots before the pace.
    register_kind(KIND, one_call, chunk_size=20, concurrency=8)


if __name__ != "__main__":  # imported by a worker, Django set up
    register()


# ---------------------------------------------------------------------------------------------
# The servers.


def start_postgres(port: int) -> tuple[str, Path]:
    """A throwaway PostgreSQL (.ci/postgres.sh) with a fresh, empty database: its URL."""
    datadir = Path(f"/tmp/gamut-bench-pg-quota-{port}")
    started = subprocess.run(
        [str(REPO / ".ci/postgres.sh"), "start", str(port), str(datadir)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    url = started.stdout.strip().splitlines()[-1]
    admin = ["psql", url, "-q", "-v", "ON_ERROR_STOP=1", "-c", "SET client_min_messages = warning"]
    subprocess.run([*admin, "-c", f"DROP DATABASE IF EXISTS {PG_DATABASE}"], check=True)
    subprocess.run([*admin, "-c", f"CREATE DATABASE {PG_DATABASE}"], check=True)
    return url.rsplit("/", 1)[0] + f"/{PG_DATABASE}", datadir


def start_redis(port: int, workdir: Path) -> subprocess.Popen:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("needs Debian's redis-server")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"redis-server did not start on port {port}")


def start_fake(delay: float) -> tuple[subprocess.Popen, str]:
    """bench/llm_throughput.py's fake server in a process of its own: every call answered
    after `delay` seconds; it stops when its stdin closes."""
    fake = subprocess.Popen(
        [sys.executable, str(REPO / "bench/llm_throughput.py"), "--serve-fake"]
        + ["--delay", str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert fake.stdout is not None
    base_url = fake.stdout.readline().strip()
    if not base_url.startswith("http://127.0.0.1:"):
        raise SystemExit(f"the fake server did not start: {base_url!r}")
    return fake, base_url


def start_workers(count: int, processes: int, env: dict[str, str], log: Path) -> list:
    workers = []
    for i in range(count):
        with open(log, "a") as out:
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "gamut_site", "worker"]
                    + ["--pool=prefork", f"--concurrency={processes}", "-I", "bench.quota_fill"]
                    + ["--loglevel=WARNING", "--without-gossip", "--without-mingle"]
                    + ["--without-heartbeat", "-n", f"quota-{i}-{os.getpid()}@%h"],
                    cwd=REPO,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    return workers


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


# ---------------------------------------------------------------------------------------------
# A run.


def most_within(times: list[float], span: float) -> int:
    """The most of `times` (sorted) in any window of `span` seconds."""
    return max((bisect.bisect_left(times, t + span) - i for i, t in enumerate(times)), default=0)


def one_run(args: argparse.Namespace, workers: int, env: dict[str, str], log: Path) -> dict:
    import redis
    from django.db import connections

    from gamut_site.celery import app
    from llm import jobs
    from llm.models import Job, LedgerEntry

    redis.Redis.from_url(env["REDIS_URL"]).flushall()  # no bucket, no task from a run before
    procs = start_workers(workers, args.processes, env, log)
    try:
        deadline = time.monotonic() + 180
        while len(app.control.ping(timeout=1)) < workers:
            if time.monotonic() > deadline:
                raise SystemExit(f"the workers did not start:\n{log.read_text()[-3000:]}")
        job = jobs.job_launch(
            kind=KIND,
            items=[(f"item-{n:05d}", {"n": n}) for n in range(args.items)],
            params={"rpm": args.rpm, "run": f"{os.getpid()}-{workers}", "fresh": True},
        )
        limit = args.items / (args.rpm / 60) * 4 + 120
        deadline = time.monotonic() + limit
        while Job.objects.filter(pk=job.pk, status__in=jobs.ACTIVE).exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"job {job.pk} not done in {limit:.0f} s:\n{log.read_text()}")
            time.sleep(0.5)
        job.refresh_from_db()
    finally:
        stop(procs)
    rows = list(LedgerEntry.objects.filter(job_id=job.pk).values_list("created_at", "latency_ms"))
    connections.close_all()
    sent = sorted(created.timestamp() - latency / 1000 for created, latency in rows)
    answered = max(created.timestamp() for created, _ in rows)
    quota = args.rpm / 60
    wall = answered - sent[0]
    lo, hi = sent[len(sent) // 10], sent[len(sent) * 9 // 10]
    steady = (len(sent) * 9 // 10 - len(sent) // 10) / (hi - lo)
    return {
        "workers": workers,
        "done": job.items_done,
        "failed": job.items_failed,
        "calls": len(rows),
        "wall_s": wall,
        "rate": len(rows) / wall,
        "steady": steady,
        "share": len(rows) / wall / quota,
        "steady_share": steady / quota,
        "most_60s": most_within(sent, 60.0),
        "most_1s": most_within(sent, 1.0),
        "pace": job.pace,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--rpm", type=int, default=3000, help="the model's requests a minute")
    parser.add_argument("--delay", type=float, default=2.0, help="the fake's answer time (s)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--processes", type=int, default=1, help="each worker's --concurrency")
    parser.add_argument("--pg-port", type=int, default=5438)
    parser.add_argument("--redis-port", type=int, default=6450)
    args = parser.parse_args()
    if not shutil.which("psql"):
        raise SystemExit("needs psql and /usr/lib/postgresql/*/bin")

    workdir = Path(tempfile.mkdtemp(prefix="gamut-quota-bench-"))
    database, pg_dir = start_postgres(args.pg_port)
    redis_proc = start_redis(args.redis_port, workdir)
    fake, base_url = start_fake(args.delay)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=database,
        REDIS_URL=f"redis://127.0.0.1:{args.redis_port}/0",
        GEMINI_API_KEY="fake-gemini-key",
        GEMINI_BASE_URL=base_url,
        GAMUT_VAR_DIR=str(workdir),
        DEBUG="False",
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    os.environ.update(env)
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        register()
        print(
            f"{args.items} structured calls a run, the model limited to {args.rpm}/min "
            f"({args.rpm / 60:.0f}/s), the fake answering in {args.delay:g} s, workers of "
            f"{args.processes} process(es), {os.cpu_count()} CPUs, PostgreSQL, Redis limiter",
            flush=True,
        )
        results = []
        for workers in args.workers:
            result = one_run(args, workers, env, workdir / "workers.log")
            results.append(result)
            pace = result["pace"]
            print(
                f"{workers} worker(s): {result['done']}/{args.items} done, "
                f"{result['failed']} failed, {result['calls']} calls in {result['wall_s']:.1f} s: "
                f"{result['rate']:.1f}/s ({100 * result['share']:.1f}% of the quota), steady "
                f"{result['steady']:.1f}/s ({100 * result['steady_share']:.1f}%); most in 60 s "
                f"{result['most_60s']}, in 1 s {result['most_1s']}; pace {pace.get('chunks')} "
                f"chunk(s) x {pace.get('slots')} in flight at {pace.get('latency_s')} s; "
                f"target {TARGET:.0%}: {'met' if result['steady_share'] >= TARGET else 'NOT met'}",
                flush=True,
            )
    finally:
        if fake.stdin:
            fake.stdin.close()
        fake.wait(timeout=30)
        redis_proc.terminate()
        redis_proc.wait(timeout=30)
        subprocess.run(
            [str(REPO / ".ci/postgres.sh"), "stop", str(args.pg_port), str(pg_dir)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
