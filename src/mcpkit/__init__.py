"""mcpkit: build MCP tool servers that every client accepts and no agent can abuse."""

__all__ = [
    "DefinitionError",
    "InvalidParams",
    "McpkitError",
    "RateLimited",
    "Refused",
    "ToolError",
    "ToolTimeout",
]

from mcpkit.errors import DefinitionError, InvalidParams, McpkitError, RateLimited, Refused, ToolError, ToolTimeout
