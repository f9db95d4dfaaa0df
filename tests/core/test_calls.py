"""The call pipeline through the official SDK client, in both protocol eras."""

from __future__ import annotations

import json
import logging
import threading
import time

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field

from mcpkit import Context, Server, Tool, ToolError, ToolResult, tool
from mcpkit.errors import INTERNAL_MESSAGE
from mcpkit.testing import connect
from tests.helpers import dump, text_of

pytestmark = pytest.mark.anyio
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])

SECRET_TEXT = "db password hunter2 at /srv/app/config.py: SELECT * FROM customers WHERE ssn = '123'"


class AgeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    age: int = Field(description="Age in years")
    name: str = Field("x", description="Name")


class AgeOut(BaseModel):
    next_year: int


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


async def next_year(args: AgeIn, ctx: Context) -> AgeOut:
    return AgeOut(next_year=args.age + 1)


def thread_name(args: Loose, ctx: Context) -> str:
    return threading.current_thread().name


async def explode(args: Loose, ctx: Context) -> str:
    raise RuntimeError(SECRET_TEXT)


def explode_sync(args: Loose, ctx: Context) -> str:
    raise KeyError(SECRET_TEXT)


async def refuse(args: Loose, ctx: Context) -> str:
    raise ToolError("That account is closed.", retryable=False, data={"hint": "open one"}, expose_data=True)


async def wrong_output(args: Loose, ctx: Context) -> dict[str, object]:
    return {"next_year": "soon"}


async def slow(args: Loose, ctx: Context) -> str:
    await anyio.sleep(5)
    return "late"


def blocking(args: Loose, ctx: Context) -> str:
    time.sleep(3)
    return "late"


async def rich(args: Loose, ctx: Context) -> ToolResult:
    return ToolResult(text="| a |\n|---|\n| 1 |", structured=AgeOut(next_year=1))


@tool()
def shout(word: str, times: int = 1) -> str:
    """Repeat a word in capitals."""
    return " ".join([word.upper()] * times)


def make_server() -> Server:
    return Server(
        "calls",
        tools=[
            Tool(
                name="next_year", description="Add one year.", input=AgeIn, output=AgeOut, handler=next_year
            ),
            Tool(
                name="thread_name",
                description="Where it ran.",
                input=Loose,
                strict=False,
                handler=thread_name,
            ),
            Tool(name="explode", description="Fails.", input=Loose, strict=False, handler=explode),
            Tool(name="explode_sync", description="Fails.", input=Loose, strict=False, handler=explode_sync),
            Tool(name="refuse", description="Refuses.", input=Loose, strict=False, handler=refuse),
            Tool(
                name="wrong_output",
                description="Breaks its contract.",
                input=Loose,
                strict=False,
                output=AgeOut,
                handler=wrong_output,
            ),
            Tool(
                name="slow", description="Too slow.", input=Loose, strict=False, handler=slow, timeout_s=0.2
            ),
            Tool(
                name="blocking",
                description="Too slow, sync.",
                input=Loose,
                strict=False,
                handler=blocking,
                timeout_s=0.2,
            ),
            Tool(
                name="rich",
                description="Markdown plus data.",
                input=Loose,
                strict=False,
                output=AgeOut,
                handler=rich,
            ),
            Tool(name="hidden", description="Not allowed.", input=Loose, strict=False, handler=thread_name),
            shout,
        ],
        allowed_tools=[
            "next_year",
            "thread_name",
            "explode",
            "explode_sync",
            "refuse",
            "wrong_output",
            "slow",
            "blocking",
            "rich",
            "shout",
        ],
    )


