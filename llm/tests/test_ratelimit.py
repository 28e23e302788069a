"""The token buckets: the Redis one against a real redis-server, shared by two clients as two
workers would share it, and the in-memory one that tests pass explicitly. A bucket holds a
second's worth and refills at the rest of the limit, so no minute holds more than the limit;
a request the bucket cannot serve now reserves its turn and sleeps until it comes."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis

from llm.ratelimit import (
    LimiterUnavailable,
    Limits,
    MemoryTokenBucket,
    RedisTokenBucket,
    bucket_shape,
)
from llm.tests.conftest import run_async


def test_a_bucket_holds_a_second_and_refills_the_rest_of_the_minute():
    assert bucket_shape(3000) == (50, 2950 / 60_000)
    assert bucket_shape(120) == (2, 118 / 60_000)
    assert bucket_shape(30) == (1, 29 / 60_000)  # less than one a second: one at once
    assert bucket_shape(1) == (1, 1 / 60_000)  # one a minute stays one a minute
    for limit in (30, 120, 3000, 10**6):
        capacity, rate = bucket_shape(limit)
        assert capacity + rate * 60_000 == pytest.approx(limit)  # a minute's most: the limit


def test_redis_bucket_is_shared_by_all_workers(redis_url):
    limits = Limits(requests_per_minute=6000, tokens_per_minute=0)  # 100 at once, then 98/s

    async def scenario() -> tuple[int, int, float]:
        workers = [RedisTokenBucket(aioredis.Redis.from_url(redis_url)) for _ in range(2)]
        try:
            # Two workers take turns at one bucket: its 100 (and what refills meanwhile) go at
            # once, then the first one refused now is granted a turn a refill (10 ms) ahead.
            immediate = 0
            while True:
                taken, wait = await workers[immediate % 2].reserve("flash", limits, 0)
                assert taken
                if wait:
                    break
                immediate += 1
            # 98 more from both workers at once: they go one refill apart, about a second.
            started = time.monotonic()
            await asyncio.gather(*(workers[i % 2].acquire("flash", limits, 0) for i in range(98)))
            return immediate, wait, time.monotonic() - started
        finally:
            for worker in workers:
                await worker.aclose()

    immediate, wait, took = run_async(scenario)

    assert 100 <= immediate <= 120, immediate
    assert 1 <= wait <= 11, wait
    assert 0.85 <= took <= 1.6, took


def test_no_sixty_seconds_hold_more_than_the_limit(redis_url):
    """The limit scaled down to seconds: at 600 a minute (a bucket of 10, 9.83 a second), 40
    requests from two workers as fast as they may go; every window holds at most what the
    limit allows in it (capacity + refill), so a minute holds at most the limit."""
    limits = Limits(requests_per_minute=600, tokens_per_minute=0)
    capacity, rate = bucket_shape(600)

    async def scenario() -> list[float]:
        workers = [RedisTokenBucket(aioredis.Redis.from_url(redis_url)) for _ in range(2)]
        sent: list[float] = []

        async def one(i: int) -> None:
            await workers[i % 2].acquire("pro", limits, 0)
            sent.append(time.monotonic())

        try:
            await asyncio.gather(*(one(i) for i in range(40)))
        finally:
            for worker in workers:
                await worker.aclose()
        return sorted(sent)

    sent = run_async(scenario)
    for i, start in enumerate(sent):
        for span in (1.0, 3.0):
            inside = sum(1 for t in sent[i:] if t - start < span)
            # a few ms of scheduling either way
            assert inside <= capacity + rate * (span * 1000 + 20) + 1, (span, inside)
    assert sent[-1] - sent[0] >= (40 - capacity) / (rate * 1000) * 0.95


def test_redis_bucket_limits_tokens_per_minute_and_keys_models_apart(redis_url):
    limits = Limits(requests_per_minute=0, tokens_per_minute=60_000)  # 1,000 now, ~983/s

    async def scenario() -> list[tuple[bool, int]]:
        bucket = RedisTokenBucket.from_url(redis_url)
        try:
            return [
                await bucket.reserve("pro", limits, 1000),  # the whole bucket
                await bucket.reserve("pro", limits, 2000),  # reserved, about 2 s ahead
                await bucket.reserve("pro", limits, 20_000),  # beyond 5 s: ask again later
                await bucket.reserve("flash", limits, 1000),  # another model's own bucket
            ]
        finally:
            await bucket.aclose()

    first, second, too_far, other_model = run_async(scenario)

    assert first == (True, 0) and other_model == (True, 0)
    assert second[0] and 1_900 <= second[1] <= 2_100, second
    # 20,000 tokens with 2,000 owed: about 22.4 s off, asked again 5 s before that.
    assert not too_far[0] and 17_000 <= too_far[1] <= 17_600, too_far


def test_a_redis_that_does_not_answer_is_said_to_be_unavailable():
    async def scenario() -> None:
        bucket = RedisTokenBucket.from_url("redis://127.0.0.1:1/0")  # nothing listens there
        try:
            await bucket.acquire("m", Limits(60, 0), 0)
        finally:
            await bucket.aclose()

    with pytest.raises(LimiterUnavailable, match="did not answer"):
        run_async(scenario)
    # A model without limits never asks Redis.
    bucket = RedisTokenBucket.from_url("redis://127.0.0.1:1/0")
    assert run_async(lambda: bucket.acquire("m", Limits(0, 0), 10**9)) == 0.0


def test_memory_bucket_reserves_turns_one_refill_apart():
    bucket = MemoryTokenBucket()
    limits = Limits(requests_per_minute=600, tokens_per_minute=0)  # 10 at once, 9.83/s

    async def scenario() -> float:
        for _ in range(10):
            assert await bucket.acquire("m", limits, 0) < 0.05
        started = time.monotonic()
        await asyncio.gather(*(bucket.acquire("m", limits, 0) for _ in range(5)))
        return time.monotonic() - started

    waited = run_async(scenario)

    assert 0.4 <= waited <= 0.8, waited
    assert run_async(lambda: bucket.reserve("other", limits, 0)) == (True, 0)


def test_memory_bucket_tokens_and_no_limit():
    bucket = MemoryTokenBucket()
    limits = Limits(requests_per_minute=0, tokens_per_minute=600)  # 10 now, ~9.8 a second
    assert run_async(lambda: bucket.reserve("m", limits, 10)) == (True, 0)
    taken, wait = run_async(lambda: bucket.reserve("m", limits, 500))  # 51 s off: not taken
    assert not taken and 45_000 <= wait <= 46_100, wait
    assert run_async(lambda: bucket.acquire("m", Limits(0, 0), 10**9)) == 0.0
