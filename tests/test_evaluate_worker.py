"""An evaluate run in a real Celery worker on a real Redis, killed midway (SIGKILL) while the
judges are at work, then `manage.py evaluate` run again with another worker: it continues where
the first stopped. The fake LLM server counts the requests: no answer is asked twice, and no
check that had its verdict when the worker died is asked again."""

from __future__ import annotations

import json
import os
import signal
import time
from io import StringIO

import pytest
from django.core.management import call_command

from judging.models import EvaluatedModel, Judge, Response, Verdict
from judging.releases.services import create_release
from judging.tests.conftest import final_checks, make_question
from judging.tests.test_evaluate import VERDICTS, is_judge_call, llm, parts, responder
from judging.verdicts.services import verdict_record
from llm.jobs import job_cancel
from llm.models import Job, JobStatus, LedgerEntry
from llm.tests.test_jobs import start_worker
from tests.fake_llm import GEMINI_KEY, OPENAI_KEY, FakeLLM, Recorded, fake_llm  # noqa: F401
from tests.test_worker import celery_app, redis_url, stop  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = 8


def _key(recorded: Recorded) -> tuple[str, str]:
    """(the answer judged, the check) of a judge call, read from its prompt."""
    prompt = json.dumps(parts(recorded))
    answer = next(
        r.text for r in Response.objects.filter(model__name="model-new") if r.text in prompt
    )
    check = parts(recorded)[-1]["text"]
    return answer, check


@pytest.mark.slow  # waits on real servers for 8-15 s: make test leaves it to CI
def test_a_worker_killed_midway_then_a_run_again_asks_nothing_twice(
    celery_app,  # noqa: F811
    redis_url,  # noqa: F811
    fake_llm: FakeLLM,  # noqa: F811
    tmp_path,
):
    questions = [make_question(f"q{i}") for i in range(QUESTIONS)]
    judge = Judge.objects.create(name="judge-g", llm_model=llm("judge-llm"))
    for m, name in enumerate(("model-a", "model-b")):
        model = EvaluatedModel.objects.create(name=name)
        for i, q in enumerate(questions):
            response = Response.objects.create(
                model=model, question=q, setting="text_only", text=f"{name} {i}"
            )
            for k, check in enumerate(final_checks(q)):
                verdict_record(
                    judge=judge, response=response, check=check, verdict=VERDICTS[(i + k + m) % 4]
                )
    create_release("v1.0")
    EvaluatedModel.objects.create(name="model-new", llm_model=llm("answerer", "openai"))
    answer = responder()

    def slow(recorded: Recorded):
        reply = answer(recorded)
        reply.delay = 0.3 if is_judge_call(recorded) else 0.05
        return reply

    fake_llm.responder = slow
    env = {
        "GEMINI_API_KEY": GEMINI_KEY,
        "GEMINI_BASE_URL": fake_llm.base_url,
        "OPENAI_API_KEY": OPENAI_KEY,
        "OPENAI_BASE_URL": f"{fake_llm.base_url}/v1",
        "LLM_JOB_LEASE_SECONDS": "3",
        "CELERY_VISIBILITY_TIMEOUT": "5",
    }
    log_path = tmp_path / "worker.log"
    doomed = start_worker(redis_url, log_path, "doomed", **env)
    rescuer = None
    args = ("model-new", "--release", "v1.0", "--setting", "text_only")
    try:
        call_command("evaluate", *args, stdout=StringIO())
        job = Job.objects.get(kind="judging.evaluate")
        verdicts = Verdict.objects.filter(response__model__name="model-new")
        deadline = time.monotonic() + 60
        while verdicts.count() < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(doomed.pid, signal.SIGKILL)  # the worker and its process group, mid-step
        doomed.wait()
        job.refresh_from_db()
        assert job.items_remaining > 0, "the run ended before the kill"
        answered = set(
            Response.objects.filter(model__name="model-new").values_list("question_id", flat=True)
        )
        judged = {
            (text, check)
            for text, check in verdicts.exclude(verdict="failed").values_list(
                "response__text", "check_row__text"
            )
        }
        assert 6 <= len(judged) < 3 * QUESTIONS
        complete = sum(
            1 for text in {t for t, _ in judged} if sum(t == text for t, _ in judged) == 3
        )
        before = len(fake_llm.requests)
        # The calls answered before the kill, whether or not their verdicts were recorded.
        paid = set(LedgerEntry.objects.filter(outcome="ok").values_list("request_hash", flat=True))
        last = LedgerEntry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0

        job_cancel(job_id=job.pk)  # the dead run is given up; the next one continues it
        rescuer = start_worker(redis_url, log_path, "rescuer", **env)
        out = StringIO()
        call_command("evaluate", *args, "--wait", "--poll", "0.2", stdout=out)
    finally:
        for proc in (doomed, rescuer):
            if proc is not None:
                stop(proc, timeout=15)
    again = fake_llm.requests[before:]
    asked = [_key(r) for r in again if is_judge_call(r)]
    pairs = {(t, c.split("\n", 1)[-1]) for t, c in judged}
    # No check that had its verdict is asked again, and no answer that was in.
    assert not [k for k in asked if any(t == k[0] and c in k[1] for t, c in pairs)]
    assert sum(not is_judge_call(r) for r in again) == QUESTIONS - len(answered)
    # and no call whose answer the ledger held: it answered them (cached), without a request
    assert not LedgerEntry.objects.filter(pk__gt=last, request_hash__in=paid).exists()
    second = Job.objects.filter(kind="judging.evaluate").exclude(pk=job.pk).get()
    assert (second.status, second.items_failed) == (JobStatus.DONE, 0)
    assert second.items_total == QUESTIONS - complete  # only what was left
    assert Verdict.objects.filter(response__model__name="model-new").count() == 3 * QUESTIONS
    assert "rank " in out.getvalue() and "8 of 8 questions scored" in out.getvalue()
