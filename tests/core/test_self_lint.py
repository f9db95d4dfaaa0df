"""Every server lints its own tools/list when it is built and refuses to start on an error."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from mcpkit import DefinitionError, Server, Tool


class In(BaseModel):
    x: int = 0


def with_raw_schema(schema: dict[str, object]) -> Tool:
    return Tool(
        name="raw", description="Raw schema.", input=In, input_schema=schema, handler=lambda a, c: "ok"
    )


BROKEN = {
    "type": "object",
    "properties": {"tags": {"type": "array"}, "x": {"$ref": "#/$defs/X"}},
    "$defs": {"X": {"type": "integer"}},
}


def test_error_findings_refuse_to_build() -> None:
    with pytest.raises(DefinitionError, match="SL004"):
        Server("s", tools=[with_raw_schema(BROKEN)])


def test_warn_mode_builds_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcpkit.server")
    server = Server("s", tools=[with_raw_schema(BROKEN)], lint="warn")
    assert server.list_tools()[0]["name"] == "raw"
    assert "SL009" in caplog.text
    assert "SL004" in caplog.text


def test_instructions_are_linted_too(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcpkit.server")
    tool = Tool(name="t", description="T.", input=In, handler=lambda a, c: "ok")
    Server("s", instructions="x" * 3000, tools=[tool])  # a warning: Claude Code truncates, nothing breaks
    assert "SL005" in caplog.text
    assert "/instructions" in caplog.text


def test_compiled_tools_lint_clean() -> None:
    from examples.weather import server
    from mcpkit.lint import lint_tools

    assert [f for f in lint_tools(server.list_tools()) if f.severity != "info"] == []
