"""Result caching for tools with a `cache_ttl_s`: in memory, or shared through Redis.

Concurrent identical calls compute once: in one process through a shared in-flight future, across
replicas through a short Redis lock the others wait on. Values are opaque bytes; the pipeline decides
what is worth caching (successful results only).
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Protocol

import redis.asyncio as aioredis

from mcpkit.result import Outcome

if TYPE_CHECKING:
    from mcpkit.definition import Tool
    from mcpkit.pipeline import Call, CallNext

__all__ = ["Cache", "Computed", "MemoryCache", "RedisCache", "ResultCache", "glob_escape"]

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


class ResultCache:
    """Built-in middleware: answer tools with a `cache_ttl_s` from cache; a mutating tool drops its
    category's cached results.

    Keys are per tool, caller identity and validated arguments, so one caller never sees another's
    answer. Only successful results are stored.

    Args:
        namespace: The server's name (replicas of one server share entries through Redis).
        cache: The store.
        tools: Every tool of the server (for category invalidation).
    """

    def __init__(self, namespace: str, cache: Cache, tools: Iterable[Tool]) -> None:
        self.namespace = namespace
        self.cache = cache
        self._by_category: dict[str, list[str]] = {}
        for tool in tools:
            if tool.category is not None:
                self._by_category.setdefault(tool.category, []).append(tool.name)

    async def __call__(self, call: Call, call_next: CallNext) -> Outcome:
        tool = call.tool
        assert tool is not None
        assert call.args is not None
        if tool.mutating:
            try:
                return await call_next(call)
            finally:
                if tool.category is not None:
                    for name in self._by_category.get(tool.category, ()):
                        await self.invalidate(name)
        if not tool.cache_ttl_s:
            return await call_next(call)
        args = json.dumps(call.args.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(f"{call.identity}\0{args}".encode()).hexdigest()[:40]

        async def compute() -> Computed:
            outcome = await call_next(call)
            return outcome.encode(), outcome.code is None

        data, call.cached = await self.cache.get_or_compute(
            self.key(tool.name, digest), tool.cache_ttl_s, compute
        )
        return Outcome.decode(data)

    async def invalidate(self, tool_pattern: str = "*") -> int:
        """Drop cached results of the tools whose names match the glob `tool_pattern`."""
        return await self.cache.invalidate(self.key(tool_pattern, "*"))

    def key(self, tool: str, digest: str) -> str:
        """The store key of one result (`tool` and `digest` may be globs)."""
        return f"{glob_escape(f'mcpkit:{self.namespace}:cache:')}{tool}:{digest}"


def glob_escape(text: str) -> str:
    """`text` matched literally by a glob, in both `fnmatch` and Redis (`[*]` for `*`; a lone `]` is literal).

    >>> glob_escape("a*b[c]?")
    'a[*]b[[]c][?]'
    """
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in text)
