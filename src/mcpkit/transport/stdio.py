"""Serve an mcpkit server over stdio (the SDK's stdio transport; stdout carries only protocol).

Where stdin and stdout are pipes or sockets (how a client starts a server), the lines are read
and written by the event loop itself (`asyncio` pipe transports) instead of the SDK's default of
one worker-thread hop per line read and two per line written; the descriptors are claimed the
SDK's own way (fd 0 reads the null device and fd 1 goes to stderr while serving, so a handler's
stray output cannot corrupt the wire). Anything else (a file, a terminal) uses the SDK's default.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import anyio
from mcp.server import stdio as sdk_stdio
from mcp.server.stdio import stdio_server

if TYPE_CHECKING:
    from mcpkit.server import Server

__all__ = ["run_stdio", "serve_stdio"]

_MAX_LINE: Final = 1 << 30  # the SDK's own reader has no limit on a message's size either


class _Lines:
    """Stdin's lines as the SDK's transport iterates them, read by the event loop."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Out:
    """Stdout as the SDK's transport writes it (`write`, then `flush`), written by the event loop.

    A write goes straight to the pipe when it has room; `flush` waits until nothing is left in
    the transport's buffer (a full pipe: the client reads slowly), as the SDK's blocking flush did.
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _pipe_like(fd: int, stream: Any) -> bool:
    """Whether `stream` is the process's own `fd` and that is a pipe or socket (what asyncio can watch)."""
    try:
        mode = os.fstat(fd).st_mode
        own = stream.buffer.fileno() == fd
    except (AttributeError, OSError, ValueError):
        return False
    return own and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode))


@asynccontextmanager
async def _loop_streams() -> AsyncIterator[tuple[Any, Any] | None]:
    """(stdin lines, stdout writer) on the event loop, or None where the SDK's default must serve."""
    claim: Callable[..., Any] | None = getattr(sdk_stdio, "_claim_fd", None)
    if (
        sys.platform == "win32"
        or claim is None
        or not (_pipe_like(0, sys.stdin) and _pipe_like(1, sys.stdout))
    ):
        yield None
        return
    loop = asyncio.get_running_loop()
    async with AsyncExitStack() as stack:
        stdin_file, release_in = claim(0, sys.stdin, "rb", sdk_stdio._open_stdin_diversion)
        if release_in is not None:
            stack.callback(release_in)
        stdout_file, release_out = claim(1, sys.stdout, "wb", sdk_stdio._open_stdout_diversion)
        if release_out is not None:
            stack.callback(release_out)
        reader = asyncio.StreamReader(limit=_MAX_LINE, loop=loop)
        rtransport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin_file)
        stack.callback(rtransport.close)
        wtransport, wprotocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout_file)
        stack.callback(os.set_blocking, stdout_file.fileno(), True)  # the restored fd 1 blocks again
        stack.callback(wtransport.close)
        wtransport.set_write_buffer_limits(high=0)  # `flush` returns once the OS has every byte
        writer = asyncio.StreamWriter(wtransport, wprotocol, None, loop)
        yield _Lines(reader), _Out(writer)


async def serve_stdio(server: Server) -> None:
    """Serve `server` on this process's stdin/stdout until the client closes stdin."""
    lowlevel = server.lowlevel
    try:
        async with _loop_streams() as streams, stdio_server(*(streams or ())) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        await server.aclose()


def run_stdio(server: Server) -> None:
    """Blocking form of `serve_stdio`."""
    from mcpkit.threads import shorten_gil_waits

    shorten_gil_waits()
    anyio.run(serve_stdio, server)
