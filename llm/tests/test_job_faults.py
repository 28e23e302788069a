"""Fault runs (issue 4, "Tests"): with 20% of the calls failing in one way, a job run through the
real chunk runner and the real gateway on the fake server ends with every item done or failed
with its reason, none recorded twice, and the ledger and the job's counters agreeing with what
the fake server actually answered.

The fake decides which requests fail from a hash of the request (tests/fake_llm.py, `inject`),
so a run is the same every time; the assertions do not depend on which requests failed, though:
each item's expected end is worked out from the requests the fake recorded for it.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.db import connections
from django.db.models import Sum
from pydantic import BaseModel

from llm import jobs
from llm.gateway import Gateway, ModelConfig, request_hash
from llm.models import ItemStatus, Job, JobItem, JobStatus, LedgerEntry, Outcome
from llm.ratelimit import MemoryTokenBucket
from tests.fake_llm import FAULTS, GEMINI_KEY, MUTATING, OPENAI_KEY, FakeLLM, Reply

KIND = "test.faults"
ITEMS = 60
MAX_ATTEMPTS = 3  # LLM_MAX_ATTEMPTS: 5xx, timeouts and resets
RATE_LIMIT_WAITS = 3  # LLM_MAX_RATE_LIMIT_WAITS: 429s waited out
REPAIRS = 2  # LLM_MAX_REPAIRS: repair turns of an answer that does not validate
# The faults that replace an answer (the others change a stage's answer to break its own rules:
# rubrics/tests and annotation/tests run those against the stages' checks).
REPLACING = [mode for mode in FAULTS if mode not in MUTATING]
MODELS = {
    "gemini": ModelConfig(
        name="gemini-faults",
        provider="gemini",
        model="gemini-2.5-flash",
        price_input_per_million=Decimal("1.25"),
        price_output_per_million=Decimal("10"),
    ),
    "openai": ModelConfig(
        name="qwen-faults",
        provider="openai",
        model="Qwen/Qwen3-VL-8B",
        price_input_per_million=Decimal("0.5"),
        price_output_per_million=Decimal("2"),
    ),
}
VALID = '{"answer": "forty-two", "score": 7}'
# What the gateway records for a request that got each fault.
ROW_OUTCOME = {
    "": Outcome.OK,
    "rate_limited": Outcome.RATE_LIMITED,
    "server_error": Outcome.SERVER_ERROR,
    "timeout": Outcome.TIMEOUT,
    "connection_reset": Outcome.SERVER_ERROR,
    "malformed_json": Outcome.INVALID_OUTPUT,
    "schema_invalid": Outcome.INVALID_OUTPUT,
}

pytestmark = pytest.mark.usefixtures("sent")  # chunk tasks are caught, not sent


class Answer(BaseModel):
    answer: str
    score: int


def prompt_of(key: str) -> str:
    return f"Question {key}: what is the answer?"


async def ask(gateway: Gateway, payload: dict[str, Any]) -> jobs.ItemResult:
    """One structured call per item; a call that did not end ok fails the item with why."""
    context = jobs.current_item.get()
    call = await gateway.call_structured(
        MODELS[payload["provider"]],
        prompt=[prompt_of(context.key)],
        schema=Answer,
        stage="fault-test",
        job_id=context.job_id,
    )
    if not call.ok or not isinstance(call.output, Answer):
        raise jobs.ItemFailed(f"{call.outcome}: {call.error}", call)
    return jobs.ItemResult.of_calls({"score": call.output.score}, call)


@pytest.fixture(autouse=True)
def fault_kind() -> Iterator[None]:
    jobs.register_kind(KIND, ask, chunk_size=25, concurrency=8)
    yield
    jobs._registry.pop(KIND, None)


@pytest.fixture
def gateway_settings(settings, fake_llm: FakeLLM) -> Any:
    """The production gateway's settings, pointed at the fake, with short retries."""
    settings.GEMINI_API_KEY, settings.GEMINI_BASE_URL = GEMINI_KEY, fake_llm.base_url
    settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = OPENAI_KEY, f"{fake_llm.base_url}/v1"
    settings.LLM_TIMEOUT_SECONDS = 5
    settings.LLM_MAX_ATTEMPTS = MAX_ATTEMPTS
    settings.LLM_BACKOFF_BASE_MS = 10
    settings.LLM_BACKOFF_CAP_SECONDS = 0.05
    settings.LLM_MAX_RATE_LIMIT_WAITS = RATE_LIMIT_WAITS
    settings.LLM_MAX_REPAIRS = REPAIRS
    settings.LLM_RETRY_DELAY_CAP_SECONDS = 1
    return settings


