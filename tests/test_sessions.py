"""Sessions: Django's own engines, chosen by the settings. With Redis configured, a request reads
its session from the cache (Django's cached_db) and the database keeps it, so a Redis restart
logs nobody out, and with Redis down pages and logins go on from the database; without Redis,
the database alone."""

import runpy

import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.test_deploy import PRODUCTION_ENV, ROOT
from tests.test_worker import free_port, redis_url  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def settings_with(monkeypatch, env: dict) -> dict:
    """gamut_site/settings.py as it reads this environment."""
    for name in ("GAMUT_ENV", *PRODUCTION_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(ROOT / "gamut_site" / "settings.py"))


@pytest.mark.parametrize(
    ("env", "engine"),
    [
        ({}, "django.contrib.sessions.backends.db"),
        ({"REDIS_URL": "redis://127.0.0.1:6379/0"}, "django.contrib.sessions.backends.cached_db"),
        (PRODUCTION_ENV, "django.contrib.sessions.backends.cached_db"),
    ],
)
def test_the_session_engine_follows_redis(monkeypatch, env, engine):
    assert settings_with(monkeypatch, env)["SESSION_ENGINE"] == engine


def use_redis(settings, monkeypatch, url: str) -> None:
    """The cache and the session engine that the settings give with REDIS_URL=url."""
    configured = settings_with(monkeypatch, {"REDIS_URL": url})
    monkeypatch.undo()
    settings.CACHES = configured["CACHES"]
    settings.SESSION_ENGINE = configured["SESSION_ENGINE"]
    settings.DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = configured["DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS"]


def session_queries(client, url: str) -> tuple[int, int]:
    """(status, queries of the session table) of one GET."""
    with CaptureQueriesContext(connection) as queries:
        status = client.get(url).status_code
    return status, sum("django_session" in q["sql"] for q in queries.captured_queries)


def test_with_redis_a_request_reads_its_session_from_the_cache(
    settings,
    monkeypatch,
    redis_url,  # noqa: F811 (fixture)
    client,
    alice,
):
    use_redis(settings, monkeypatch, redis_url)
    client.force_login(alice)
    store = redis.Redis.from_url(redis_url)

    def cached() -> int:
        return len(store.keys("*django.contrib.sessions.cached_db*"))

    assert cached() == 1  # the session, written to Redis as well as to the database
    assert session_queries(client, "/review/") == (200, 0)

    store.flushall()  # Redis restarted empty: the database still has the session
    assert session_queries(client, "/review/") == (200, 1)
    assert session_queries(client, "/review/") == (200, 0)  # and Redis has it again

    client.post("/logout/")
    assert cached() == 0
    response = client.get("/review/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_with_redis_down_people_log_in_and_work_from_the_database(
    settings, monkeypatch, client, alice, caplog
):
    use_redis(settings, monkeypatch, f"redis://127.0.0.1:{free_port()}/0")  # nothing listens
    client.raise_request_exception = False
    response = client.post("/login/", {"username": "alice", "password": "alice-pass"})
    assert response.status_code == 302 and not response["Location"].startswith("/login/")
    assert session_queries(client, "/review/") == (200, 1)
    assert client.post("/logout/").status_code == 302
    response = client.get("/review/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert "Exception ignored" in caplog.text  # the outage is in the log, not hidden
