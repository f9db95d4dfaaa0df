"""mcpkit: build MCP tool servers that every client accepts and no agent can abuse.

The public names load on first use, so `import mcpkit.lint` (the linter judges plain JSON) does not
pay for importing the server core and the SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "Call",
    "CallNext",
    "ClientInfo",
    "Context",
    "DefinitionError",
    "InvalidParams",
    "McpkitError",
    "Middleware",
    "Nullable",
    "Outcome",
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

_HOME = {
    "Call": "mcpkit.pipeline",
    "CallNext": "mcpkit.pipeline",
    "ClientInfo": "mcpkit.context",
    "Context": "mcpkit.context",
    "DefinitionError": "mcpkit.errors",
    "InvalidParams": "mcpkit.errors",
    "McpkitError": "mcpkit.errors",
    "Middleware": "mcpkit.pipeline",
    "Nullable": "mcpkit.schema",
    "Outcome": "mcpkit.result",
    "RateLimited": "mcpkit.errors",
    "Refused": "mcpkit.errors",
    "Server": "mcpkit.server",
    "Tool": "mcpkit.definition",
    "ToolAnnotations": "mcpkit.definition",
    "ToolError": "mcpkit.errors",
    "ToolResult": "mcpkit.result",
    "ToolTimeout": "mcpkit.errors",
    "tool": "mcpkit.definition",
}

if TYPE_CHECKING:
    from mcpkit.context import ClientInfo, Context
    from mcpkit.definition import Tool, ToolAnnotations, tool
    from mcpkit.errors import (
        DefinitionError,
        InvalidParams,
        McpkitError,
        RateLimited,
        Refused,
        ToolError,
        ToolTimeout,
    )
    from mcpkit.pipeline import Call, CallNext, Middleware
    from mcpkit.result import Outcome, ToolResult
    from mcpkit.schema import Nullable
    from mcpkit.server import Server


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'mcpkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