def drain(job: Job, runners: int = 2) -> None:
    """Run chunks of the job until none is left to claim, from `runners` threads at once, each
    with its own event loop and gateway (settings from Django, an in-memory rate limiter)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            while jobs.job_run_chunk(
                job_id=job.pk, gateway_factory=lambda: Gateway(limiter=MemoryTokenBucket())
            ):
                pass
        except BaseException as exc:  # noqa: BLE001 (re-raised in the test's thread)
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(runners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads), "a chunk runner hung"
    job.refresh_from_db()


def faults_by_item(fake: FakeLLM) -> dict[str, list[str]]:
    """The fault each request of an item got, in the order the fake received them."""
    seen: dict[str, list[str]] = defaultdict(list)
    for request in fake.requests:
        # The prompt names its item; a repair request carries the original prompt too.
        found = re.search(r"Question (img-\d{3})", str(request.body))
        assert found, request.body
        seen[found.group(1)].append(request.fault)
    return seen


def limit_for(mode: str) -> int:
    """Requests one logical call makes at most when every one of them fails in `mode`."""
    if mode == "rate_limited":
        return RATE_LIMIT_WAITS + 1
    if mode in ("malformed_json", "schema_invalid"):
        return 1 + REPAIRS  # the answer and its repairs
    return MAX_ATTEMPTS


def reason_for(mode: str) -> str:
    return ROW_OUTCOME[mode] + ": "


def run_faulty_job(fake: FakeLLM, provider: str, mode: str) -> Job:
    fake.default = Reply(text=VALID, prompt_tokens=100, output_tokens=20)
    fake.inject(mode, rate=0.2, seed=4, delay=3)
    job = jobs.job_launch(
        kind=KIND, items=[(f"img-{i:03d}", {"provider": provider}) for i in range(ITEMS)]
    )
    drain(job)
    return job


def assert_job_agrees_with_the_fake(job: Job, fake: FakeLLM, provider: str, mode: str) -> None:
    model = MODELS[provider]
    items = {item.key: item for item in JobItem.objects.filter(job=job)}
    requests = faults_by_item(fake)

    # The job is over, and its counters are its items' statuses.
    assert job.status == JobStatus.DONE and job.finished_at is not None
    statuses = {s: sum(i.status == s for i in items.values()) for s in ItemStatus}
    assert (job.items_total, job.items_done, job.items_failed, job.items_remaining) == (
        ITEMS,
        statuses[ItemStatus.DONE],
        statuses[ItemStatus.FAILED],
        0,
    )
    assert statuses[ItemStatus.DONE] + statuses[ItemStatus.FAILED] == ITEMS

    # About a fifth of the requests failed, and some items needed more than one.
    assert set(fake.injected) == {mode}
    share = fake.injected[mode] / len(fake.requests)
    assert 0.1 < share < 0.3, share
    assert any(len(sent) > 1 for sent in requests.values())

    ledger = LedgerEntry.objects.filter(job_id=job.pk)
    for key, item in items.items():
        sent = requests[key]
        # Each item was claimed once and recorded once: no lease was lost, nothing ran twice.
        assert item.attempts == 1, (key, item.attempts)
        assert len(sent) <= limit_for(mode), (key, sent)
        digest = request_hash(model, system="", prompt=[prompt_of(key)], schema=Answer)
        rows = list(ledger.filter(request_hash=digest).order_by("pk"))
        # One ledger row per request the fake received for this item, each with its outcome.
        assert [r.outcome for r in rows] == [ROW_OUTCOME[f] for f in sent], (
            key,
            sent,
            [r.error for r in rows],
        )
        assert all(r.provider == provider for r in rows)
        if sent[-1] == "":
            assert item.status == ItemStatus.DONE, (key, sent, item.last_error)
            assert (item.result, item.last_error) == ({"score": 7}, "")
            assert sum(r.outcome == Outcome.OK for r in rows) == 1
        else:
            # Every request of the call failed, up to the limit: the item failed, saying why.
            assert set(sent) == {mode} and len(sent) == limit_for(mode), (key, sent)
            assert item.status == ItemStatus.FAILED and item.result is None
            assert item.last_error.startswith(reason_for(mode)), item.last_error
            assert not any(r.outcome == Outcome.OK for r in rows)
            if ROW_OUTCOME[mode] == Outcome.INVALID_OUTPUT:
                assert item.raw_output == rows[-1].raw_output != ""

    # What the job spent is what its ledger rows spent (each row counted once).
    spent = ledger.aggregate(tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"))
    assert (job.tokens_in, job.tokens_out) == (spent["tokens_in"], spent["tokens_out"])
    # Summed here, not in SQL: SQLite sums decimals as floats.
    assert job.cost == sum(ledger.values_list("cost", flat=True), Decimal("0"))
    assert ledger.count() == len(fake.requests)


# Every mode through Gemini; the OpenAI-compatible provider below goes through each mode too.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", ["gemini", "openai"])
@pytest.mark.parametrize("mode", REPLACING)
def test_with_20_percent_of_calls_failing_every_item_ends_once_with_its_reason(
    fake_llm, gateway_settings, provider, mode
):
    if mode == "timeout":
        # The fake answers these after 3 s; a second is ample for the others, even on a busy
        # machine (a spurious timeout would show as a ledger row the fake did not cause).
        gateway_settings.LLM_TIMEOUT_SECONDS = 1
    job = run_faulty_job(fake_llm, provider, mode)
    assert_job_agrees_with_the_fake(job, fake_llm, provider, mode)


@pytest.mark.django_db(transaction=True)
def test_a_retry_of_the_failed_items_finishes_them(fake_llm, gateway_settings, sent):
    job = run_faulty_job(fake_llm, "gemini", "server_error")
    failed = job.items_failed
    assert failed, "the seed should leave some items failed for good"
    fake_llm.faults.clear()  # the provider is well again
    assert jobs.job_retry_failed(job_id=job.pk) == failed
    drain(job)
    assert (job.status, job.items_done, job.items_failed) == (JobStatus.DONE, ITEMS, 0)
    # The items done the first time were not called again.
    ok_rows = LedgerEntry.objects.filter(job_id=job.pk, outcome=Outcome.OK)
    assert ok_rows.count() == ITEMS
    assert ok_rows.values("request_hash").distinct().count() == ITEMS


def test_the_fake_fails_the_same_requests_whatever_their_order(fake_llm):
    """The draw depends on the request and how often it came, not on arrival order."""
    from tests.fake_llm import Recorded

    def run(order: list[int]) -> dict[int, list[str]]:
        fake_llm.reset()
        fake_llm.inject("server_error", rate=0.3, seed=9)
        got: dict[int, list[str]] = defaultdict(list)
        for n in order:
            recorded = Recorded("gemini", "/v1beta/models/m:generateContent", {}, {"n": n})
            fake_llm._next(recorded)
            got[n].append(recorded.fault)
        return got

    forward = run([n for n in range(50) for _ in range(2)])
    backward = run([n for n in reversed(range(50)) for _ in range(2)])
    assert forward == backward
    assert 5 < sum(f == "server_error" for faults in forward.values() for f in faults) < 60
    with pytest.raises(ValueError, match="unknown fault"):
        fake_llm.inject("gremlins")
    with pytest.raises(ValueError, match="at most 1"):
        fake_llm.inject("timeout", rate=0.8)
