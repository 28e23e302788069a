"""Judging through Gemini's Batch API: the real google-genai client submits inline batches to
the fake server, the job defers its items between polls, ingests the answers as verdicts at
half the price, and submits again what failed inside a batch."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from judging.leaderboard.board import leaderboard
from judging.models import EvaluatedModel, Judge, Response, Verdict
from judging.runs import llm_batch, llm_jobs
from judging.tests.conftest import make_question
from judging.tests.test_llm_jobs import checked_text, verdicts_by_check
from llm import jobs
from llm.jobs import JobError
from llm.models import ItemStatus, JobItem, LedgerEntry, LLMModel
from llm.tasks import run_job_chunk
from llm.tests.conftest import Harness
from tests.fake_llm import FakeLLM, Recorded, Reply, fake_llm  # noqa: F401 (fixture)
from tests.test_worker import celery_app, redis_url, stop  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(fake_llm: FakeLLM, monkeypatch):  # noqa: F811 (the imported fixture)
    monkeypatch.setattr(run_job_chunk, "delay_on_commit", lambda job_id: None)
    monkeypatch.setattr(run_job_chunk, "apply_async", lambda args, countdown=None, **options: None)
    model = EvaluatedModel.objects.create(name="model-a")
    responses = [
        Response.objects.create(
            model=model, question=make_question(f"q{i}"), setting="text_only", text=f"Answer {i}."
        )
        for i in range(3)
    ]
    llm = LLMModel.objects.create(
        name="judge-llm",
        provider="gemini",
        model="gemini-2.5-flash",
        requests_per_minute=0,
        price_input_per_million=Decimal("2"),
        price_output_per_million=Decimal("10"),
    )
    judge = Judge.objects.create(name="gemini-judge", llm_model=llm)
    return Harness(fake_llm), responses, judge


def run_ready(harness: Harness, job) -> int:
    """Run the chunks that can run now (deferred items wait): the items claimed."""
    claimed = 0
    for _ in range(50):
        n = jobs.job_run_chunk(job_id=job.pk, gateway_factory=harness.gateway)
        if not n:
            break
        claimed += n
    job.refresh_from_db()
    return claimed


def make_ready(job) -> None:
    """The poll interval has passed."""
    JobItem.objects.filter(job=job).update(not_before=None)


def test_batch_judging_submits_polls_and_ingests_at_half_price(world):
    harness, responses, judge = world
    harness.fake.responder = verdicts_by_check({"check 1": "missing"})
    harness.fake.batches.polls_before_done = 1
    job = llm_jobs.judge_launch(user=None, judge=judge, batch=True, batch_responses=2)
    assert job.kind == "judging.judge_batch" and job.items_total == 2  # 3 responses, 2 a batch

    run_ready(harness, job)  # submits both batches, defers both items
    assert harness.fake.batches.created == 2
    assert job.items_remaining == 2 and not Verdict.objects.exists()
    states = [item.result for item in JobItem.objects.filter(job=job).order_by("pk")]
    assert [s["requests"] for s in states] == [6, 3]
    # No single call was made: everything went through the batch endpoint.
    assert not [r for r in harness.fake.requests if r.protocol == "gemini"]

    assert run_ready(harness, job) == 0  # polled too early: nothing claimable
    make_ready(job)
    run_ready(harness, job)  # first poll: still running, deferred again
    assert job.items_remaining == 2
    make_ready(job)
    run_ready(harness, job)  # done: ingested

    assert job.status == "done" and job.items_done == 2, jobs.job_progress(job)["failures"]
    assert Verdict.objects.count() == 9
    assert Verdict.objects.filter(verdict="missing").count() == 3
    answered = [r for r in harness.fake.requests if r.protocol == "gemini-batch"]
    assert sorted(checked_text(r) for r in answered) == sorted(
        ["check 0", "check 1", "check 2"] * 3
    )
    rows = LedgerEntry.objects.filter(job_id=job.pk, stage="judging.judge_batch", outcome="ok")
    answers = rows.exclude(raw_output__startswith="batches/")
    assert answers.count() == 9
    # 120 tokens in, 30 out each (the fake's defaults) at 2 and 10 per million, halved.
    expected = Decimal(9) * (120 * 2 + 30 * 10) / Decimal(1_000_000) / 2
    assert sum(r.cost for r in answers) == expected
    assert job.cost == expected
    assert leaderboard(judge=judge, setting="text_only").rows[0].scored == 3


def test_errors_inside_a_batch_go_round_again_then_fail(world):
    harness, responses, judge = world
    harness.fake.batches.polls_before_done = 0
    verdict = verdicts_by_check({})

    def flaky(recorded: Recorded) -> Reply:
        if (
            recorded.protocol == "gemini-batch"
            and checked_text(recorded) == "check 2"
            and "Answer 0." in json.dumps(recorded.body)
        ):
            return Reply.server_error(500)
        if (
            recorded.protocol == "gemini-batch"
            and checked_text(recorded) == "check 0"
            and "Answer 1." in json.dumps(recorded.body)
            and flaky.first
        ):
            flaky.first = False
            return Reply(text="not json")  # invalid once: submitted again and answered
        return verdict(recorded)

    flaky.first = True
    harness.fake.responder = flaky
    job = llm_jobs.judge_launch(user=None, judge=judge, batch=True, batch_responses=10)
    for _ in range(llm_batch.BATCH_ROUNDS * 2 + 2):
        make_ready(job)
        run_ready(harness, job)
        if job.items_remaining == 0:
            break

    assert job.items_failed == 1 and harness.fake.batches.created == llm_batch.BATCH_ROUNDS
    item = JobItem.objects.get(job=job)
    assert item.status == ItemStatus.FAILED and "1 checks got no verdict after 3" in item.last_error
    failed = Verdict.objects.get(verdict="failed")
    assert failed.response == responses[0] and failed.check_row.text == "check 2"
    assert Verdict.objects.exclude(verdict="failed").count() == 8
    # Round 2 carried the two failures, round 3 only the one that kept failing.
    sizes = [len(b.requests) for b in harness.fake.batches.batches.values()]
    assert sizes == [9, 2, 1]


def test_a_batch_that_fails_whole_is_submitted_again(world):
    harness, responses, judge = world
    harness.fake.responder = verdicts_by_check({})
    harness.fake.batches.polls_before_done = 0
    harness.fake.batches.fail_next = True
    job = llm_jobs.judge_launch(user=None, judge=judge, batch=True)
    for _ in range(6):
        make_ready(job)
        run_ready(harness, job)
        if job.items_remaining == 0:
            break
    assert job.status == "done" and job.items_done == 1
    assert harness.fake.batches.created == 2
    assert Verdict.objects.count() == 9


def test_batch_needs_a_gemini_judge(world):
    harness, responses, judge = world
    judge.llm_model = LLMModel.objects.create(name="qwen", provider="openai", model="qwen")
    judge.save()
    with pytest.raises(JobError, match="Batch API is Gemini's"):
        llm_jobs.judge_launch(user=None, judge=judge, batch=True)


@pytest.mark.slow  # waits on real servers for 8-15 s: make test leaves it to CI
def test_a_batch_job_polls_every_2_s_in_a_real_worker_without_beat(
    fake_llm: FakeLLM, celery_app, redis_url, tmp_path
):  # noqa: F811 (fixtures)
    """LLM_BATCH_POLL_SECONDS=2 in the worker and no beat anywhere: the chunk that defers the
    items sends itself a task due at the next poll, until the batch is over."""
    from llm.tests.test_jobs import start_worker, wait_for
    from tests.fake_llm import GEMINI_KEY

    fake_llm.responder = verdicts_by_check({})
    fake_llm.batches.polls_before_done = 2  # submitted, running, running, then done
    model = EvaluatedModel.objects.create(name="model-a")
    for i in range(3):
        Response.objects.create(
            model=model, question=make_question(f"q{i}"), setting="text_only", text=f"Answer {i}."
        )
    llm = LLMModel.objects.create(
        name="judge-llm", provider="gemini", model="gemini-2.5-flash", requests_per_minute=0
    )
    judge = Judge.objects.create(name="gemini-judge", llm_model=llm)
    log_path = tmp_path / "worker.log"
    worker = start_worker(
        redis_url,
        log_path,
        "batch",
        GEMINI_BASE_URL=fake_llm.base_url,
        GEMINI_API_KEY=GEMINI_KEY,
        LLM_BATCH_POLL_SECONDS="2",
    )
    try:
        job = llm_jobs.judge_launch(user=None, judge=judge, batch=True, batch_responses=2)
        wait_for(job, lambda j: j.status == "done", 90, log_path)
        assert worker.poll() is None, log_path.read_text()
    finally:
        stop(worker, timeout=15)
    assert job.items_done == 2 and Verdict.objects.count() == 9
    took = (job.finished_at - job.started_at).total_seconds()
    assert 5 <= took < 20, took  # three waits of 2 s; beat's sweep would be 30 s apart
