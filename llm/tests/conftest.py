"""Fixtures of the gateway tests: the fake LLM servers, a real Redis (the fixture of
tests/test_worker.py, reused as is), and a harness that drives the real clients."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any, TypeVar

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from llm.gateway import CallResult, Gateway, GatewaySettings, ModelConfig
from llm.ratelimit import MemoryTokenBucket, RateLimiter
from tests.fake_llm import GEMINI_KEY, OPENAI_KEY, FakeLLM, fake_llm  # noqa: F401 (fixture)
from tests.test_worker import redis_url  # noqa: F401 (fixture)

GEMINI = ModelConfig(
    name="gemini-test",
    provider="gemini",
    model="gemini-2.5-flash",
    parameters={"temperature": 0.2},
    price_input_per_million=Decimal("1.25"),
    price_output_per_million=Decimal("10"),
    requests_per_minute=6000,
)
QWEN = ModelConfig(
    name="qwen-test",
    provider="openai",
    model="Qwen/Qwen3-VL-8B-Instruct",
    parameters={"temperature": 0.0},
    price_input_per_million=Decimal("0.5"),
    price_output_per_million=Decimal("2"),
    requests_per_minute=6000,
)
MODELS = {"gemini": GEMINI, "openai": QWEN}

T = TypeVar("T")


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine in an event loop of its own, in a thread of its own.

    Not asyncio.run here: the browser tests' Playwright keeps an event loop running in the main
    thread for the rest of the session, and asyncio.run refuses to start inside it."""

    async def main() -> T:
        return await make()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-loop") as pool:
        return pool.submit(asyncio.run, main()).result()


class Harness:
    """Calls through a fresh Gateway on the fake, in an event loop of their own.

    The ledger is written from asgiref's sync thread, with a database connection of its own,
    so the tests need `transactional_db`; that connection is closed after each run, or
    PostgreSQL would refuse to drop the test database at the end."""

    def __init__(self, fake: FakeLLM) -> None:
        self.fake = fake
        self.limiter: RateLimiter = MemoryTokenBucket()
        self.conf = GatewaySettings(
            gemini_api_key=GEMINI_KEY,
            gemini_base_url=fake.base_url,
            openai_api_key=OPENAI_KEY,
            openai_base_url=f"{fake.base_url}/v1",
            timeout_s=5,
            max_attempts=3,
            backoff_base_s=0.01,
            backoff_cap_s=0.05,
            max_rate_limit_waits=3,
            retry_delay_cap_s=2,
        )

    def run(self, body: Callable[[Gateway], Any]) -> Any:
        async def go() -> Any:
            try:
                async with Gateway(limiter=self.limiter, conf=self.conf) as gateway:
                    return await body(gateway)
            finally:
                await sync_to_async(connections.close_all)()

        return run_async(go)

    def gateway(self) -> Gateway:
        """A fresh gateway on the fake with an in-memory limiter (a job chunk's factory)."""
        return Gateway(limiter=MemoryTokenBucket(), conf=self.conf)

    def drain(self, job: Any) -> None:
        """Run the job's chunks in this process until nothing is left to claim now (deferred
        items wait), through gateways on the fake; then refresh the job."""
        from llm import jobs

        while jobs.job_run_chunk(job_id=job.pk, gateway_factory=self.gateway):
            pass
        job.refresh_from_db()

    def call(self, model: ModelConfig, **kwargs: Any) -> CallResult:
        kwargs.setdefault("stage", "test")
        return self.run(lambda gateway: gateway.call_structured(model, **kwargs))


@pytest.fixture
def harness(fake_llm: FakeLLM) -> Harness:  # noqa: F811 (the imported fixture)
    return Harness(fake_llm)


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    """The chunk tasks the services send, caught after the commit (as delay_on_commit would
    send them) instead of going to a broker: the test runs the chunks itself."""
    from django.db import transaction

    from llm.tasks import run_job_chunk

    calls: list[int] = []
    monkeypatch.setattr(
        run_job_chunk,
        "delay_on_commit",
        lambda job_id: transaction.on_commit(lambda: calls.append(job_id)),
    )

    def apply_async(args: tuple[int], countdown: float | None = None, **options: object) -> None:
        # A worker's sends (a chunk's successor, the sweep's) are caught with the others; a
        # chunk task due later (a job whose items wait on a batch) is not sent either.
        if countdown is None:
            calls.append(args[0])

    monkeypatch.setattr(run_job_chunk, "apply_async", apply_async)
    return calls


@pytest.fixture
def model(settings) -> Any:
    """The one LLM model every construction stage is configured to use (the console's tests)."""
    from llm.models import LLMModel

    settings.LLM_MODEL_GENERATION = settings.LLM_MODEL_GUARD = "gemini-test"
    settings.LLM_MODEL_RUBRICS = "gemini-test"
    return LLMModel.objects.create(
        name="gemini-test",
        provider="gemini",
        model="gemini-2.5-flash",
        price_input_per_million=Decimal("1.25"),
        price_output_per_million=Decimal("10"),
    )
