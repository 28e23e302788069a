"""Production settings: refuse to start without secrets; `check --deploy` reports nothing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_ENV = {
    "GAMUT_ENV": "production",
    "SECRET_KEY": "x7!kq0-test-only-" + "a1b2c3d4e5" * 5,
    "ALLOWED_HOSTS": "gamut.example.org",
    "DATABASE_URL": "postgres://gamut:secret@db.invalid:5432/gamut",
    "REDIS_URL": "redis://redis.invalid:6379/0",
}


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in PRODUCTION_ENV
        and k not in ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_reports_nothing():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("missing", ["SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL"])
def test_production_refuses_to_start_without(missing):
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != missing}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert f"{missing} must be set" in result.stderr


def test_production_refuses_a_weak_secret():
    result = manage("check", env={**PRODUCTION_ENV, "SECRET_KEY": "short"})
    assert result.returncode != 0 and "SECRET_KEY must be" in result.stderr
