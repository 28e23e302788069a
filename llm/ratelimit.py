"""Rate limits shared by all workers: a token bucket per model, for requests and for tokens.

Production uses `RedisTokenBucket` (one Lua script, so that checking and taking are atomic
across processes and machines). Tests may pass `MemoryTokenBucket` explicitly; nothing falls
back to it silently, because a per-process limit multiplied by N workers is no limit at all.

A bucket holds one second's worth (at least one request) and refills at the rest of the limit,
so that no sixty seconds ever hold more than the limit: a bucket of a whole minute let a fresh
job send two minutes' worth in its first minute once a job had the concurrency to (issue 22).
A request that the bucket cannot serve now reserves its turn, up to `RESERVE_AHEAD_S` ahead,
and sleeps until then: one trip to Redis a request, where asking again every few milliseconds
made dozens of waiting requests poll Redis hundreds of times a second.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass
from typing import Protocol

import redis.asyncio as aioredis
import redis.exceptions

_WINDOW_MS = 60_000
# The longest wait a request may reserve; a longer one asks again (after at most this long),
# so that a cancelled chunk leaves few reserved turns unused.
RESERVE_AHEAD_S = 5.0


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int  # 0: unlimited
    tokens_per_minute: int  # 0: unlimited

    @property
    def unlimited(self) -> bool:
        return self.requests_per_minute <= 0 and self.tokens_per_minute <= 0


def bucket_shape(per_minute: int) -> tuple[float, float]:
    """(capacity, refill per ms) of a bucket for `per_minute`: a second's worth at once (at
    least one), refilled at the rest of the limit, so that capacity + a minute's refill is the
    limit. A limit of one a minute keeps its plain rate (a second request within the minute
    would otherwise never come)."""
    capacity = max(1.0, math.floor(per_minute / 60))
    rest = per_minute - capacity
    return capacity, (rest if rest > 0 else per_minute) / _WINDOW_MS


class LimiterUnavailable(Exception):  # noqa: N818 (what the gateway waits out)
    """The shared limiter's store (Redis) did not answer: a restart or an outage. Nothing was
    sent, so the gateway waits and asks again, as after a provider's 5xx."""


class RateLimiter(Protocol):
    async def acquire(self, key: str, limits: Limits, tokens: int) -> float:
        """Wait until one request of about `tokens` tokens may go; return the seconds waited.
        Raises LimiterUnavailable when the limiter's store does not answer."""
        ...


# KEYS[1]: the request bucket, KEYS[2]: the token bucket (hashes of level and timestamp).
# ARGV: requests per minute, tokens per minute, tokens wanted, the longest wait to reserve (ms).
# Returns {1, wait}: taken, go in `wait` ms (a level may run below zero: turns reserved ahead);
# {0, wait}: not taken, ask again in `wait` ms. The time is Redis's, so workers' clocks don't
# matter.
_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = 60000
local function shape(limit)
  local capacity = math.max(1, math.floor(limit / 60))
  local rest = limit - capacity
  if rest <= 0 then rest = limit end
  return capacity, rest / window
end
local function level(key, capacity, rate)
  local v = redis.call('HMGET', key, 'level', 'ts')
  local lvl = tonumber(v[1])
  local ts = tonumber(v[2])
  if lvl == nil or ts == nil then return capacity end
  return math.min(capacity, lvl + math.max(0, now - ts) * rate)
end
local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local ahead = tonumber(ARGV[4])
local wait = 0
local r, rcap, rrate, k, kcap, krate = 0, 0, 0, 0, 0, 0
if rpm > 0 then
  rcap, rrate = shape(rpm)
  r = level(KEYS[1], rcap, rrate)
  if r < 1 then wait = math.ceil((1 - r) / rrate) end
end
if tpm > 0 then
  want = math.min(want, tpm)
  kcap, krate = shape(tpm)
  k = level(KEYS[2], kcap, krate)
  if k < want then wait = math.max(wait, math.ceil((want - k) / krate)) end
end
if wait > ahead then return {0, wait - ahead} end
if rpm > 0 then
  redis.call('HSET', KEYS[1], 'level', tostring(r - 1), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[1], 2 * window)
