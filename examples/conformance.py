"""The fixture tools the official conformance suite calls, built with mcpkit's public API.

Run: python examples/conformance.py [PORT]   (Streamable HTTP on 127.0.0.1, endpoint /mcp)
Then: npx @modelcontextprotocol/conformance server --url http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import base64
import sys
import warnings

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import BaseModel, ConfigDict, Field

from mcpkit import Context, Server, Tool, ToolError, ToolResult

# A 1x1 red PNG and a 1-sample WAV: the smallest valid media the scenarios ask for.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
        "0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
    )
).decode()
WAV = base64.b64encode(
    b"RIFF"
    + (38).to_bytes(4, "little")
    + b"WAVEfmt "
    + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little")
    + (1).to_bytes(2, "little")
    + (8000).to_bytes(4, "little")
    + (16000).to_bytes(4, "little")
    + (2).to_bytes(2, "little")
    + (16).to_bytes(2, "little")
    + b"data"
    + (2).to_bytes(4, "little")
    + b"\x00\x00"
).decode()


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptArgs(BaseModel):
    prompt: str = Field(description="The prompt to send to the LLM")


class MessageArgs(BaseModel):
    message: str = Field(description="The message to show the user")


class Address(BaseModel):
    street: str | None = None
    city: str | None = None


class SchemaArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    address: Address | None = None


def image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


async def with_logging(args: NoArgs, ctx: Context) -> str:
    for i, text in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if i:
            await anyio.sleep(0.05)
        await ctx.notify_client("info", text)
    return "Logging test completed"


async def with_progress(args: NoArgs, ctx: Context) -> str:
    for i, step in enumerate((0, 50, 100)):
        if i:
            await anyio.sleep(0.05)
        await ctx.report_progress(step, 100)
    return "Progress test completed"


async def sampling(args: PromptArgs, ctx: Context) -> str:
    if ctx.session is None or not ctx.session.check_client_capability(
        types.ClientCapabilities(sampling=types.SamplingCapability())
    ):
        raise ToolError("This client does not support sampling.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        reply = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=args.prompt))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
    text = reply.content.text if isinstance(reply.content, types.TextContent) else str(reply.content)
    return f"LLM response: {text}"


async def _elicit(ctx: Context, message: str, schema: dict[str, object]) -> types.ElicitResult:
    if ctx.session is None:
        raise ToolError("This client does not support elicitation.")
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


async def elicitation(args: MessageArgs, ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await _elicit(ctx, args.message, schema)
    return f"User response: action={result.action}, content={result.content}"


async def elicitation_defaults(args: NoArgs, ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    result = await _elicit(ctx, "Please review and update the form fields with defaults", schema)
    return f"Elicitation completed: action={result.action}, content={result.content}"


async def elicitation_enums(args: NoArgs, ctx: Context) -> str:
    titled = [{"const": f"value{i}", "title": t} for i, t in enumerate(("First Option", "Second Option"), 1)]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2"]}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                    ]
                },
            },
        },
    }
    result = await _elicit(ctx, "Please select options", schema)
    return f"Elicitation completed: action={result.action}, content={result.content}"


def fail(args: NoArgs, ctx: Context) -> str:
    raise ToolError("This tool intentionally returns an error for testing")


def simple(text: str) -> Tool:
    return Tool(
        name="test_simple_text", description="Returns simple text.", input=NoArgs, handler=lambda a, c: text
    )


def content_tool(name: str, description: str, *blocks: types.ContentBlock, text: str | None = None) -> Tool:
    return Tool(
        name=name,
        description=description,
        input=NoArgs,
        handler=lambda a, c: ToolResult(text=text, content=list(blocks)),
    )


SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

server = Server(
    "mcpkit-conformance",
    version="1.0.0",
    instructions="Fixture tools for the MCP conformance suite.",
    lint="warn",  # json_schema_2020_12_tool keeps a $ref on purpose: the scenario checks it is preserved
    tools=[
        simple("This is a simple text response for testing."),
        content_tool("test_image_content", "Returns an image.", image()),
        content_tool(
            "test_audio_content",
            "Returns audio.",
            types.AudioContent(type="audio", data=WAV, mime_type="audio/wav"),
        ),
        content_tool(
            "test_embedded_resource",
            "Returns an embedded resource.",
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="test://embedded-resource",
                    mime_type="text/plain",
                    text="This is an embedded resource content.",
                ),
            ),
        ),
        content_tool(
            "test_multiple_content_types",
            "Returns text, an image and a resource.",
            image(),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="test://mixed-content-resource",
                    mime_type="application/json",
                    text='{"test":"data","value":123}',
                ),
            ),
            text="Multiple content types test:",
        ),
        Tool(
            name="test_tool_with_logging",
            description="Sends three log notifications.",
            input=NoArgs,
            handler=with_logging,
        ),
        Tool(
            name="test_tool_with_progress",
            description="Reports progress.",
            input=NoArgs,
            handler=with_progress,
        ),
        Tool(name="test_error_handling", description="Always fails.", input=NoArgs, handler=fail),
        Tool(name="test_sampling", description="Asks the client's LLM.", input=PromptArgs, handler=sampling),
        Tool(name="test_elicitation", description="Asks the user.", input=MessageArgs, handler=elicitation),
        Tool(
            name="test_elicitation_sep1034_defaults",
            description="Elicitation with defaults.",
            input=NoArgs,
            handler=elicitation_defaults,
        ),
        Tool(
            name="test_elicitation_sep1330_enums",
            description="Elicitation with enums.",
            input=NoArgs,
            handler=elicitation_enums,
        ),
        Tool(
            name="json_schema_2020_12_tool",
            description="Tool with JSON Schema 2020-12 features",
            input=SchemaArgs,
            input_schema=SCHEMA_2020_12,
            handler=lambda a, c: "ok",
        ),
    ],
)

if __name__ == "__main__":
    server.run_http(port=int(sys.argv[1]) if len(sys.argv) > 1 else 8765)
