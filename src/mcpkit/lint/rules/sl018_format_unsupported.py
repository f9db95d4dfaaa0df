"""SL018: `format` values outside a target's supported set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._types import declared_types
from mcpkit.lint._walk import Node

#: Formats OpenAI strict mode accepts.
OPENAI_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
#: Formats Gemini's Schema accepts, per type.
GEMINI_FORMATS = {
    "string": frozenset({"enum", "date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}
#: Formats JSON Schema 2020-12 defines.
SPEC_FORMATS = frozenset(
    {
        "date-time",
        "date",
        "time",
        "duration",
        "email",
        "idn-email",
        "hostname",
        "idn-hostname",
        "ipv4",
        "ipv6",
        "uri",
        "uri-reference",
        "iri",
        "iri-reference",
        "uuid",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
        "regex",
    }
)


@register
class FormatUnsupported(Rule):
    """## What it does
    Checks each `format` against the set a target supports: OpenAI strict mode's nine, Gemini's
    per-type list, and (as info) the formats JSON Schema 2020-12 defines.

    ## Why is this bad?
    OpenAI strict mode rejects the schema ("'uri' is not a valid format"); the Gemini Developer API
    supports only `enum` and `date-time` for strings (`int32`/`int64`, `float`/`double` for numbers)
    and rejects others. A format JSON Schema does not define is ignored by validators, so it only
    informs the model.

    ## Example
    ```json
    {"type": "object", "properties": {"site": {"type": "string", "format": "uri"}}}
    ```

    Use instead (say it in the description, validate in the handler):
    ```json
    {"type": "object", "properties": {"site": {"type": "string", "description": "An https:// URL"}}}
    ```

    ## References
    - OpenAI structured outputs, supported schemas: string formats.
      https://platform.openai.com/docs/guides/structured-outputs#supported-schemas
    - chatlas#255 (reported): "'uri' is not a valid format".
    - Firebase AI Logic, schema support: Gemini's formats.
      https://firebase.google.com/docs/ai-logic/generate-structured-output
    """

    code = "SL018"
    name = "unsupported-format"
    summary = "`format` values outside a target's supported set"
    severity: ClassVar[Mapping[str, Severity]] = {"openai-strict": "error", "gemini": "error", "spec": "info"}
    keywords = frozenset({"format"})

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        fmt = node.schema["format"]
        if not isinstance(fmt, str):
            return out
        levels: dict[str, Severity] = {}
        notes: list[str] = []
        if node.root == "inputSchema":
            if fmt not in OPENAI_FORMATS:
                levels["openai-strict"] = "error"
                notes.append("OpenAI strict accepts " + ", ".join(sorted(OPENAI_FORMATS)))
            types = declared_types(node.schema) or frozenset({"string"})
            allowed = frozenset().union(*(GEMINI_FORMATS.get(t, frozenset()) for t in types))
            if fmt not in allowed:
                levels["gemini"] = "error"
                notes.append("Gemini accepts " + (", ".join(sorted(allowed)) or "none here"))
        if fmt not in SPEC_FORMATS and fmt not in frozenset().union(*GEMINI_FORMATS.values()):
            levels["spec"] = "info"
            notes.append("JSON Schema does not define it, so validators ignore it")
        if levels:
            out += self.report(tool, node.pointer + "/format", f"format {fmt!r}: " + "; ".join(notes), levels)
        return out
