"""Fetching a live server's tool list through the official MCP SDK client (imported only here).

The SDK's typed `list_tools()` validates each tool and would reject the whole page on exactly the
shapes this linter exists to report (a root without `"type": "object"`, say), so the session is
initialised through the SDK and `tools/list` pages are then requested on its own dispatcher, raw.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from mcpkit.lint._load import InputError, ToolList

#: A paginator that never ends cannot hang the linter.
MAX_PAGES = 1000
#: Read `tools/list` raw through the session's dispatcher (off: the SDK's typed, validating call).
RAW_LISTING = True


class ServerError(Exception):
    """The server could not be started, reached or initialised (exit code 2 in the CLI)."""


def fetch_stdio(
    command: str | Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float = 30.0,
) -> ToolList:
    """Start `command` as a stdio MCP server, initialise, page through `tools/list`, stop it.

    Args:
        command: a shell-quoted command line, or the argv list itself.
        env: variables added to the caller's environment for the server (a config file's `env`).
        cwd: the server's working directory.

    Raises:
        ServerError: the command is empty, will not start, exits, or does not answer in time.
    """
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ServerError("--stdio needs a command")
    shown = command if isinstance(command, str) else shlex.join(argv)
    from mcp.client.stdio import StdioServerParameters, stdio_client

    # The user runs the command as from their shell, so it sees their environment (API keys and all),
    # not only the SDK's short safe list.
    params = StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, **(env or {})}, cwd=cwd)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:

        async def run() -> ToolList:
            async with stdio_client(params, errlog=errlog) as (read, write):
                return await _session(read, write, f"stdio:{shown}")

        try:
            return _run(run, timeout, f"server {shown!r}")
        except ServerError as exc:
            errlog.seek(0)
            tail = errlog.read()[-800:].strip()
            raise ServerError(f"{exc}" + (f"\nserver stderr:\n{tail}" if tail else "")) from None


def fetch_http(url: str, *, headers: Sequence[str] = (), timeout: float = 30.0) -> ToolList:
    """Connect to a Streamable HTTP MCP server at `url` with extra `Name: value` headers and list its tools.

    Raises:
        ServerError: a malformed header, or the server cannot be reached or initialised.
    """
    parsed: dict[str, str] = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise ServerError(f"--header {header!r} is not 'Name: value'")
        parsed[name.strip()] = value.strip()
    import anyio  # noqa: F401  (the transport needs it; imported here to fail early)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> ToolList:
        async with (
            httpx2.AsyncClient(headers=parsed, timeout=timeout, follow_redirects=False) as client,
            streamable_http_client(url, http_client=client) as (read, write),
        ):
            return await _session(read, write, url)

    return _run(run, timeout, f"server at {url}")


def _run(func: Any, timeout: float, what: str) -> ToolList:
    import anyio

    async def bounded() -> ToolList:
        with anyio.fail_after(timeout):
            result: ToolList = await func()
            return result

    try:
        return anyio.run(bounded)
    except TimeoutError:
        raise ServerError(f"{what} did not answer within {timeout:g} s") from None
    except InputError:
        raise
    except ServerError:
        raise
    except BaseException as exc:  # SDK errors arrive wrapped in exception groups
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise ServerError(f"{what} failed: {_describe(exc)}") from None


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


async def _session(read: Any, write: Any, source: str) -> ToolList:
    from mcp import ClientSession

    async with ClientSession(read, write) as session:
        init = await session.initialize()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            params: dict[str, Any] | None = {"cursor": cursor} if cursor is not None else None
            raw = await _list_page(session, params)
            page = raw.get("tools")
            if not isinstance(page, list):
                raise InputError(f"{source}: tools/list result has no tools array")
            for index, tool in enumerate(page):
                if not isinstance(tool, dict):
                    raise InputError(f"{source}: tools/list page item {index} is not an object")
            tools.extend(page)
            nxt = raw.get("nextCursor")
            if not isinstance(nxt, str) or not nxt:
                break
            if nxt in seen:
                raise InputError(f"{source}: tools/list repeats cursor {nxt!r}")
            seen.add(nxt)
            cursor = nxt
        else:
            raise InputError(f"{source}: tools/list did not end within {MAX_PAGES} pages")
        info = init.server_info
        name = info.name if info is not None else None
        dumped = info.model_dump(mode="json", by_alias=True, exclude_none=True) if info is not None else None
        return ToolList(
            tools, instructions=init.instructions, server_name=name, source=source, server_info=dumped
        )


async def _list_page(session: Any, params: dict[str, Any] | None) -> dict[str, Any]:
    """One raw `tools/list` result, sent with the session's negotiated headers and stamps.

    Falls back to the typed `list_tools()` (which refuses malformed tools) if the SDK no longer has
    the private dispatcher this reads, or when `RAW_LISTING` is off.
    """
    stamp = getattr(session, "_stamp", None)
    dispatcher: Any = getattr(session, "_dispatcher", None)
    if not RAW_LISTING or stamp is None or not hasattr(dispatcher, "send_raw_request"):
        from mcp.types import PaginatedRequestParams

        typed = await session.list_tools(params=PaginatedRequestParams(**params) if params else None)
        dumped: dict[str, Any] = typed.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped
    data: dict[str, Any] = {"method": "tools/list"}
    if params is not None:
        data["params"] = params
    opts: dict[str, Any] = {}
    stamp(data, opts)  # the SDK's per-request protocol headers
    result: dict[str, Any] = await dispatcher.send_raw_request("tools/list", data.get("params"), opts)
    return result
