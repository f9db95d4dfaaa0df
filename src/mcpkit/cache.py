"""Result caching for tools with a `cache_ttl_s`: in memory, or shared through Redis.

Concurrent identical calls compute once: in one process through a shared in-flight future, across
replicas through a short Redis lock the others wait on. Values are opaque bytes; the pipeline decides
what is worth caching (successful results only).
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Protocol

import redis.asyncio as aioredis

__all__ = ["Cache", "Computed", "MemoryCache", "RedisCache"]

log = logging.getLogger("mcpkit.cache")

Computed = tuple[bytes, bool]
"""A value and a flag: from `compute`, may it be stored; from `get_or_compute`, was it cached."""


class Cache(Protocol):
    """A result cache keyed by strings; `invalidate` takes a glob over keys."""

    async def get_or_compute(
        self, key: str, ttl_s: float, compute: Callable[[], Awaitable[Computed]]
    ) -> Computed:
        """The cached value (`was_cached` True), or the result of `compute` (stored when it allows)."""
        ...

    async def invalidate(self, pattern: str) -> int:
        """Drop every entry whose key matches the glob `pattern`; returns how many."""
        ...


class _SingleFlight:
    """At most one computation per key in this process; the others await its result."""

    def __init__(self) -> None:
        self._inflight: dict[str, asyncio.Future[Computed]] = {}

    async def run(self, key: str, compute: Callable[[], Awaitable[Computed]]) -> tuple[Computed, bool]:
        """(result, whether this caller computed it)."""
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending), False
        future: asyncio.Future[Computed] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await compute()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody else needs to
            raise
        finally:
            del self._inflight[key]
        future.set_result(result)
        return result, True


class MemoryCache:
    """A bounded in-process cache (least recently used entries go first)."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._entries: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._max = max_entries
        self._flight = _SingleFlight()

    async def get_or_compute(
        self, key: str, ttl_s: float, compute: Callable[[], Awaitable[Computed]]
    ) -> Computed:
        hit = self._entries.get(key)
        if hit is not None:
            if hit[0] > time.monotonic():
                self._entries.move_to_end(key)
                return hit[1], True
            del self._entries[key]

        async def compute_and_store() -> Computed:
            value, storable = await compute()
            if storable:
                self._entries[key] = (time.monotonic() + ttl_s, value)
                while len(self._entries) > self._max:
                    self._entries.popitem(last=False)
            return value, False

        (value, cached), computed_here = await self._flight.run(key, compute_and_store)
        return value, cached or not computed_here

    async def invalidate(self, pattern: str) -> int:
        doomed = [k for k in self._entries if fnmatch.fnmatchcase(k, pattern)]
        for k in doomed:
            del self._entries[k]
        return len(doomed)


class RedisCache:
    """A cache shared by replicas through Redis, with a short lock so one replica computes."""

    def __init__(self, url: str, *, lock_s: float = 30.0, poll_s: float = 0.02) -> None:
        self.redis = aioredis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self.lock_s = lock_s
        self.poll_s = poll_s
        self._flight = _SingleFlight()

    async def get_or_compute(
        self, key: str, ttl_s: float, compute: Callable[[], Awaitable[Computed]]
    ) -> Computed:
        try:
            cached = await self.redis.get(key)
        except Exception:  # the cache is an optimisation: without Redis, compute
            log.warning("cache store unreachable; computing %s", key, exc_info=True)
            return await compute()
        if cached is not None:
            return bytes(cached), True
        (value, cached), computed_here = await self._flight.run(
            key, lambda: self._compute_shared(key, ttl_s, compute)
        )
        return value, cached or not computed_here

    async def _compute_shared(
        self, key: str, ttl_s: float, compute: Callable[[], Awaitable[Computed]]
    ) -> Computed:
        lock = f"{key}:lock"
        deadline = time.monotonic() + self.lock_s
        while not await self.redis.set(lock, b"1", nx=True, px=int(self.lock_s * 1000)):
            await asyncio.sleep(self.poll_s)  # another replica computes: wait for its value
            cached = await self.redis.get(key)
            if cached is not None:
                return bytes(cached), True
            if time.monotonic() > deadline:
                break
        try:
            value, storable = await compute()
            if storable:
                await self.redis.set(key, value, px=max(1, int(ttl_s * 1000)))
            return value, False
        finally:
            await self.redis.delete(lock)

    async def invalidate(self, pattern: str) -> int:
        count = 0
        async for key in self.redis.scan_iter(match=pattern, count=500):
            count += int(await self.redis.delete(key))
        return count
