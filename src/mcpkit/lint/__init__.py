"""`mcpkit lint`: will every client accept this server's tools?

Judges plain `tools/list` JSON against rules tied to clients that really break (SL001..SL020).
Imports nothing of the rest of mcpkit; the MCP SDK is imported only to reach live servers.
"""

__all__ = [
    "DEFAULT_PROFILES",
    "PROFILES",
    "PROTOCOLS",
    "REGISTRY",
    "Finding",
    "LintReport",
    "Profile",
    "Rule",
    "Severity",
    "fix_tools",
    "lint_report",
    "lint_tools",
]

from mcpkit.lint._engine import LintReport, lint_report, lint_tools
from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._fix import fix_tools
from mcpkit.lint._profiles import DEFAULT_PROFILES, PROFILES, PROTOCOLS, Profile
from mcpkit.lint._rule import REGISTRY, Rule
