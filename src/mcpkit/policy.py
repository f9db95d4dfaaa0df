"""Policy: which tools exist for this deployment, and the stages that police each call."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcpkit.cache import Cache, Computed, MemoryCache, RedisCache
from mcpkit.definition import Tool
from mcpkit.errors import DefinitionError
from mcpkit.ratelimit import OnOutage, RateLimiter
from mcpkit.result import Outcome

if TYPE_CHECKING:
    from mcpkit.pipeline import Call, CallNext, Stage
    from mcpkit.server import CompiledTool

__all__ = ["Policy", "ToolSelection", "env_list"]

ALLOWED_TOOLS_ENV = "MCPKIT_ALLOWED_TOOLS"
DENIED_CATEGORIES_ENV = "MCPKIT_DENIED_CATEGORIES"
TOOLSETS_ENV = "MCPKIT_TOOLSETS"


def env_list(environ: Mapping[str, str], name: str) -> list[str] | None:
    """A comma-separated environment variable as a list; None when unset or blank."""
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    return [item.strip() for item in raw.split(",") if item.strip()]


@dataclass(frozen=True, slots=True)
class ToolSelection:
    """The tools a deployment serves: `available` may be called, `listed` appear in `tools/list`."""

    available: tuple[str, ...]
    listed: tuple[str, ...]

    @classmethod
    def build(
        cls,
        tools: Iterable[CompiledTool],
        *,
        allowed_tools: Sequence[str] | None,
        denied_categories: Sequence[str] | None,
        toolsets: Mapping[str, Sequence[str]] | None,
        enabled_toolsets: Sequence[str] | None,
        environ: Mapping[str, str] | None,
    ) -> ToolSelection:
        """Apply the allowlist, the category denylist and the toolsets, from code and environment.

        The environment can only narrow what the code allows. Unknown names are definition errors:
        a typo in an allowlist must not silently hide every tool.
        """
        env = os.environ if environ is None else environ
        by_name = {c.tool.name: c for c in tools}
        names = list(by_name)
        for source, allow in (
            ("allowed_tools", allowed_tools),
            (ALLOWED_TOOLS_ENV, env_list(env, ALLOWED_TOOLS_ENV)),
        ):
            if allow is None:
                continue
            unknown = sorted(set(allow) - set(by_name))
            if unknown:
                raise DefinitionError(
                    f"{source} names tools this server does not define: {', '.join(unknown)}"
                )
            names = [n for n in names if n in allow]
        denied = set(denied_categories or ()) | set(env_list(env, DENIED_CATEGORIES_ENV) or ())
        names = [n for n in names if by_name[n].tool.category not in denied]
        if toolsets is not None:
            enabled = enabled_toolsets if enabled_toolsets is not None else env_list(env, TOOLSETS_ENV)
            if enabled is not None:
                unknown = sorted(set(enabled) - set(toolsets))
                if unknown:
                    raise DefinitionError(
                        f"unknown toolsets {', '.join(unknown)}; defined: {', '.join(toolsets)}"
                    )
                categories = {cat for ts in enabled for cat in toolsets[ts]}
                names = [n for n in names if by_name[n].tool.category in categories]
        return cls(available=tuple(names), listed=tuple(names))


class Policy:
    """The per-call policy stages: rate limits before validation, the result cache after it.

    Args:
        namespace: Key prefix shared by replicas of one server.
        tools: Every tool of the server, for category invalidation.
        default_rate_limit_per_min: Applies to tools without their own limit.
        on_limit_outage: What limits do when their shared store is unreachable.
        redis_url: Share limits and cache through Redis; None keeps them in this process.
    """

    def __init__(
        self,
        namespace: str,
        tools: Mapping[str, Tool],
        *,
        default_rate_limit_per_min: int | None = None,
        on_limit_outage: OnOutage = "refuse",
        redis_url: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.default_rate_limit = default_rate_limit_per_min
        self.on_limit_outage = on_limit_outage
        self.limiter = RateLimiter(namespace, redis_url)
        self.cache: Cache = MemoryCache() if redis_url is None else RedisCache(redis_url)
        self._by_category: dict[str, list[str]] = {}
        for tool in tools.values():
            if tool.category is not None:
                self._by_category.setdefault(tool.category, []).append(tool.name)
        self.limited = any(t.rate_limit_per_min for t in tools.values()) or bool(default_rate_limit_per_min)

    def before_validation(self) -> list[Stage]:
        return [self.rate_limit] if self.limited else []

    def after_validation(self) -> list[Stage]:
        return [self.cached]

    async def rate_limit(self, call: Call, call_next: CallNext) -> Outcome:
        """Count the call against its tool's limit for this caller; over it, `RATE_LIMITED`."""
        tool = call.tool
        assert tool is not None
        per_min = tool.rate_limit_per_min or self.default_rate_limit
        if per_min:
            await self.limiter.hit(f"{tool.name}:{call.identity}", per_min, self.on_limit_outage)
        return await call_next(call)

    async def cached(self, call: Call, call_next: CallNext) -> Outcome:
        """Serve cacheable tools from cache; a mutating tool drops its category's entries."""
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
            self._key(tool.name, digest), tool.cache_ttl_s, compute
        )
        return Outcome.decode(data)

    async def invalidate(self, tool_pattern: str = "*") -> int:
        """Drop cached results of the tools whose names match the glob `tool_pattern`."""
        return await self.cache.invalidate(self._key(tool_pattern, "*"))

    def _key(self, tool: str, digest: str) -> str:
        return f"mcpkit:{self.namespace}:cache:{tool}:{digest}"
