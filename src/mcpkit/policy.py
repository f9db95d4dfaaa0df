"""Which tools a deployment serves; the per-call policy is middleware (`RateLimit`, `ResultCache`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcpkit.errors import DefinitionError

if TYPE_CHECKING:
    from mcpkit.server import CompiledTool

__all__ = ["ToolSelection", "env_list"]

ALLOWED_TOOLS_ENV = "MCPKIT_ALLOWED_TOOLS"
DENIED_CATEGORIES_ENV = "MCPKIT_DENIED_CATEGORIES"
TOOLSETS_ENV = "MCPKIT_TOOLSETS"


def env_list(environ: Mapping[str, str], name: str) -> list[str] | None:
    """A comma-separated environment variable as a list; None when unset or blank."""
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    return [item.strip() for item in raw.split(",") if item.strip()]


@dataclass(frozen=True, slots=True)
class ToolSelection:
    """The tools a deployment serves: `available` may be called, `listed` appear in `tools/list`."""

    available: tuple[str, ...]
    listed: tuple[str, ...]

    @classmethod
    def build(
        cls,
        tools: Iterable[CompiledTool],
        *,
        allowed_tools: Sequence[str] | None,
        denied_categories: Sequence[str] | None,
        toolsets: Mapping[str, Sequence[str]] | None,
        enabled_toolsets: Sequence[str] | None,
        environ: Mapping[str, str] | None,
    ) -> ToolSelection:
        """Apply the allowlist, the category denylist and the toolsets, from code and environment.

        The environment can only narrow what the code allows. Unknown names are definition errors:
        a typo in an allowlist must not silently hide every tool.
        """
        env = os.environ if environ is None else environ
        by_name = {c.tool.name: c for c in tools}
        names = list(by_name)
        for source, allow in (
            ("allowed_tools", allowed_tools),
            (ALLOWED_TOOLS_ENV, env_list(env, ALLOWED_TOOLS_ENV)),
        ):
            if allow is None:
                continue
            unknown = sorted(set(allow) - set(by_name))
            if unknown:
                raise DefinitionError(
                    f"{source} names tools this server does not define: {', '.join(unknown)}"
                )
            names = [n for n in names if n in allow]
        denied = set(denied_categories or ()) | set(env_list(env, DENIED_CATEGORIES_ENV) or ())
        names = [n for n in names if by_name[n].tool.category not in denied]
        if toolsets is not None:
            enabled = enabled_toolsets if enabled_toolsets is not None else env_list(env, TOOLSETS_ENV)
            if enabled is not None:
                unknown = sorted(set(enabled) - set(toolsets))
                if unknown:
                    raise DefinitionError(
                        f"unknown toolsets {', '.join(unknown)}; defined: {', '.join(toolsets)}"
                    )
                categories = {cat for ts in enabled for cat in toolsets[ts]}
                names = [n for n in names if by_name[n].tool.category in categories]
        return cls(available=tuple(names), listed=tuple(names))