@MODES
async def test_structured_result_mirrored_in_text_and_meta_outside(mode: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("next_year", {"age": 41})
    assert not result.is_error
    assert result.structured_content == {"next_year": 42}
    assert json.loads(text_of(result)) == {"next_year": 42}
    meta = result.meta or {}
    assert len(meta["mcpkit/callId"]) == 32 and meta["mcpkit/cached"] is False
    assert "callId" not in json.dumps(result.structured_content)


@MODES
async def test_string_is_not_an_integer_and_unknown_fields_are_refused(mode: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        as_string = await client.call_tool("next_year", {"age": "25"})
        extra = await client.call_tool("next_year", {"age": 25, "admin": True})
        missing = await client.call_tool("next_year", {})
        loose = await client.call_tool("thread_name", {"a": 1, "anything": 2})
    assert as_string.is_error and text_of(as_string).startswith("INVALID_PARAMS: ")
    assert "age" in text_of(as_string) and "integer" in text_of(as_string)
    assert extra.is_error and "admin" in text_of(extra)
    assert missing.is_error and "age" in text_of(missing)
    assert not loose.is_error  # a model that allows extra fields gets them
    assert (as_string.meta or {})["mcpkit/error"]["code"] == "INVALID_PARAMS"


@MODES
async def test_invalid_params_do_not_echo_large_input(mode: str) -> None:
    huge = "A" * 200_000
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("next_year", {"age": huge, huge[:5000]: 1})
    assert result.is_error
    assert len(text_of(result)) < 600
    assert "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" not in dump(result)


@MODES
async def test_unknown_and_unlisted_tools_are_protocol_errors(mode: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        listed = {t.name for t in (await client.list_tools()).tools}
        for name in ("nope", "hidden"):
            with pytest.raises(MCPError) as info:
                await client.call_tool(name, {"a": 1})
            assert info.value.error.code == -32602
            assert "Unknown tool" in info.value.error.message
    assert "hidden" not in listed and "next_year" in listed


@MODES
@pytest.mark.parametrize("name", ["explode", "explode_sync"])
async def test_exceptions_become_one_safe_sentence(
    mode: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool(name, {"a": 1})
    wire = dump(result)
    assert result.is_error
    assert text_of(result) == f"INTERNAL: {INTERNAL_MESSAGE}"
    for leak in (
        "hunter2",
        "/srv/app",
        "SELECT",
        "customers",
        "RuntimeError",
        "KeyError",
        "Traceback",
        "ssn = '123'",  # not bare "123": a random call id may contain it
    ):
        assert leak not in wire
    call_id = (result.meta or {})["mcpkit/callId"]
    operator_log = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert call_id in operator_log and "/srv/app" in caplog.text  # the operator keeps the detail


@MODES
async def test_tool_error_keeps_code_message_and_data(mode: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("refuse", {"a": 1})
    assert result.is_error and text_of(result) == "TOOL_ERROR: That account is closed."
    assert (result.meta or {})["mcpkit/error"] == {
        "code": "TOOL_ERROR",
        "retryable": False,
        "data": {"hint": "open one"},
    }


@MODES
async def test_output_contract_break_is_internal(mode: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("wrong_output", {"a": 1})
    assert result.is_error and "INTERNAL" in text_of(result) and "soon" not in dump(result)


@MODES
@pytest.mark.parametrize("name", ["slow", "blocking"])
async def test_deadline_returns_timeout_and_server_keeps_answering(mode: str, name: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        started = time.monotonic()
        result = await client.call_tool(name, {"a": 1})
        elapsed = time.monotonic() - started
        after = await client.call_tool("next_year", {"age": 1})
    assert result.is_error and (result.meta or {})["mcpkit/error"]["code"] == "TIMEOUT"
    assert (result.meta or {})["mcpkit/error"]["retryable"] is True
    assert elapsed < 2.0
    assert after.structured_content == {"next_year": 2}


@MODES
async def test_sync_handlers_run_off_the_event_loop(mode: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("thread_name", {"a": 1})
    assert text_of(result) != threading.main_thread().name


@MODES
async def test_explicit_text_with_structured_content(mode: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("rich", {"a": 1})
    assert text_of(result).startswith("| a |") and result.structured_content == {"next_year": 1}


@MODES
async def test_decorator_tool_is_strict(mode: str) -> None:
    async with connect(make_server(), mode=mode) as client:  # type: ignore[arg-type]
        ok = await client.call_tool("shout", {"word": "hey", "times": 2})
        bad = await client.call_tool("shout", {"word": "hey", "times": "2"})
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert text_of(ok) == "HEY HEY"
    assert bad.is_error
    assert listed["shout"].description == "Repeat a word in capitals."
    assert listed["shout"].input_schema["required"] == ["word"]


async def test_each_call_gets_a_unique_id_in_its_operator_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcpkit.calls")
    async with connect(make_server()) as client:
        results = [await client.call_tool("next_year", {"age": i}) for i in range(20)]
        await client.call_tool("refuse", {"a": 1})
    ids = [(r.meta or {})["mcpkit/callId"] for r in results]
    assert len(set(ids)) == 20
    records = [r.call for r in caplog.records if hasattr(r, "call")]  # type: ignore[attr-defined]
    by_id = {rec["call_id"]: rec for rec in records}
    for call_id in ids:
        assert by_id[call_id]["tool"] == "next_year" and by_id[call_id]["outcome"] == "OK"
        assert by_id[call_id]["client"].startswith("session:")  # the connection, never the clientInfo name
    assert any(rec["outcome"] == "TOOL_ERROR" for rec in records)


async def test_listed_annotations_have_conservative_defaults() -> None:
    async with connect(make_server()) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    ann = tools["next_year"].annotations
    assert ann is not None and ann.read_only_hint is True and ann.destructive_hint is None
    assert ann.open_world_hint is True
