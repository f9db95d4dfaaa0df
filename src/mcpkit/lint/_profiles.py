"""Client profiles: who reads a `tools/list` result, and which of them `mcpkit lint` checks by default."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

ProfileKind = Literal["client", "api", "spec"]


@dataclass(frozen=True, slots=True)
class Profile:
    """A target that reads tool definitions: an MCP client, an LLM API a client forwards to, or the spec."""

    name: str
    title: str
    kind: ProfileKind
    summary: str


_ALL = (
    Profile(
        "claude-code", "Claude Code", "client", "Anthropic's CLI agent; forwards tools to the Claude API."
    ),
    Profile("claude-api", "Claude API", "api", "Anthropic Messages API `tools[].input_schema`."),
    Profile("cursor", "Cursor", "client", "Cursor's agent and its model gateway."),
    Profile("vscode", "VS Code / Copilot", "client", "GitHub Copilot agent mode in VS Code."),
    Profile("windsurf", "Windsurf", "client", "Windsurf (Codeium) Cascade."),
    Profile("openai-strict", "OpenAI strict", "api", "OpenAI function calling with `strict: true`."),
    Profile("gemini", "Gemini", "api", "Gemini `functionDeclarations[].parameters` (OpenAPI subset)."),
    Profile("spec", "MCP spec", "spec", "The MCP specification and its conformance suite."),
)

#: Every profile by name, in the order findings list their clients.
PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in _ALL})

#: The general-purpose clients and the spec; the strict LLM APIs are opt-in.
DEFAULT_PROFILES: tuple[str, ...] = tuple(p.name for p in _ALL if p.kind != "api")

#: Protocol revisions whose rules differ (SL015 relaxes in 2026-07-28).
PROTOCOLS: tuple[str, ...] = ("2025-11-25", "2026-07-28")


def resolve_profiles(names: str | Sequence[str] | None) -> tuple[str, ...]:
    """Validate profile names and return them in `PROFILES` order (the default set for `None`).

    A string is one name, `"all"`, `"default"`, or a comma-separated list (never read letter by letter).

    >>> resolve_profiles(["spec", "cursor"])
    ('cursor', 'spec')
    >>> resolve_profiles("all") == tuple(PROFILES)
    True

    Raises:
        ValueError: an unknown profile name, or an empty selection.
    """
    if names is None:
        return DEFAULT_PROFILES
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    wanted: set[str] = set()
    for name in names:
        if name == "all":
            wanted.update(PROFILES)
        elif name == "default":
            wanted.update(DEFAULT_PROFILES)
        else:
            wanted.add(name)
    unknown = sorted(wanted - PROFILES.keys())
    if unknown:
        raise ValueError(
            f"unknown profile(s) {', '.join(unknown)}; choose from {', '.join(PROFILES)}, all, default"
        )
    if not wanted:
        raise ValueError("no profile selected")
    return tuple(p for p in PROFILES if p in wanted)


def order_clients(clients: Iterable[str]) -> tuple[str, ...]:
    """Clients in `PROFILES` order, each once."""
    got = set(clients)
    return tuple(p for p in PROFILES if p in got)
