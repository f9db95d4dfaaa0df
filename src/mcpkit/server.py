"""The mcpkit `Server`: validates its definition eagerly, then serves it over the official SDK."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server as LowLevelServer
from mcp.shared.exceptions import MCPDeprecationWarning

from mcpkit.cache import Cache, DataCache, Invalidated, MemoryCache, RedisCache, ResultCache
from mcpkit.caller import authenticated_caller, client_info, identity_of, unauthenticated_identity
from mcpkit.compiled import CompiledTool, compile_tool, compile_tools
from mcpkit.context import Context
from mcpkit.definition import Tool
from mcpkit.egress import EgressPolicy, GuardedClient, OAuth2ClientCredentials
from mcpkit.egress.assemble import client_for
from mcpkit.errors import DefinitionError
from mcpkit.finder import find_tools_tool
from mcpkit.logs import Redactor, install_redaction
from mcpkit.pipeline import Call, Middleware, compose, invoke, record, require_tool, validate
from mcpkit.policy import ToolSelection
from mcpkit.ratelimit import OnOutage, RateLimit, RateLimiter
from mcpkit.secrets import SecretStore
from mcpkit.threads import DEFAULT_MAX_THREADS, HandlerThreads

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["CompiledTool", "Server"]

log = logging.getLogger("mcpkit.server")

DEFAULT_TIMEOUT_S = 60.0
REDIS_URL_ENV = "MCPKIT_REDIS_URL"


class Server:
    """An MCP tool server built from `Tool` definitions.

    Everything about the definition is checked here, eagerly: names, descriptions, schemas,
    duplicates, the allowlist. A server that constructs is a server whose `tools/list` every
    client accepts (its own lint runs at start-up) and whose every call is validated, policed,
    and masked.

    Args:
        name: Server name sent in `initialize`.
        version: Server version.
        instructions: Guidance for the model on using this server's tools.
        tools: The tool definitions.
        title: A human-readable name.
        allowed_tools: Only these tools are listed and callable (narrowed further by
            `$MCPKIT_ALLOWED_TOOLS`); others are unknown tools.
        denied_categories: Tools of these categories are neither listed nor callable
            (also `$MCPKIT_DENIED_CATEGORIES`).
        toolsets: Named groups of categories a deployment can switch on.
        enabled_toolsets: The toolsets switched on (default: `$MCPKIT_TOOLSETS`, else all).
        timeout_s: Default deadline of one call.
        max_threads: Sync handlers running at once, each in a worker thread. A thread cannot be
            stopped: a call cancelled or past its deadline answers at once, but its thread keeps
            its place here (and its caller's HTTP concurrency slot) until the handler returns.
        secrets: Secret names every tool of this server may read.
        secrets_dir: Where secret files live (default: `$MCPKIT_SECRETS_DIR`).
        egress: Where `ctx.fetch` may go: a list of hosts (`host`, `.suffix`, `host:port`; deny
            everything else), an `EgressPolicy`, or a ready `GuardedClient`. Default: any public
            address on ports 80/443, never a private, loopback or link-local one.
        egress_private: Private networks `ctx.fetch` may reach after all (`["10.1.0.0/16"]`), for
            internal APIs whose allowlisted names resolve inside them; needs an `egress` allowlist.
            Loopback, link-local and metadata addresses stay refused unless named themselves.
        auth: OAuth2 client credentials `ctx.fetch` uses for its API host (its secrets are declared).
        rate_limit_per_min: Default limit for tools without their own, per caller.
        on_limit_outage: When the shared rate-limit store is down: "refuse" calls (fail closed,
            the default) or "allow" them (fail open).
        redis_url: Share rate limits and the result cache with other replicas (default:
            `$MCPKIT_REDIS_URL`; unset keeps both in this process).
        find_tools: Add the built-in `find_tools` tool, which searches every available tool.
        list_limit: List at most this many tools (find_tools included); the rest stay callable
            and `find_tools` finds them, for clients that cap the tool count.
        lint: Run `mcpkit lint` on this server's own `tools/list` and instructions when it is built:
            "error" refuses to build on an error finding, "warn" logs the findings, "off" skips it.
        lint_profiles: The client profiles to lint against (default: the general-purpose clients).
        environ: The environment to read `MCPKIT_*` settings from (default: `os.environ`).
        namespace: Prefix of this server's keys in the result cache, `ctx.cache` and the rate
            limits (default: `name`). Replicas of one server share it; give two different servers
            that share a Redis different names or namespaces, or they share cached answers.
        middleware: Your middleware, outermost first: each `async (call, call_next) -> Outcome`
            (see `mcpkit.pipeline`). They run inside the masking and the operator record, before
            the unknown-tool check, validation, the result cache and the rate limits.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        instructions: str | None = None,
        tools: Sequence[Tool] = (),
        *,
        title: str | None = None,
        allowed_tools: Sequence[str] | None = None,
        denied_categories: Sequence[str] | None = None,
        toolsets: Mapping[str, Sequence[str]] | None = None,
        enabled_toolsets: Sequence[str] | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        max_threads: int = DEFAULT_MAX_THREADS,
        secrets: Sequence[str] = (),
        secrets_dir: str | Path | None = None,
        egress: Sequence[str] | EgressPolicy | GuardedClient | None = None,
        egress_private: Sequence[str] = (),
        auth: OAuth2ClientCredentials | None = None,
        rate_limit_per_min: int | None = None,
        on_limit_outage: OnOutage = "refuse",
        redis_url: str | None = None,
        find_tools: bool = False,
        list_limit: int | None = None,
        lint: Literal["error", "warn", "off"] = "error",
        lint_profiles: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        middleware: Sequence[Middleware] = (),
        namespace: str | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise DefinitionError("a server needs a name")
        if namespace is not None and (not isinstance(namespace, str) or not namespace.strip()):
            raise DefinitionError("a namespace is a non-empty string")
        self.namespace = namespace or name
        self.name, self.version, self.title, self.instructions = name, version, title, instructions
        self.timeout_s = timeout_s
        self.redactor = Redactor()
        self.compiled: dict[str, CompiledTool] = {}
        self.compiled.update(compile_tools(name, tools, server_secrets=frozenset(secrets)))
        self.selection = ToolSelection.build(
            self.compiled.values(),
            allowed_tools=allowed_tools,
            denied_categories=denied_categories,
            toolsets=toolsets,
            enabled_toolsets=enabled_toolsets,
            environ=environ,
        )
        if not self.selection.available:
            raise DefinitionError(
                f"server {name!r}: the allowed tools, denied categories and toolsets leave no tool to serve"
            )
        auth_secrets = {auth.client_id_secret, auth.client_secret_secret} if auth is not None else set()
        declared = set(secrets).union(auth_secrets, *(c.allowed_secrets for c in self.compiled.values()))
        self.secrets = SecretStore(
            sorted(declared), redactor=self.redactor, secrets_dir=secrets_dir, environ=environ
        )
        self.egress = client_for(
            egress, egress_private, auth, lambda name: self.secrets.get(name, frozenset(auth_secrets))
        )
        self.egress.register_secrets(self.redactor)  # access tokens minted at run time, as they come
        env = os.environ if environ is None else environ
        self._available = {n: self.compiled[n].tool for n in self.selection.available}
        listed = list(self.selection.listed)
        if find_tools:
            finder = find_tools_tool(self)
            self.compiled[finder.name] = compile_tool(finder, server_secrets=frozenset())
            self._available[finder.name] = finder
            if list_limit is not None:
                listed = listed[: max(0, list_limit - 1)]
            listed.append(finder.name)
        elif list_limit is not None:
            raise DefinitionError("list_limit needs find_tools=True, or the unlisted tools are unreachable")
        shared = redis_url or env.get(REDIS_URL_ENV) or None
        self.cache: Cache = MemoryCache() if shared is None else RedisCache(shared)
        self.result_cache = ResultCache(self.namespace, self.cache, self._available.values())
        self.data_cache = DataCache(self.namespace, self.cache)
        self.rate_limit = RateLimit(RateLimiter(self.namespace, shared), rate_limit_per_min, on_limit_outage)
        if isinstance(middleware, str) or not all(callable(m) for m in middleware):
            raise DefinitionError("middleware is a list of async (call, call_next) callables")
        self.middleware: tuple[Middleware, ...] = tuple(middleware)
        self._listing = types.ListToolsResult(tools=[self.compiled[n].wire for n in listed])
        if lint != "off":
            self._lint_self(lint, lint_profiles)
        if not isinstance(max_threads, int) or max_threads < 1:
            raise DefinitionError(f"max_threads must be a positive integer, got {max_threads!r}")
        self.threads = HandlerThreads(max_threads)
        self._chain = compose(self._stages(), invoke(timeout_s, self.threads))
        self._lookup = self._available.get
        self._lowlevel: LowLevelServer[Any] | None = None
        self.client_log_level: types.LoggingLevel = "debug"

    # --- definition --------------------------------------------------------------------------

    def _stages(self) -> list[Middleware]:
        """The whole chain, outermost first; built-ins a server cannot use are left out."""
        tools = self._available.values()
        stages: list[Middleware] = [record, *self.middleware, require_tool, validate]
        if any(t.cache_ttl_s or (t.mutating and t.category) for t in tools):
            stages.append(self.result_cache)
        if self.rate_limit.default_per_min or any(t.rate_limit_per_min for t in tools):
            stages.append(self.rate_limit)
        return stages

    def _lint_self(self, mode: str, profiles: Sequence[str] | None) -> None:
        from mcpkit.lint import lint_tools  # the linter judges plain JSON; the core only feeds it

        findings = lint_tools(self.list_tools(), profiles=profiles, instructions=self.instructions)
        errors = [f for f in findings if f.severity == "error"]
        for f in findings:
            if f.severity != "info":
                log.warning(
                    "lint %s %s %s: %s (%s)",
                    f.rule,
                    f.tool or "server",
                    f.path,
                    f.message,
                    ", ".join(f.clients),
                )
        if errors and mode == "error":
            listing = "; ".join(f"{f.rule} {f.tool or 'server'}{f.path}: {f.message}" for f in errors[:10])
            raise DefinitionError(
                f"server {self.name!r}: its tools would break clients ({listing}); "
                "fix them or pass lint='warn'"
            )

    async def aclose(self) -> None:
        """Release what the server holds open (the egress connection pool)."""
        await self.egress.aclose()

    async def invalidate(self, tool_pattern: str = "*") -> Invalidated:
        """Drop cached results of tools whose names match the glob; says which entries went."""
        return await self.result_cache.invalidate(tool_pattern)

    def available_tools(self) -> list[Tool]:
        """The tools this deployment serves (listed or not), in definition order."""
        return list(self._available.values())

    def list_tools(self) -> list[dict[str, Any]]:
        """The `tools` of this server's `tools/list`, as plain JSON (what clients see)."""
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in self._listing.tools]

    # --- protocol seam -----------------------------------------------------------------------

    @property
    def lowlevel(self) -> LowLevelServer[Any]:
        """The official SDK's low-level server this server speaks through (built once)."""
        if self._lowlevel is None:
            install_redaction(self.redactor)
            schemas = {n: self.compiled[n].wire.input_schema for n in self._available}
            with warnings.catch_warnings():  # logging/setLevel: deprecated in 2026-07-28, still in 2025-11-25
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                self._lowlevel = LowLevelServer(
                    self.name,
                    version=self.version,
                    title=self.title,
                    instructions=self.instructions,
                    get_tool_input_schema=schemas.get,
                    on_list_tools=self._on_list_tools,
                    on_call_tool=self._on_call_tool,
                    on_set_logging_level=self._on_set_logging_level,
                )
        return self._lowlevel

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return self._listing

    async def _on_set_logging_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        # One threshold per server: notifications to clients are advisory, not operator logs.
        self.client_log_level = params.level
        return types.EmptyResult()

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        client = client_info(ctx)
        principal, groups = authenticated_caller(ctx)
        call = Call(
            call_id=os.urandom(16).hex(),
            name=params.name,
            arguments=params.arguments or {},
            tool=self._lookup(params.name),
            principal=principal,
            groups=groups,
            client=client,
            make_context=lambda c: Context(
                call_id=c.call_id,
                tool=c.name,
                client=c.client,
                principal=c.principal,
                groups=c.groups,
                state=c.state,
                protocol_version=ctx.protocol_version,
                secrets=self.secrets,
                allowed_secrets=self.compiled[c.name].allowed_secrets,
                egress=self.egress,
                session=ctx.session,
                request_id=ctx.request_id,
                min_client_level=self.client_log_level,
                redactor=self.redactor,
                cache=self.data_cache,
            ),
            identity=identity_of(principal) if principal else unauthenticated_identity(ctx),
            redactor=self.redactor,
        )
        outcome = await self._chain(call)
        return outcome.to_wire()  # type: ignore[return-value]  # the SDK serialises dicts as they are

    # --- running -----------------------------------------------------------------------------

    def run_stdio(self) -> None:
        """Serve over stdio until the client closes stdin."""
        from mcpkit.transport.stdio import run_stdio

        run_stdio(self)

    async def serve_stdio(self) -> None:
        """Serve over stdio (async form)."""
        from mcpkit.transport.stdio import serve_stdio

        await serve_stdio(self)

    def http_app(self, **options: Any) -> Starlette:
        """The Streamable HTTP ASGI app of this server (see `mcpkit.transport.http.http_app`)."""
        from mcpkit.transport.http import http_app

        return http_app(self, **options)

    def run_http(self, host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
        """Serve Streamable HTTP on `host:port` (127.0.0.1 by default) until stopped."""
        from mcpkit.transport.http import run_http

        run_http(self, host=host, port=port, **options)
