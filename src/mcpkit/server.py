"""The mcpkit `Server`: validates its definition eagerly, then serves it over the official SDK."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server as LowLevelServer
from mcp.shared.exceptions import MCPDeprecationWarning

from mcpkit.context import ClientInfo, Context, Egress
from mcpkit.errors import DefinitionError
from mcpkit.logs import Redactor, install_redaction
from mcpkit.pipeline import Call, Stage, compose, invoke, lookup, record, validate
from mcpkit.policy import Policy, ToolSelection
from mcpkit.schema import CompiledSchema, compile_model
from mcpkit.secrets import SecretStore
from mcpkit.tool import Tool

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["CompiledTool", "Server"]

DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """A tool with its compiled schemas and its wire form."""

    tool: Tool
    wire: types.Tool
    recursive_defs: tuple[str, ...]
    allowed_secrets: frozenset[str]


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
        secrets: Secret names every tool of this server may read.
        secrets_dir: Where secret files live (default: `$MCPKIT_SECRETS_DIR`).
        egress: The guarded HTTP client handlers reach through `ctx.fetch`.
        environ: The environment to read `MCPKIT_*` settings from (default: `os.environ`).
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
        secrets: Sequence[str] = (),
        secrets_dir: str | Path | None = None,
        egress: Egress | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise DefinitionError("a server needs a name")
        self.name, self.version, self.title, self.instructions = name, version, title, instructions
        self.timeout_s = timeout_s
        self.redactor = Redactor()
        self.compiled: dict[str, CompiledTool] = {}
        seen: dict[str, str] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise DefinitionError(f"tools must be mcpkit.Tool instances, got {type(t).__name__}")
            folded = t.name.casefold()
            if folded in seen:
                other = seen[folded]
                why = (
                    "twice"
                    if other == t.name
                    else f"as {other!r} and {t.name!r} (names differing only in case)"
                )
                raise DefinitionError(f"server {name!r}: tool name defined {why}; tool names must be unique")
            seen[folded] = t.name
            self.compiled[t.name] = _compile(t, server_secrets=frozenset(secrets))
        self.selection = ToolSelection.build(
            self.compiled.values(),
            allowed_tools=allowed_tools,
            denied_categories=denied_categories,
            toolsets=toolsets,
            enabled_toolsets=enabled_toolsets,
            environ=environ,
        )
        declared = set(secrets).union(*(c.allowed_secrets for c in self.compiled.values()))
        self.secrets = SecretStore(
            sorted(declared), redactor=self.redactor, secrets_dir=secrets_dir, environ=environ
        )
        self.egress = egress
        self.policy = Policy()
        self._available = {n: self.compiled[n].tool for n in self.selection.available}
        self._listing = types.ListToolsResult(tools=[self.compiled[n].wire for n in self.selection.listed])
        self._chain = compose(self._stages(), invoke(timeout_s))
        self._lowlevel: LowLevelServer[Any] | None = None
        self.client_log_level: types.LoggingLevel = "debug"

    # --- definition --------------------------------------------------------------------------

    def _stages(self) -> list[Stage]:
        return [
            record,
            lookup(self._available),
            *self.policy.before_validation(),
            validate,
            *self.policy.after_validation(),
        ]

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
        client = _client_info(ctx)
        principal = _principal(ctx)
        call = Call(
            call_id=os.urandom(16).hex(),
            name=params.name,
            arguments=params.arguments or {},
            make_context=lambda c: Context(
                call_id=c.call_id,
                tool=c.name,
                client=client,
                principal=principal,
                protocol_version=ctx.protocol_version,
                secrets=self.secrets,
                allowed_secrets=self.compiled[c.name].allowed_secrets,
                egress=self.egress,
                session=ctx.session,
                request_id=ctx.request_id,
                min_client_level=self.client_log_level,
            ),
            identity=principal or (f"{client.name}/{client.version}" if client else "anonymous"),
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


def _compile(t: Tool, *, server_secrets: frozenset[str]) -> CompiledTool:
    inp = compile_model(t.input, mode="validation", what=f"tool {t.name!r} input")
    if t.input_schema is not None:
        if t.input_schema.get("type") != "object":
            raise DefinitionError(f'tool {t.name!r}: input_schema needs "type": "object" at the root')
        inp = CompiledSchema(dict(t.input_schema))
    out = compile_model(t.output, mode="serialization", what=f"tool {t.name!r} output") if t.output else None
    wire = types.Tool(
        name=t.name,
        title=t.title,
        description=t.description,
        input_schema=inp.schema,
        output_schema=out.schema if out else None,
        annotations=t.listed_annotations(),
    )
    recursive = inp.recursive + (out.recursive if out else ())
    return CompiledTool(t, wire, recursive, server_secrets | frozenset(t.secrets))


def _client_info(ctx: ServerRequestContext[Any]) -> ClientInfo | None:
    params = ctx.session.client_params
    if params is None:
        return None
    info = params.client_info
    return ClientInfo(name=info.name[:128], version=(info.version or "")[:64])


def _principal(ctx: ServerRequestContext[Any]) -> str | None:
    """The authenticated caller of an HTTP request (set by the auth middleware), else None."""
    scope = getattr(ctx.request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if user is not None and getattr(user, "is_authenticated", False):
        name = getattr(user, "display_name", None) or getattr(user, "username", None)
        return str(name)[:128] if name else None
    return None
