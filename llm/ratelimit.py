"""Rate limits shared by all workers: a token bucket per model, for requests and for tokens.

Production uses `RedisTokenBucket` (one Lua script, so that checking and taking are atomic
across processes and machines). Tests may pass `MemoryTokenBucket` explicitly; nothing falls
back to it silently, because a per-process limit multiplied by N workers is no limit at all.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Protocol

import redis.asyncio as aioredis

# Buckets refill continuously: a limit of N per minute is N/60 per second, up to N at once.
_WINDOW_MS = 60_000
# Longest single sleep between two looks at the bucket, so a freed-up bucket is noticed soon.
_MAX_SLEEP_S = 5.0


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int  # 0: unlimited
    tokens_per_minute: int  # 0: unlimited

    @property
    def unlimited(self) -> bool:
        return self.requests_per_minute <= 0 and self.tokens_per_minute <= 0


class RateLimiter(Protocol):
    async def acquire(self, key: str, limits: Limits, tokens: int) -> float:
        """Wait until one request of about `tokens` tokens may go; return the seconds waited."""
        ...


# KEYS[1]: the request bucket, KEYS[2]: the token bucket (hashes of level and timestamp).
# ARGV: requests per minute, tokens per minute, tokens wanted. Returns 0 when taken, else the
# milliseconds to wait before asking again. The time is Redis's, so workers' clocks don't matter.
_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = 60000
local function level(key, capacity)
  local v = redis.call('HMGET', key, 'level', 'ts')
  local lvl = tonumber(v[1])
  local ts = tonumber(v[2])
  if lvl == nil or ts == nil then return capacity end
  return math.min(capacity, lvl + math.max(0, now - ts) * capacity / window)
end
local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local wait = 0
local r = 0
local k = 0
if rpm > 0 then
  r = level(KEYS[1], rpm)
  if r < 1 then wait = math.ceil((1 - r) * window / rpm) end
end
if tpm > 0 then
  want = math.min(want, tpm)
  k = level(KEYS[2], tpm)
  if k < want then wait = math.max(wait, math.ceil((want - k) * window / tpm)) end
end
if wait > 0 then return wait end
if rpm > 0 then
  redis.call('HSET', KEYS[1], 'level', tostring(r - 1), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[1], 2 * window)
end
if tpm > 0 then
  redis.call('HSET', KEYS[2], 'level', tostring(k - want), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[2], 2 * window)
end
return 0
"""


def _pause(wait_ms: float) -> float:
    """Seconds to sleep for a wait the bucket asked for: a little jitter, so that workers that
    were refused together don't all come back in the same millisecond."""
    return min(_MAX_SLEEP_S, wait_ms / 1000 * (1 + random.random() * 0.1) + 0.001)


class RedisTokenBucket:
    """The shared limiter: state in Redis under `{prefix}:{key}:req` and `:tok`."""

    def __init__(self, client: aioredis.Redis, prefix: str = "llm:bucket") -> None:
        self._client = client
        self._prefix = prefix
        self._script = client.register_script(_LUA)

    @classmethod
    def from_url(cls, url: str) -> RedisTokenBucket:
        return cls(aioredis.Redis.from_url(url))

    async def try_acquire(self, key: str, limits: Limits, tokens: int) -> int:
        """Take one request (and `tokens`) if the buckets allow; else the milliseconds to wait."""
        keys = [f"{self._prefix}:{key}:req", f"{self._prefix}:{key}:tok"]
        args = [limits.requests_per_minute, limits.tokens_per_minute, max(0, tokens)]
        return int(await self._script(keys=keys, args=args))

    async def acquire(self, key: str, limits: Limits, tokens: int) -> float:
        if limits.unlimited:
            return 0.0
        started = time.monotonic()
        while (wait_ms := await self.try_acquire(key, limits, tokens)) > 0:
            await asyncio.sleep(_pause(wait_ms))
        return time.monotonic() - started

    async def aclose(self) -> None:
        await self._client.aclose()


class MemoryTokenBucket:
    """The same buckets in this process only: for tests and single-process tools."""

    def __init__(self) -> None:
        self._levels: dict[str, tuple[float, float]] = {}  # bucket -> (level, monotonic time)

    def _level(self, bucket: str, capacity: int, now: float) -> float:
        level, at = self._levels.get(bucket, (float(capacity), now))
        return min(capacity, level + (now - at) * 1000 * capacity / _WINDOW_MS)

    def try_acquire(self, key: str, limits: Limits, tokens: int) -> int:
        now = time.monotonic()
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        want = min(max(0, tokens), tpm)
        wait = 0.0
        requests = self._level(f"{key}:req", rpm, now) if rpm > 0 else 0.0
        budget = self._level(f"{key}:tok", tpm, now) if tpm > 0 else 0.0
        if rpm > 0 and requests < 1:
            wait = (1 - requests) * _WINDOW_MS / rpm
        if tpm > 0 and budget < want:
            wait = max(wait, (want - budget) * _WINDOW_MS / tpm)
        if wait > 0:
            return int(wait) + 1
        if rpm > 0:
            self._levels[f"{key}:req"] = (requests - 1, now)
        if tpm > 0:
            self._levels[f"{key}:tok"] = (budget - want, now)
        return 0

    async def acquire(self, key: str, limits: Limits, tokens: int) -> float:
        if limits.unlimited:
            return 0.0
        started = time.monotonic()
        while (wait_ms := self.try_acquire(key, limits, tokens)) > 0:
            await asyncio.sleep(_pause(wait_ms))
        return time.monotonic() - started
