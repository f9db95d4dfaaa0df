"""`mcpkit lint --stdio` and `--url` against real servers: a stdio subprocess and uvicorn on loopback."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.cli import main
from tests.lint import stdio_server

SERVER = Path(stdio_server.__file__).resolve()
STDIO = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"
TOKEN = "Bearer lint-test-token"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any] | None, str]:
    code = main(["lint", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip().startswith("{") else None), err


def _check_listing(body: dict[str, Any]) -> None:
    # 8 tools served 3 per page: all three pages were fetched.
    assert body["tools"] == len(stdio_server.TOOLS) == 8
    found = {(f["rule"], f["tool"], f["path"]) for f in body["findings"]}
    assert ("SL003", "tool_4", "/inputSchema/anyOf") in found
    assert ("SL004", "tool_6", "/inputSchema/properties/ids") in found
    assert ("SL005", None, "/instructions") in found  # the server's instructions came through initialize


def test_stdio_server_pages_and_instructions(capsys: pytest.CaptureFixture[str]) -> None:
    code, body, err = _run(capsys, "--stdio", STDIO, "--format", "json", "--timeout", "60")
    assert body is not None, err
    assert code == 1
    _check_listing(body)


def test_stdio_uses_the_servers_name_for_prefix_budgets(capsys: pytest.CaptureFixture[str]) -> None:
    code, body, _ = _run(
        capsys, "--stdio", STDIO, "--format", "json", "--profile", "claude-code", "--timeout", "60"
    )
    assert body is not None and code == 1
    # "lint-fixture" is 12 characters: mcp__lint-fixture__tool_0 fits in 64, so no SL008.
    assert not [f for f in body["findings"] if f["rule"] == "SL008"]


def test_a_server_that_will_not_start_exits_2_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, body, err = _run(capsys, "--stdio", f"{STDIO} --exit", "--timeout", "60")
    assert code == 2 and body is None
    assert "refusing to start" in err  # the server's own stderr is shown


def test_a_missing_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--stdio", "/nonexistent/mcp-server --flag", "--timeout", "30")
    assert code == 2 and "/nonexistent/mcp-server" in err


def test_an_empty_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--stdio", "   ")
    assert code == 2 and "needs a command" in err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.types import ASGIApp, Receive, Scope, Send

    inner = stdio_server.build().streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")

    class RequireToken:
        """401 unless the request carries the test's Authorization header."""

        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and Request(scope).headers.get("authorization") != TOKEN:
                response: Response = JSONResponse({"error": "unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
            await self.app(scope, receive, send)

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(RequireToken(inner), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_url_with_header(http_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, body, err = _run(
        capsys, "--url", http_url, "--header", f"Authorization: {TOKEN}", "--format", "json"
    )
    assert body is not None, err
    assert code == 1
    _check_listing(body)


def test_url_without_the_header_is_refused_and_exits_2(
    http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, body, err = _run(capsys, "--url", http_url, "--timeout", "30")
    assert code == 2 and body is None
    assert http_url in err


def test_malformed_header_exits_2(http_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--url", http_url, "--header", "no-colon-here")
    assert code == 2 and "Name: value" in err


def test_nothing_listening_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "--url", f"http://127.0.0.1:{_free_port()}/mcp", "--timeout", "20")
    assert code == 2 and "127.0.0.1" in err


def test_typed_fallback_lists_the_same_tools(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcpkit.lint import _remote

    calls: list[object] = []
    original = _remote._list_page

    async def spy(session: Any, params: dict[str, Any] | None) -> dict[str, Any]:
        calls.append(params)
        return await original(session, params)

    monkeypatch.setattr(_remote, "RAW_LISTING", False)
    monkeypatch.setattr(_remote, "_list_page", spy)
    code, body, err = _run(capsys, "--stdio", STDIO, "--format", "json", "--timeout", "60")
    assert body is not None, err
    assert code == 1
    _check_listing(body)
    assert calls == [None, {"cursor": "3"}, {"cursor": "6"}]


def test_the_server_sees_the_callers_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LINT_FIXTURE_EXTRA_TOOL", "from_env")
    code, body, _ = _run(capsys, "--stdio", STDIO, "--format", "json", "--timeout", "60")
    assert body is not None and body["tools"] == 9 and code == 1
