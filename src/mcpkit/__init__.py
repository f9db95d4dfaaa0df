"""mcpkit: build MCP tool servers that every client accepts and no agent can abuse."""

__all__ = [
    "ClientInfo",
    "Context",
    "DefinitionError",
    "InvalidParams",
    "McpkitError",
    "RateLimited",
    "Refused",
    "Server",
    "Tool",
    "ToolAnnotations",
    "ToolError",
    "ToolResult",
    "ToolTimeout",
    "tool",
]

from mcpkit.context import ClientInfo, Context
from mcpkit.errors import (
    DefinitionError,
    InvalidParams,
    McpkitError,
    RateLimited,
    Refused,
    ToolError,
    ToolTimeout,
)
from mcpkit.result import ToolResult
from mcpkit.server import Server
from mcpkit.tool import Tool, ToolAnnotations, tool
