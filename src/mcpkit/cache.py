"""Result caching for tools with a `cache_ttl_s`: in memory, or shared through Redis.

Concurrent identical calls compute once: in one process through a shared in-flight future, across
replicas through a short Redis lock the others wait on. Values are opaque bytes; the pipeline decides
what is worth caching (successful results only).
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import inspect
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import redis.asyncio as aioredis

from mcpkit.result import Outcome

if TYPE_CHECKING:
    from mcpkit.definition import Tool
    from mcpkit.pipeline import Call, CallNext

__all__ = [
    "Cache",
    "Computed",
    "DataCache",
    "Invalidated",
    "MemoryCache",
    "RedisCache",
    "ResultCache",
    "glob_escape",
    "result_digest",
]

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

    async def invalidate(self, pattern: str) -> list[str]:
        """Drop every entry whose key matches the glob `pattern`; returns the keys dropped."""
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

    async def invalidate(self, pattern: str) -> list[str]:
        doomed = [k for k in self._entries if fnmatch.fnmatchcase(k, pattern)]
        for k in doomed:
            del self._entries[k]
        return doomed


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
            # The lock may have been won just after another replica stored the value and let go.
            cached = await self.redis.get(key)
            if cached is not None:
                return bytes(cached), True
            value, storable = await compute()
            if storable:
                await self.redis.set(key, value, px=max(1, int(ttl_s * 1000)))
            return value, False
        finally:
            await self.redis.delete(lock)

    async def invalidate(self, pattern: str) -> list[str]:
        doomed: list[str] = []
        async for key in self.redis.scan_iter(match=pattern, count=500):
            if await self.redis.delete(key):
                doomed.append(key.decode() if isinstance(key, bytes) else str(key))
        return doomed


class ResultCache:
    """Built-in middleware: answer tools with a `cache_ttl_s` from cache; a mutating tool drops its
    category's cached results.

    Keys are per tool, caller identity (the whole principal), groups, what middleware said selects
    the caller's view (`call.vary`: a database role, a source) and validated arguments, so one
    caller never sees another's answer. Only successful results are stored.

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
                        await self.invalidate(glob_escape(name))
        if not tool.cache_ttl_s:
            return await call_next(call)
        digest = result_digest(call)

        async def compute() -> Computed:
            outcome = await call_next(call)
            return outcome.encode(), outcome.code is None

        data, call.cached = await self.cache.get_or_compute(
            self.key(tool.name, digest), tool.cache_ttl_s, compute
        )
        return Outcome.decode(data)

    async def invalidate(self, tool_pattern: str = "*") -> Invalidated:
        """Drop cached results of the tools whose names match the glob `tool_pattern`."""
        prefix = f"mcpkit:{self.namespace}:cache:"
        dropped = await self.cache.invalidate(self.key(tool_pattern, "*"))
        return Invalidated(tool_pattern, tuple(sorted(k.removeprefix(prefix) for k in dropped)))

    def key(self, tool: str, digest: str) -> str:
        """The store key of one result (`tool` and `digest` may be globs)."""
        return f"{glob_escape(f'mcpkit:{self.namespace}:cache:')}{tool}:{digest}"


def result_digest(call: Call) -> str:
    """The part of a result's key that names the caller and its arguments (SHA-256, 40 hex)."""
    assert call.args is not None
    key = {
        "identity": call.identity,
        "groups": sorted(set(call.groups)),
        "vary": call.vary,
        "args": call.args.model_dump(mode="json"),
    }
    text = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@dataclass(frozen=True)
class Invalidated:
    """What an invalidation matched: the pattern and the keys it dropped (`tool:digest` for results).

    Compares equal to its count, so `await server.invalidate("lookup*") == 2` reads naturally.
    """

    pattern: str
    keys: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            return self.count == other
        if isinstance(other, Invalidated):
            return (self.pattern, self.keys) == (other.pattern, other.keys)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.pattern, self.keys))


T = TypeVar("T")


class DataCache:
    """A handler's own cache (`ctx.cache`): JSON values under keys you choose, shared by the server's
    tools and, with Redis, its replicas. Concurrent misses of one key compute once.

    Keys are yours: put the principal in the key when the value depends on who asks.

    Args:
        namespace: The server's name.
        cache: The store (the server's memory or Redis cache).
    """

    def __init__(self, namespace: str, cache: Cache) -> None:
        self._prefix = f"mcpkit:{namespace}:data:"
        self._cache = cache

    async def get_or_compute(self, key: str, ttl_s: float, compute: Callable[[], T | Awaitable[T]]) -> T:
        """The cached value of `key`, or `compute()`'s (sync or async; JSON-able), kept `ttl_s` seconds.

        Raises:
            TypeError: the computed value is not JSON-able (nothing is stored).
        """
        if not isinstance(key, str) or not key:
            raise TypeError("cache keys are non-empty strings")
        if not ttl_s > 0:
            raise ValueError("ttl_s must be a positive number of seconds")

        async def encoded() -> Computed:
            value = compute()
            if inspect.isawaitable(value):
                value = await value
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(), True

        data, _ = await self._cache.get_or_compute(self._prefix + key, ttl_s, encoded)
        return json.loads(data)  # type: ignore[no-any-return]

    async def invalidate(self, pattern: str) -> Invalidated:
        """Drop the keys matching the glob `pattern` (`"skill-*"`); says which keys it dropped."""
        dropped = await self._cache.invalidate(glob_escape(self._prefix) + pattern)
        return Invalidated(pattern, tuple(sorted(k.removeprefix(self._prefix) for k in dropped)))


def glob_escape(text: str) -> str:
    """`text` matched literally by a glob, in both `fnmatch` and Redis (`[*]` for `*`; a lone `]` is literal).

    >>> glob_escape("a*b[c]?")
    'a[*]b[[]c][?]'
    """
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in text)
