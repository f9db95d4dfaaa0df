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


# --- mcpkit lint --config: a client's whole configuration -------------------------------------------

PY = sys.executable
NPM_MEMORY = Path(__file__).resolve().parents[2] / ".tools" / "node_modules" / ".bin" / "mcp-server-memory"
LONG_TOOL = "a_tool_name_long_enough_to_overflow_claude_codes_sixty_four"


def _claude_code_config(tmp_path: Path, http_url: str) -> Path:
    servers: dict[str, Any] = {
        "fixture-a": {"command": PY, "args": [str(SERVER)]},
        "fixture-b": {
            "command": PY,
            "args": [str(SERVER)],
            "env": {"LINT_FIXTURE_EXTRA_TOOL": "${LINT_TEST_UNSET_VAR:-" + LONG_TOOL + "}"},
        },
        "remote": {"type": "http", "url": http_url, "headers": {"Authorization": TOKEN}},
        "broken": {"command": PY, "args": [str(SERVER), "--exit"]},
    }
    if NPM_MEMORY.exists():  # a real npm reference server, where `make npm-tools` installed one
        servers["memory"] = {"command": str(NPM_MEMORY)}
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_config_lints_every_server_with_its_key_and_across_servers(
    http_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _claude_code_config(tmp_path, http_url)
    code, body, err = _run(capsys, "--config", str(config), "--format", "json", "--timeout", "60")
    assert body is not None, err
    assert body["client"] == "claude-code" and code == 1
    by_key = {s["key"]: s for s in body["servers"]}
    assert by_key["fixture-a"]["tools"] == 8 and by_key["remote"]["tools"] == 8
    assert by_key["fixture-b"]["tools"] == 9
    # The broken server is reported with its own stderr, and the others were still linted.
    assert "refusing to start" in by_key["broken"]["error"] and "broken" in err
    # SL008 used the real key: mcp__fixture-b__<tool> is over 64, and only there.
    long = [f for f in by_key["fixture-b"]["findings"] if f["rule"] == "SL008"]
    assert long and "mcp__fixture-b__" + LONG_TOOL in long[0]["message"] and long[0]["severity"] == "error"
    assert not [f for f in by_key["fixture-a"]["findings"] if f["rule"] == "SL008"]
    # Across servers: the fixtures' tools collide by name (a note for Claude Code, which prefixes).
    collisions = {f["tool"] for f in body["across"] if f["rule"] == "SL027"}
    assert {"tool_0", "tool_7"} <= collisions
    if NPM_MEMORY.exists():
        assert any(f["rule"] == "SL021" for f in by_key["memory"]["findings"])


def test_config_for_cursor_counts_the_budget_over_all_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / ".cursor"
    folder.mkdir()
    many = {"LINT_FIXTURE_TOOL_COUNT": "45"}
    servers = {f"s{i}": {"command": PY, "args": [str(SERVER)], "env": many} for i in range(2)}
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    code, out, _ = (
        main(["lint", "--config", str(folder / "mcp.json"), "--timeout", "60"]),
        *capsys.readouterr(),
    )
    assert "cursor configuration, 2 server(s)" in out
    assert "90 tools across 2 servers, over 80" in out  # SL014 over Cursor's 80, as a warning
    assert "SL027 [warning]" in out  # Cursor does not prefix: collisions are warnings there
    assert code == 1  # SL003 on tool_4 is an error for Cursor


def test_vscode_config_reads_servers_and_inputs(
    http_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / ".vscode"
    folder.mkdir()
    config = {
        "inputs": [{"type": "promptString", "id": "token", "description": "API token", "password": True}],
        "servers": {
            "remote": {"type": "http", "url": http_url, "headers": {"Authorization": "${input:token}"}},
            "local": {"type": "stdio", "command": PY, "args": ["${workspaceFolder}/server.py"]},
        },
    }
    (folder / "mcp.json").write_text(json.dumps(config))
    (tmp_path / "server.py").write_text(SERVER.read_text())
    monkeypatch.setenv("MCPKIT_INPUT_token", TOKEN)
    _, body, err = _run(capsys, "--config", str(folder / "mcp.json"), "--format", "json", "--timeout", "60")
    assert body is not None, err
    assert body["client"] == "vscode"
    assert [(s["key"], s.get("tools")) for s in body["servers"]] == [("remote", 8), ("local", 8)]
    assert any(f["rule"] == "SL004" for s in body["servers"] for f in s["findings"])  # VS Code's profile


def test_a_prompted_input_that_is_not_supplied_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / ".vscode"
    folder.mkdir()
    config = {
        "inputs": [{"type": "promptString", "id": "key"}],
        "servers": {"s": {"command": PY, "args": [str(SERVER)], "env": {"KEY": "${input:key}"}}},
    }
    (folder / "mcp.json").write_text(json.dumps(config))
    _, out, _ = (
        main(["lint", "--config", str(folder / "mcp.json"), "--timeout", "60"]),
        *capsys.readouterr(),
    )
    assert "set MCPKIT_INPUT_key" in out


def test_a_config_without_servers_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"globalShortcut": "Ctrl+Space"}))
    assert main(["lint", "--config", str(path)]) == 2
    assert "no servers" in capsys.readouterr().err
