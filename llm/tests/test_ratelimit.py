"""The token buckets: the Redis one against a real redis-server, shared by two clients as two
workers would share it, and the in-memory one that tests pass explicitly."""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from llm.ratelimit import Limits, MemoryTokenBucket, RedisTokenBucket
from llm.tests.conftest import run_async


def test_redis_bucket_is_shared_by_all_workers(redis_url):
    limits = Limits(requests_per_minute=120, tokens_per_minute=0)  # 2 a second, 120 at once

    async def scenario() -> tuple[list[int], float]:
        workers = [RedisTokenBucket(aioredis.Redis.from_url(redis_url)) for _ in range(2)]
        try:
            # Two workers take 60 each from one bucket: all granted at once, none waits.
            granted = [await workers[i % 2].try_acquire("flash", limits, 0) for i in range(120)]
            # The 121st, from either worker, must wait for the refill (half a second).
            refused = await workers[0].try_acquire("flash", limits, 0)
            assert 300 <= refused <= 510, refused
            started = time.monotonic()
            await workers[1].acquire("flash", limits, 0)
            return granted, time.monotonic() - started
        finally:
            for worker in workers:
                await worker.aclose()

    granted, waited = run_async(scenario)

    assert granted == [0] * 120
    assert 0.3 <= waited <= 1.5


def test_redis_bucket_limits_tokens_per_minute_and_keys_models_apart(redis_url):
    limits = Limits(requests_per_minute=0, tokens_per_minute=6000)  # 100 tokens a second

    async def scenario() -> tuple[int, int, int, int]:
        bucket = RedisTokenBucket.from_url(redis_url)
        try:
            first = await bucket.try_acquire("pro", limits, 5000)
            second = await bucket.try_acquire("pro", limits, 2000)  # 1000 left: wait ~10 s
            other_model = await bucket.try_acquire("flash", limits, 5000)
            too_big = await bucket.try_acquire("fresh", limits, 60_000)  # clamped to capacity
            return first, second, other_model, too_big
        finally:
            await bucket.aclose()

    first, second, other_model, too_big = run_async(scenario)

    assert first == 0 and other_model == 0 and too_big == 0
    assert 9_000 <= second <= 10_100


def test_memory_bucket_waits_for_the_refill():
    bucket = MemoryTokenBucket()
    limits = Limits(requests_per_minute=600, tokens_per_minute=0)  # 10 a second

    async def scenario() -> float:
        for _ in range(600):
            await bucket.acquire("m", limits, 0)
        started = time.monotonic()
        for _ in range(3):
            await bucket.acquire("m", limits, 0)
        return time.monotonic() - started

    waited = run_async(scenario)

    assert 0.2 <= waited <= 1.0
    assert bucket.try_acquire("other", limits, 0) == 0


def test_memory_bucket_tokens_and_no_limit():
    bucket = MemoryTokenBucket()
    limits = Limits(requests_per_minute=0, tokens_per_minute=600)  # 10 tokens a second
    assert bucket.try_acquire("m", limits, 500) == 0
    assert 39_000 <= bucket.try_acquire("m", limits, 500) <= 40_100  # 400 missing: 40 s
    assert run_async(lambda: bucket.acquire("m", Limits(0, 0), 10**9)) == 0.0
