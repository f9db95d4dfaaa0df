"""Rate limits per tool and caller, on the `limits` library: in memory, or shared through Redis.

A moving window (exact, not approximate): with Redis several replicas share one count, so a limit of
N calls a minute admits N calls in any 60 s, whichever replica answers.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Literal, cast

from limits import RateLimitItemPerMinute
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string

from mcpkit.errors import RateLimited

if TYPE_CHECKING:
    from mcpkit.pipeline import Call, CallNext
    from mcpkit.result import Outcome

__all__ = ["OnOutage", "RateLimit", "RateLimiter"]

log = logging.getLogger("mcpkit.ratelimit")

OnOutage = Literal["refuse", "allow"]
"""What a limit does when its shared store is unreachable: refuse calls (fail closed) or allow them."""

_OUTAGE_WAIT_S = 5


class RateLimiter:
    """Checks and counts calls against per-minute limits.

    Args:
        namespace: Prefix of every key (the server's name), so replicas of one server share counts.
        redis_url: `redis://host:port/db` to share limits across replicas; None keeps them in memory.
    """

    def __init__(self, namespace: str, redis_url: str | None = None) -> None:
        self.namespace = namespace
        self.shared = redis_url is not None
        uri = "async+memory://" if redis_url is None else "async+" + redis_url
        options: dict[str, float | str | bool] = {}
        if redis_url is not None:
            options = {"implementation": "redispy", "socket_timeout": 2, "socket_connect_timeout": 2}
        self.storage = cast(Storage, storage_from_string(uri, **options))
        self.strategy = MovingWindowRateLimiter(self.storage)

    async def hit(self, key: str, per_minute: int, on_outage: OnOutage) -> None:
        """Count one call for `key`; raise `RateLimited` (with the wait) when the limit is reached."""
        item = RateLimitItemPerMinute(per_minute)
        try:
            if await self.strategy.hit(item, self.namespace, key):
                return
            stats = await self.strategy.get_window_stats(item, self.namespace, key)
        except Exception:  # the shared store is down: the limit's own choice decides
            log.warning("rate-limit store unreachable for %s (%s)", key, on_outage, exc_info=True)
            if on_outage == "allow":
                return
            raise RateLimited(
                _OUTAGE_WAIT_S, "Rate limiting is unavailable right now; retry shortly."
            ) from None
        raise RateLimited(max(1.0, stats.reset_time - time.time()))

    async def reset(self) -> None:
        """Forget every count (tests and operators)."""
        await self.storage.reset()


class RateLimit:
    """Built-in middleware: count each call against its tool's per-minute limit for the caller.

    Runs after the result cache, so a cached answer spends nothing. Over the limit: `RATE_LIMITED`
    with the wait (retryable).

    Args:
        limiter: Where counts live (memory or Redis).
        default_per_min: The limit of tools without their own `rate_limit_per_min` (None: unlimited).
        on_outage: What to do when the shared store is unreachable.
    """

    def __init__(self, limiter: RateLimiter, default_per_min: int | None, on_outage: OnOutage) -> None:
        self.limiter = limiter
        self.default_per_min = default_per_min
        self.on_outage = on_outage

    async def __call__(self, call: Call, call_next: CallNext) -> Outcome:
        tool = call.tool
        per_min = (tool.rate_limit_per_min if tool else None) or self.default_per_min
        if per_min and tool is not None:
            await self.limiter.hit(f"{tool.name}:{call.identity}", per_min, self.on_outage)
        return await call_next(call)
