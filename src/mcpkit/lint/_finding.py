"""The one result type of `mcpkit lint`: a `Finding` names a rule, a place and the clients it breaks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]

#: Severities from least to most severe; `SEVERITY_RANK[s]` orders them.
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "error")
SEVERITY_RANK: dict[str, int] = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem in a `tools/list` result.

    Attributes:
        rule: the rule id, `SL001` .. `SL020`.
        severity: the worst severity among the selected clients this breaks.
        tool: the tool's name (`tools[3]` when it has none), `None` for the server as a whole.
        path: a JSON pointer into the tool (`/inputSchema/properties/q`), or into the server
            (`/instructions`, `""` for the whole list).
        message: what is wrong, in one sentence or two.
        clients: the selected profiles this breaks, in `PROFILES` order.
    """

    rule: str
    severity: Severity
    tool: str | None
    path: str
    message: str
    clients: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """The finding as the JSON object `--format json` prints."""
        return {
            "rule": self.rule,
            "severity": self.severity,
            "tool": self.tool,
            "path": self.path,
            "message": self.message,
            "clients": list(self.clients),
        }
