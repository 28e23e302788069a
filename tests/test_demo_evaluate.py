"""`make run` can evaluate a demo model on the demo's release with the demo provider, offline:
the live demo judge scores the release first (a judge run), then `manage.py evaluate` collects
the live demo model's answers, has them judged, waits, and prints its row, rank and paired
differences. The chunks run in a thread standing in for the Celery worker (as
tests/test_demo_pipeline.py does)."""

from __future__ import annotations

import re
import threading
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connections

from judging.models import Judge, Response, Verdict
from judging.releases.selectors import release_named
from judging.releases.services import create_release
from llm import jobs
from llm.demo import DEMO_EVALUATED_MODEL, DEMO_JUDGE
from llm.models import Job
from tests.test_demo_pipeline import demo, drain, launch  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

RELEASE = "v1.0 (demo)"


@pytest.fixture
def worker(demo):  # noqa: F811
    stop = threading.Event()

    def run() -> None:
        try:
            while not stop.is_set():
                for job in Job.objects.filter(status__in=jobs.ACTIVE):
                    drain(job)
                stop.wait(0.05)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    yield
    stop.set()
    thread.join()


def judged_by_the_worker(*args: str) -> Job:
    """A job launched with launch_job, run to its end by the worker thread."""
    job = launch(*args)
    deadline = time.monotonic() + 60
    while job.status in jobs.ACTIVE and time.monotonic() < deadline:
        time.sleep(0.05)
        job.refresh_from_db()
    assert (job.status, job.items_failed) == ("done", 0)
    return job


def evaluate(*args: str) -> str:
    out = StringIO()
    call_command("evaluate", *args, stdout=out)
    return out.getvalue()


def test_the_demo_evaluates_its_live_model_on_its_release(worker, capsys):
    release = release_named(RELEASE) or create_release(RELEASE, "the demo's release")
    # Only the demo's imported judges have scored it: the live judge must score it first.
    with pytest.raises(
        CommandError, match=re.escape(f"{DEMO_JUDGE} never scored release {RELEASE}")
    ):
        evaluate(DEMO_EVALUATED_MODEL, "--release", RELEASE, "--judge", DEMO_JUDGE)
    with pytest.raises(CommandError, match="No judge that scored release .* calls a model"):
        evaluate(DEMO_EVALUATED_MODEL, "--release", RELEASE)
    judged_by_the_worker("judge", "--judge", DEMO_JUDGE)  # the demo models' answers, live

    estimate = evaluate(DEMO_EVALUATED_MODEL, "--release", RELEASE, "--estimate-only")
    assert f"judges: {DEMO_JUDGE}" in estimate and "demo-answerer" in estimate
    assert Job.objects.filter(kind="judging.evaluate").count() == 0

    out = evaluate(DEMO_EVALUATED_MODEL, "--release", RELEASE, "--wait", "--poll", "0.05")
    with capsys.disabled():  # the closing note shows this run
        print(f"\n$ manage.py evaluate {DEMO_EVALUATED_MODEL} --release '{RELEASE}' --wait\n{out}")
    job = Job.objects.get(kind="judging.evaluate")
    questions = release.questions.count()
    assert (job.status, job.items_done, job.items_failed) == ("done", 2 * questions, 0)
    assert Response.objects.filter(model__name=DEMO_EVALUATED_MODEL).count() == 2 * questions
    judge = Judge.objects.get(name=DEMO_JUDGE)
    assert Verdict.objects.filter(judge=judge, response__model__name=DEMO_EVALUATED_MODEL).exists()
    assert f"answers of {DEMO_EVALUATED_MODEL}" in out and f"verdicts of {DEMO_JUDGE}" in out
    assert out.count("rank ") >= 2 and "of 3;" in out  # with demo-model-a and b, per setting
    assert "vs demo-model-" in out
    # Run again: nothing left, the result printed, no job launched.
    again = evaluate(DEMO_EVALUATED_MODEL, "--release", RELEASE)
    assert "nothing to do" in again and Job.objects.filter(kind="judging.evaluate").count() == 1