end
if tpm > 0 then
  redis.call('HSET', KEYS[2], 'level', tostring(k - want), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[2], 2 * window)
end
return {1, wait}
"""


def _pause(wait_ms: float) -> float:
    """Seconds to sleep before asking again: a little jitter, so that requests refused together
    don't all come back in the same millisecond."""
    return min(RESERVE_AHEAD_S, wait_ms / 1000 * (1 + random.random() * 0.1) + 0.001)


async def _take(reserve, key: str, limits: Limits, tokens: int) -> float:
    """Reserve a turn (asking again while the wait is beyond what may be reserved), then sleep
    until it comes; the seconds waited."""
    if limits.unlimited:
        return 0.0
    started = time.monotonic()
    while True:
        taken, wait_ms = await reserve(key, limits, tokens)
        if taken:
            if wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000)
            return time.monotonic() - started
        await asyncio.sleep(_pause(wait_ms))


# What a Redis restart or outage raises: a refused or dropped connection, a timeout, or the
# server still loading its data (BusyLoadingError is a ConnectionError).
_REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


class RedisTokenBucket:
    """The shared limiter: state in Redis under `{prefix}:{key}:req` and `:tok`."""

    def __init__(self, client: aioredis.Redis, prefix: str = "llm:bucket") -> None:
        self._client = client
        self._prefix = prefix
        self._script = client.register_script(_LUA)

    @classmethod
    def from_url(cls, url: str) -> RedisTokenBucket:
        return cls(aioredis.Redis.from_url(url))

    async def reserve(self, key: str, limits: Limits, tokens: int) -> tuple[bool, int]:
        """(True, ms): one request (and `tokens`) is yours, to send in ms; (False, ms): the
        turn is further off than may be reserved, ask again in ms."""
        keys = [f"{self._prefix}:{key}:req", f"{self._prefix}:{key}:tok"]
        args = [
            limits.requests_per_minute,
            limits.tokens_per_minute,
            max(0, tokens),
            int(RESERVE_AHEAD_S * 1000),
        ]
        try:
            taken, wait_ms = await self._script(keys=keys, args=args)
        except _REDIS_DOWN as exc:
            raise LimiterUnavailable(f"the rate limiter's Redis did not answer: {exc}") from exc
        return bool(taken), int(wait_ms)

    async def acquire(self, key: str, limits: Limits, tokens: int) -> float:
        return await _take(self.reserve, key, limits, tokens)

    async def aclose(self) -> None:
        await self._client.aclose()


class MemoryTokenBucket:
    """The same buckets in this process only: for tests and single-process tools."""

    def __init__(self) -> None:
        self._levels: dict[str, tuple[float, float]] = {}  # bucket -> (level, monotonic ms)

    def _level(self, bucket: str, capacity: float, rate: float, now: float) -> float:
        level, at = self._levels.get(bucket, (capacity, now))
        return min(capacity, level + (now - at) * rate)

    async def reserve(self, key: str, limits: Limits, tokens: int) -> tuple[bool, int]:
        now = time.monotonic() * 1000
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        want = min(max(0, tokens), tpm)
        wait = 0.0
        requests = budget = 0.0
        if rpm > 0:
            capacity, rate = bucket_shape(rpm)
            requests = self._level(f"{key}:req", capacity, rate, now)
            if requests < 1:
                wait = (1 - requests) / rate
        if tpm > 0:
            capacity, rate = bucket_shape(tpm)
            budget = self._level(f"{key}:tok", capacity, rate, now)
            if budget < want:
                wait = max(wait, (want - budget) / rate)
        ahead = RESERVE_AHEAD_S * 1000
        if wait > ahead:
            return False, math.ceil(wait - ahead)
        if rpm > 0:
            self._levels[f"{key}:req"] = (requests - 1, now)
        if tpm > 0:
            self._levels[f"{key}:tok"] = (budget - want, now)
        return True, math.ceil(wait)

    async def acquire(self, key: str, limits: Limits, tokens: int) -> float:
        return await _take(self.reserve, key, limits, tokens)
