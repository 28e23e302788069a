"""Job kinds for the tests only. Imported by the tests, and by the test's Celery worker through
its `-I llm.tests.job_kinds` option, so production code never registers them."""

from __future__ import annotations

import asyncio
import zlib
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from pydantic import BaseModel

from llm.gateway import Gateway, ModelConfig, QuotaExhausted
from llm.jobs import ItemDeferred, ItemFailed, ItemResult, current_item, register_kind
from llm.models import Job


async def echo(gateway: Gateway, payload: dict[str, Any]) -> ItemResult:
    """Succeeds after `sleep` seconds, spending 10 tokens in, 5 out and 0.001 a call."""
    await asyncio.sleep(payload.get("sleep", 0))
    context = current_item.get()
    return ItemResult(
        {"echo": payload.get("n"), "key": context.key, "job": context.job_id},
        tokens_in=10,
        tokens_out=5,
        cost=Decimal("0.001"),
    )


def flaky_failure(key: str) -> Exception | None:
    """One item in five fails, each in a way of its own, decided by the key (the same on every
    attempt, so the test knows which)."""
    bucket = zlib.crc32(key.encode()) % 20
    return {
        0: ItemFailed("output did not validate", raw_output=f"not json for {key}"),
        1: ValueError(f"bad value for {key}"),
        2: RuntimeError("server error after retries"),
        3: KeyError("missing field"),
    }.get(bucket)


async def flaky(gateway: Gateway, payload: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(payload.get("sleep", 0))
    failure = flaky_failure(current_item.get().key)
    if failure is not None:
        raise failure
    return {"ok": payload["n"]}


async def quota(gateway: Gateway, payload: dict[str, Any]) -> dict[str, Any]:
    """Items flagged `quota` find the daily quota spent."""
    if payload.get("quota"):
        raise QuotaExhausted("gemini-test", "GenerateRequestsPerDayPerProjectPerModel", 30.0)
    await asyncio.sleep(payload.get("sleep", 0))
    return {"ok": payload["n"]}


register_kind("test.echo", echo, chunk_size=5, concurrency=4)
register_kind("test.flaky", flaky, chunk_size=7, concurrency=3)
register_kind("test.quota", quota, chunk_size=4, concurrency=1)


async def waits(gateway: Gateway, payload: dict[str, Any]) -> ItemResult:
    """Defers itself `polls` times (as a handler waiting on a provider's batch would), counting
    its polls in its state, each poll spending 1 token in; then succeeds."""
    state = current_item.get().state or {}
    polls = int(state.get("polls", 0))
    if polls < payload["polls"]:
        raise ItemDeferred(payload.get("seconds", 60), {"polls": polls + 1})
    return ItemResult({"polls": polls}, tokens_in=1)


register_kind("test.waits", waits, chunk_size=10, concurrency=10)


class Answer(BaseModel):
    answer: str


def _job_params(job_id: int) -> dict[str, Any]:
    return Job.objects.values_list("params", flat=True).get(pk=job_id)


def _job_active(job_id: int) -> bool:
    return Job.objects.filter(pk=job_id, status__in=("queued", "running")).exists()


async def llm(gateway: Gateway, payload: dict[str, Any]) -> ItemResult:
    """One structured call to the fake Gemini server (GEMINI_BASE_URL), as a stage makes it:
    a read of the database before (the stage's setup) and one after (its writing back), the
    model limited to the job's `rpm` requests a minute (0: none)."""
    context = current_item.get()
    params = await sync_to_async(_job_params)(context.job_id)
    model = ModelConfig(
        name="gemini-jobs",
        provider="gemini",
        model="gemini-2.5-flash",
        price_input_per_million=Decimal("1"),
        price_output_per_million=Decimal("10"),
        requests_per_minute=int(params.get("rpm", 0)),
    )
    call = await gateway.call_structured(
        model,
        prompt=[f"Item {payload['n']}: answer."],
        schema=Answer,
        stage="test.llm",
        fresh=context.fresh,
        job_id=context.job_id,
    )
    if not call.ok:
        raise ItemFailed(f"{call.outcome}: {call.error}", call)
    await sync_to_async(_job_active)(context.job_id)
    return ItemResult.of_calls({"n": payload["n"]}, call)


register_kind("test.llm", llm, chunk_size=10, concurrency=8)
