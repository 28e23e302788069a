"""A web process sends the job system's chunk task by its registered name (llm/sending.py). It
must find it registered without a worker's autodiscovery and without anything a test imports:
checked in a fresh interpreter that only sets Django up, as gunicorn's does. (The schemathesis
pass of .ci/run found every job launch over the API answering 500 with NotRegistered.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import django
django.setup()
from llm.sending import CHUNK_TASK, chunk_task
assert chunk_task().name == CHUNK_TASK, chunk_task().name
print("registered")
"""


def test_a_fresh_web_process_finds_the_chunk_task():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gamut_site.settings"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("registered")
