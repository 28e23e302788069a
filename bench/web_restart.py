"""Restart to first answer: how long after the web's start command the login page answers 200,
and how long until eight requests at once all answer (every worker up), with production
settings on PostgreSQL.

    DATABASE_URL=postgres://... .venv/bin/python bench/web_restart.py [--runs 3] [--port 8447]

Two ways of starting the web are timed, each on an already migrated database:
- before: what docker-compose.yml ran until issue 22, `manage.py migrate` then gunicorn with
  four workers that each import the app;
- after: deploy/gunicorn.conf.py, the app preloaded in the master (migrations are a step of
  the deploy, not of every start).
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def commands(port: int) -> dict[str, list[str]]:
    gunicorn = [PY, "-m", "gunicorn"]
    return {
        "before": [
            "sh",
            "-c",
            f"{PY} manage.py migrate --noinput && exec {' '.join(gunicorn)} gamut_site.wsgi "
            f"--bind 127.0.0.1:{port} --workers 4 --access-logfile -",
        ],
        "after": [*gunicorn, "-c", "deploy/gunicorn.conf.py", "-b", f"127.0.0.1:{port}"]
        + ["gamut_site.wsgi"],
    }


def answered(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(url).status_code == 200
    except httpx.TransportError:
        return False


def one_run(command: list[str], port: int, env: dict[str, str]) -> tuple[float, float]:
    url = f"http://127.0.0.1:{port}/login/"
    headers = {"Host": "gamut.example.org", "X-Forwarded-Proto": "https"}
    start = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with httpx.Client(headers=headers, timeout=60) as client:
            while not answered(client, url):
                if proc.poll() is not None or time.monotonic() - start > 180:
                    raise SystemExit(f"{command} did not answer (exit {proc.poll()})")
                time.sleep(0.05)
            first = time.monotonic() - start
            # Eight at once, until all eight answer within a second: every worker is up.
            with ThreadPoolExecutor(8) as pool:
                while True:
                    began = time.monotonic()
                    results = list(pool.map(lambda _: answered(client, url), range(8)))
                    if all(results) and time.monotonic() - began < 1:
                        break
            return first, time.monotonic() - start
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=8447)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("Set DATABASE_URL to a migrated PostgreSQL database.")
    env = {
        **os.environ,
        "GAMUT_ENV": "production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "gamut.example.org",
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        "STATIC_ROOT": os.environ.get("STATIC_ROOT", str(ROOT / "var" / "bench-static")),
        "LOG_LEVEL": "WARNING",
    }
    # The hashed static manifest that production settings need, once.
    subprocess.run(
        [PY, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    for name, command in commands(args.port).items():
        firsts, alls = [], []
        for _ in range(args.runs):
            first, every = one_run(command, args.port, env)
            firsts.append(first)
            alls.append(every)
        print(
            f"{name:>6}: first answer {statistics.median(firsts):5.1f} s "
            f"(runs {', '.join(f'{t:.1f}' for t in firsts)}), every worker answering "
            f"{statistics.median(alls):5.1f} s (runs {', '.join(f'{t:.1f}' for t in alls)})"
        )


if __name__ == "__main__":
    main()
