"""Restarts and outages mid-job with real servers (issue 22): a Redis restart, a SIGKILLed
worker, and a PostgreSQL outage with what the API and the pages answer while it lasts.

Each runs real Celery worker processes on a real redis-server; the calls go through the real
google-genai client to the fake Gemini server (tests/fake_llm.py) on loopback. None may fail
an item, run one twice (beyond a killed worker's own), or make a call the ledger does not
hold. Each prints what it measured (the fault table of the issue's closing note).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import redis
from django.conf import settings
from django.db import OperationalError, connection, connections
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pydantic import BaseModel

from core.http import DATABASE_UNAVAILABLE
from llm import jobs
from llm.models import ItemStatus, Job, JobItem, JobStatus, LedgerEntry
from llm.tests.conftest import GEMINI
from llm.tests.test_jobs import (
    assert_counters_match_rows,
    start_beat,
    start_worker,
    wait_for,
    worker_name,
)
from tests.fake_llm import GEMINI_KEY, FakeLLM, Reply, fake_llm  # noqa: F401 (fixture)
from tests.processes import child_database_url
from tests.test_worker import celery_app, free_port, redis_server_binary, stop  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(settings.BASE_DIR)
ANSWER = '{"answer": "yes"}'


class Answer(BaseModel):
    answer: str


class RedisServer:
    """A redis-server on one loopback port that can be stopped and started again, keeping its
    data as docker-compose's does (append-only file)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with open(self.dir / "redis.log", "a") as log:
            self.proc = subprocess.Popen(
                [
                    redis_server_binary(),
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.dir),
                    "--appendonly",
                    "yes",
                    "--save",
                    "",
                    "--protected-mode",
                    "yes",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.ping()
                client.close()
                return
            except redis.exceptions.BusyLoadingError:
                time.sleep(0.05)
            except redis.ConnectionError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        pytest.fail(f"redis-server did not start:\n{(self.dir / 'redis.log').read_text()}")

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


@pytest.fixture
def redis_server(tmp_path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """tests/test_worker.py's celery_app, on this module's restartable Redis."""
    return redis_server.url


def llm_items(n: int) -> list[tuple[str, dict]]:
    return [(f"item-{i:03d}", {"n": i}) for i in range(n)]


def fake_env(fake: FakeLLM) -> dict[str, str]:
    return {"GEMINI_API_KEY": GEMINI_KEY, "GEMINI_BASE_URL": fake.base_url}


def longest_gap(times: list[datetime]) -> float:
    ordered = sorted(times)
    pairs = zip(ordered, ordered[1:], strict=False)  # each time and the next
    return max(((b - a).total_seconds() for a, b in pairs), default=0.0)


# --- in this process --------------------------------------------------------------------------


def test_a_database_that_does_not_answer_is_a_503_with_the_apis_body_or_a_plain_page(root):
    """The database unreachable (SQLite: its file cannot be opened; PostgreSQL: nothing
    listens at its address) for a signed-in person: the API answers 503 with its JSON error
    body and Retry-After, a page 503 in plain words, neither Django's 500 page."""
    client = Client(raise_request_exception=False)
    client.force_login(root)
    db = connections["default"]
    saved = dict(db.settings_dict)
    db.close()
    if db.vendor == "sqlite":
        db.settings_dict["NAME"] = "/nonexistent-gamut-dir/gamut.sqlite3"
    else:
        db.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    try:
        api = client.get(reverse("api_jobs"))
        page = client.get(reverse("jobs"))
    finally:
        db.close()
        db.settings_dict.update(saved)
    assert api.status_code == 503 and api["Content-Type"] == "application/json"
    assert api.json() == {"detail": DATABASE_UNAVAILABLE} and api["Retry-After"] == "5"
    assert page.status_code == 503 and "briefly unavailable" in page.content.decode()
    assert "OperationalError" not in page.content.decode()


RERUN_KIND = "test.rerun"
_raised: set[str] = set()


async def writes_back_once_too_soon(gateway, payload):
    """A fresh call, then the stage's own write of its result meets a database outage the
    first time (as apply_generation would while PostgreSQL restarts)."""
    context = jobs.current_item.get()
    call = await gateway.call_structured(
        GEMINI,
        prompt=[f"Item {payload['n']}."],
        schema=Answer,
        stage="rerun-test",
        fresh=True,
        job_id=context.job_id,
    )
    if context.key not in _raised:
        _raised.add(context.key)
        raise OperationalError("server closed the connection unexpectedly")
    return jobs.ItemResult.of_calls({"answer": call.output.answer}, call)


@pytest.mark.usefixtures("sent")
def test_an_item_whose_own_write_meets_an_outage_runs_again_without_calling_again(harness):
    jobs.register_kind(RERUN_KIND, writes_back_once_too_soon, chunk_size=5, concurrency=5)
    _raised.clear()
    harness.fake.default = Reply(text=ANSWER, prompt_tokens=100, output_tokens=20)
    try:
        job = jobs.job_launch(kind=RERUN_KIND, items=llm_items(5))
        harness.drain(job)
    finally:
        jobs._registry.pop(RERUN_KIND, None)
    # Each item ran twice in its chunk, its one call made once: the second run was given the
    # answer (and the cost) of the first, for a job of fresh calls too.
    assert _raised == {key for key, _ in llm_items(5)}
    assert (job.items_done, job.items_failed) == (5, 0)
    assert len(harness.fake.requests) == LedgerEntry.objects.filter(job_id=job.pk).count() == 5
    assert (job.tokens_in, job.tokens_out) == (500, 100)
    assert set(JobItem.objects.filter(job=job).values_list("attempts", flat=True)) == {1}


# --- Redis -----------------------------------------------------------------------------------


@pytest.mark.slow  # waits on real servers for 8-15 s: make test leaves it to CI
def test_a_redis_restart_mid_job_fails_no_item(
    celery_app,
    redis_server,
    fake_llm,  # noqa: F811 (the imported fixture)
    tmp_path,
):
    """Redis (the broker and the rate limiter's buckets) stopped for 3 s while a worker makes
    a job's calls through the Redis limiter: the calls wait for it like after a provider's
    5xx, and every item is done, once, each call in the ledger."""
    fake_llm.default = Reply(text=ANSWER, delay=0.3)
    log_path = tmp_path / "worker.log"
    worker = start_worker(redis_server.url, log_path, "steady", **fake_env(fake_llm))
    n = 160
    try:
        job = jobs.job_launch(kind="test.llm", items=llm_items(n), params={"rpm": 1200})
        wait_for(job, lambda j: j.items_done >= 40, 90, log_path)
        redis_server.stop()
        down_at = time.monotonic()
        time.sleep(3)
        redis_server.start()
        up_at = time.monotonic()
        wait_for(job, lambda j: j.status == JobStatus.DONE, 120, log_path)
        finished = time.monotonic()
        assert worker.poll() is None, log_path.read_text()
    finally:
        stop(worker, timeout=15)

    assert (job.items_done, job.items_failed) == (n, 0), log_path.read_text()
    assert_counters_match_rows(job)
    assert set(JobItem.objects.filter(job=job).values_list("attempts", flat=True)) == {1}
    rows = LedgerEntry.objects.filter(job_id=job.pk)
    # Every request the fake saw is a ledger row, once per item: none failed, none twice.
    assert rows.count() == len(fake_llm.requests) == n
    assert sorted(rows.values_list("item_key", flat=True)) == [key for key, _ in llm_items(n)]
    assert job.tokens_in == 120 * n and job.cost == sum(r.cost for r in rows)
    gap = longest_gap(list(rows.values_list("created_at", flat=True)))
    print(
        f"\nRedis restart (down {up_at - down_at:.1f} s): calls paused {gap:.1f} s, the job "
        f"done {finished - up_at:.1f} s after Redis came back; 0 of {n} items failed, "
        f"0 run twice, {len(fake_llm.requests)} requests for {rows.count()} ledger rows"
    )


# --- a SIGKILLed worker ----------------------------------------------------------------------


def running_tokens(job: Job) -> set[str]:
    return set(
        JobItem.objects.filter(job=job, status=ItemStatus.RUNNING).values_list(
            "lease_token", flat=True
        )
    )


@pytest.mark.slow  # about 80 s: it waits out the default lease (make test leaves it to CI)
def test_a_killed_worker_delays_only_its_own_items(celery_app, redis_url, tmp_path, root):
    """A worker of four processes runs all four chunks of a job and is SIGKILLed whole (as a
    container is), with the default lease and sweep; another worker stands by, idle. The
    other worker takes the job's other items within seconds, without waiting for the lost
    leases; the job page says how many items wait for them and until when; those run again
    once their lease ran out, once more each, and nothing else runs twice or fails."""
    log_path = tmp_path / "worker.log"
    doomed = start_worker(redis_url, log_path, "doomed", processes=4)
    # The survivor listens to a queue of its own until the doomed worker holds the job's four
    # chunks, then to the tasks' queue too: idle, with nothing of the job's.
    survivor = start_worker(redis_url, log_path, "survivor", queues="standby")
    beat = start_beat(redis_url, log_path, tmp_path / "celerybeat-schedule")
    n = 300
    try:
        deadline = time.monotonic() + 90
        while len(celery_app.control.ping(timeout=1)) < 2:  # both workers up
            assert time.monotonic() < deadline, log_path.read_text()
        job = jobs.job_launch(
            kind="test.echo",
            items=[(f"img-{i:03d}", {"n": i, "sleep": 0.5}) for i in range(n)],
        )
        wait_for(job, lambda j: len(running_tokens(j)) == 4, 60, log_path)
        added = celery_app.control.add_consumer(
            celery_app.conf.task_default_queue,
            destination=[worker_name("survivor")],
            reply=True,
            timeout=10,
        )
        assert added, log_path.read_text()
        os.killpg(doomed.pid, signal.SIGKILL)
        killed_at, killed_wall = time.monotonic(), timezone.now()
        doomed.wait()
        held = set(
            JobItem.objects.filter(job=job, status=ItemStatus.RUNNING).values_list("pk", flat=True)
        )
        lease_end = max(JobItem.objects.filter(pk__in=held).values_list("lease_until", flat=True))
        # Within two heartbeats the dead chunks are told lost: the page says what waits.
        wait_for(job, lambda j: jobs.job_progress(j)["lost"] == len(held), 20, log_path)
        client = Client()
        client.force_login(root)
        page = client.get(reverse("job", args=[job.pk])).content.decode()

        def others_done(j: Job) -> bool:
            return (
                not JobItem.objects.filter(job=j)
                .exclude(pk__in=held)
                .exclude(status=ItemStatus.DONE)
                .exists()
            )

        wait_for(job, others_done, 120, log_path)
        others_at = max(
            JobItem.objects.filter(job=job)
            .exclude(pk__in=held)
            .values_list("finished_at", flat=True)
        )
        resumed_at = min(
            JobItem.objects.filter(job=job, finished_at__gt=killed_wall)
            .exclude(pk__in=held)
            .values_list("finished_at", flat=True)
        )
        wait_for(job, lambda j: j.status == JobStatus.DONE, 120, log_path)
        recovered = time.monotonic() - killed_at
    finally:
        for proc in (survivor, beat):
            stop(proc, timeout=15)
        if doomed.poll() is None:
            os.killpg(doomed.pid, signal.SIGKILL)

    # The other items did not wait for the lost leases; the page said what the job waits for.
    assert others_at < lease_end, (others_at, lease_end)
    said = timezone.localtime(lease_end).strftime("%H:%M:%S")
    assert f"{len(held)} items wait for a lost worker's lease to expire at {said}" in page
    assert (job.items_done, job.items_failed) == (n, 0)
    assert_counters_match_rows(job)
    assert (job.tokens_in, job.cost) == (10 * n, Decimal("0.001") * n)  # each counted once
    attempts = dict(JobItem.objects.filter(job=job).values_list("pk", "attempts"))
    assert {attempts[pk] for pk in held} == {2}
    assert {a for pk, a in attempts.items() if pk not in held} == {1}
    print(
        f"\nSIGKILLed worker of 4 processes (lease {settings.LLM_JOB_LEASE_SECONDS} s, sweep "
        f"every {settings.LLM_JOB_SWEEP_SECONDS} s): the other worker went on "
        f"{(resumed_at - killed_wall).total_seconds():.1f} s after the kill and had the other "
        f"{n - len(held)} items done {(others_at - killed_wall).total_seconds():.1f} s after "
        f"it; the dead chunks' {len(held)} items ran again and the job was done "
        f"{recovered:.1f} s after it; 0 failed"
    )


# --- PostgreSQL ------------------------------------------------------------------------------


class Postgres:
    """A throwaway PostgreSQL of its own (.ci/postgres.sh), stopped and started by the test."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="gamut-outage-pg-"))
        self.url = ""

    def _script(self, action: str) -> str:
        done = subprocess.run(
            [str(REPO / ".ci/postgres.sh"), action, str(self.port), str(self.dir)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    def start(self) -> None:
        self.url = self._script("start")

    def stop(self) -> None:
        self._script("stop")

    def sql(self, query: str) -> str:
        done = subprocess.run(
            ["psql", self.url, "-tAc", query], capture_output=True, text=True, timeout=30
        )
        if done.returncode:
            raise RuntimeError(done.stderr)
        return done.stdout.strip()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_sql(db: Postgres, query: str, until: Callable[[str], bool], timeout: float, log: Path):
    deadline = time.monotonic() + timeout
    value = ""
    while time.monotonic() < deadline:
        value = db.sql(query)
        if until(value):
            return value
        time.sleep(0.2)
    pytest.fail(f"{query} stayed at {value!r}:\n{log.read_text()}")


def start_web(database_url: str, redis_url: str, log_path: Path) -> tuple[subprocess.Popen, str]:  # noqa: F811
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        DEBUG="False",
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="WARNING",
    )
    with open(log_path, "a") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "gamut_site.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/login/", timeout=2)
            return proc, base
        except httpx.TransportError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    stop(proc)
    pytest.fail(f"gunicorn did not start:\n{log_path.read_text()}")


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="a PostgreSQL outage needs the test database on PostgreSQL (its copy is stopped)",
)
def test_a_postgresql_outage_mid_job_loses_and_duplicates_nothing(
    celery_app,
    redis_url,
    fake_llm,  # noqa: F811 (the imported fixture)
    tmp_path,
    root,
):
    """The database stopped for 10 s while a worker makes a job's calls (fresh ones: none from
    the cache) and the web answers: the API says 503 with its JSON error body, a page says
    503 in plain words; no call is made twice or left out of the ledger, and every item is
    done once with what its call cost."""
    fake_llm.default = Reply(text=ANSWER, delay=0.3)
    n = 200
    log_path = tmp_path / "servers.log"
    client = Client()
    client.force_login(root)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    job = jobs.job_launch(kind="test.llm", items=llm_items(n), params={"rpm": 900, "fresh": True})
    # A copy of the test database (the job, its items, the admin's session) on a server of its
    # own, which the test may stop: the worker and the web server use it.
    db = Postgres()
    worker = web = None
    try:
        db.start()
        dump = subprocess.run(
            ["pg_dump", "--no-owner", "--no-acl", child_database_url()],
            capture_output=True,
            check=True,
            timeout=120,
        )
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", db.url],
            input=dump.stdout,
            capture_output=True,
            check=True,
            timeout=120,
        )
        web, base = start_web(db.url, redis_url, log_path)
        worker = start_worker(redis_url, log_path, "steady", db.url, **fake_env(fake_llm))
        done = f"SELECT items_done FROM llm_job WHERE id = {job.pk}"
        wait_sql(db, done, lambda v: int(v or 0) >= 40, 90, log_path)

        db.stop()
        down_at = time.monotonic()
        cookies = {settings.SESSION_COOKIE_NAME: session}
        api = httpx.get(f"{base}/api/jobs/{job.pk}/", cookies=cookies, timeout=10)
        page = httpx.get(f"{base}/jobs/{job.pk}/", cookies=cookies, timeout=10)
        time.sleep(max(0.0, 10 - (time.monotonic() - down_at)))
        db.start()
        up_at = time.monotonic()

        wait_sql(
            db, f"SELECT status FROM llm_job WHERE id = {job.pk}", "done".__eq__, 120, log_path
        )
        finished = time.monotonic()
        after = httpx.get(f"{base}/api/jobs/{job.pk}/", cookies=cookies, timeout=10)
        counts = db.sql(
            f"SELECT items_done, items_failed, tokens_in, cost FROM llm_job WHERE id = {job.pk}"
        ).split("|")
        attempts = db.sql(f"SELECT DISTINCT attempts FROM llm_jobitem WHERE job_id = {job.pk}")
        ledger = db.sql(
            "SELECT count(*), count(DISTINCT item_key), sum(tokens_in), sum(cost) "
            f"FROM llm_ledgerentry WHERE job_id = {job.pk}"
        ).split("|")
        gap = float(
            db.sql(
                "SELECT extract(epoch FROM max(gap)) FROM (SELECT created_at - lag(created_at) "
                f"OVER (ORDER BY created_at) AS gap FROM llm_ledgerentry WHERE job_id = {job.pk}) g"
            )
        )
    finally:
        for proc in (worker, web):
            if proc is not None:
                stop(proc, timeout=15)
        db.remove()

    # While the database was down: the API's error body and a page of plain words, both 503.
    assert api.status_code == 503 and api.headers["content-type"] == "application/json"
    assert api.json()["detail"].startswith("The database is not answering")
    assert api.headers["retry-after"] == "5"
    assert page.status_code == 503 and "briefly unavailable" in page.text
    assert "Traceback" not in page.text and "OperationalError" not in page.text
    assert after.status_code == 200 and after.json()["status"] == "done"
    # Every item done once, with its call's cost; every request the fake saw in the ledger.
    assert counts[:2] == [str(n), "0"], log_path.read_text()
    assert attempts == "1"
    assert ledger[:2] == [str(n), str(n)]
    assert len(fake_llm.requests) == n, "calls made twice, or not recorded"
    assert counts[2] == ledger[2] == str(120 * n)
    assert Decimal(counts[3]) == Decimal(ledger[3])
    print(
        f"\nPostgreSQL outage ({up_at - down_at:.1f} s): calls paused {gap:.1f} s, the job done "
        f"{finished - up_at:.1f} s after the database came back; 0 of {n} items failed, 0 run "
        f"twice, {len(fake_llm.requests)} requests for {ledger[0]} ledger rows; the API "
        f"answered {api.status_code} JSON, a page {page.status_code}"
    )
