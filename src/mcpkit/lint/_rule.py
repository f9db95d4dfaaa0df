"""The rule base class, the registry, and the views of a tool list that rules read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeVar

from mcpkit.lint._finding import SEVERITY_RANK, Finding, Severity
from mcpkit.lint._metaschema import Dialect, dialect_of
from mcpkit.lint._profiles import PROFILES
from mcpkit.lint._walk import Node, walk

#: Every rule class by id (`SL001` ..), filled by `@register` as `mcpkit.lint.rules` is imported.
REGISTRY: dict[str, type[Rule]] = {}

RuleStatus = Literal["stable", "preview"]

#: Rule groups: `compat` (will clients accept these tools?) runs by default; `security` (tool poisoning)
#: is opt-in.
GROUPS: tuple[str, ...] = ("compat", "security")
DEFAULT_GROUPS: tuple[str, ...] = ("compat",)


def resolve_groups(names: str | Sequence[str] | None) -> tuple[str, ...]:
    """Validate rule group names (`"all"` for every group; a string may be a comma list).

    >>> resolve_groups("all")
    ('compat', 'security')

    Raises:
        ValueError: an unknown group, or none.
    """
    if names is None:
        return DEFAULT_GROUPS
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    wanted = set(GROUPS) if "all" in names else set(names)
    unknown = sorted(wanted - set(GROUPS))
    if unknown:
        raise ValueError(f"unknown rule group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}, all")
    if not wanted:
        raise ValueError("no rule group selected")
    return tuple(g for g in GROUPS if g in wanted)


_R = TypeVar("_R", bound="type[Rule]")


class _Missing:
    """Marks a key the tool does not have (distinct from an explicit `null`)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class ToolView:
    """One tool of the list as rules see it: its raw JSON plus what the engine worked out once."""

    __slots__ = (
        "_nodes",
        "index",
        "input_dialect",
        "input_schema",
        "label",
        "name",
        "output_dialect",
        "output_schema",
        "raw",
        "size",
        "suspicious",
    )

    def __init__(self, index: int, raw: dict[str, Any], size: int, suspicious: bool = True) -> None:
        self.index = index
        self.raw = raw
        self.size = size
        #: Whether the tool's JSON text may hold control, bidi or lone-surrogate characters (SL024).
        self.suspicious = suspicious
        name = raw.get("name")
        self.name: str | None = name if isinstance(name, str) else None
        self.label: str = self.name if self.name is not None else f"tools[{index}]"
        self.input_schema: Any = raw.get("inputSchema", MISSING)
        self.output_schema: Any = raw.get("outputSchema", MISSING)
        self.input_dialect: Dialect = dialect_of(self.input_schema)
        self.output_dialect: Dialect = dialect_of(self.output_schema)
        self._nodes: list[Node] | None = None

    @property
    def nodes(self) -> list[Node]:
        """Every object subschema of `inputSchema`, then of `outputSchema` (walked once, on first use)."""
        if self._nodes is None:
            self._nodes = walk(self.input_schema, "inputSchema")
            if self.output_schema is not MISSING:
                self._nodes += walk(self.output_schema, "outputSchema")
        return self._nodes

    def dialect(self, node: Node) -> Dialect:
        """The dialect that governs `node` (its root schema's)."""
        return self.input_dialect if node.root == "inputSchema" else self.output_dialect

    def root(self, node: Node) -> Any:
        """The root schema `node` belongs to."""
        return self.input_schema if node.root == "inputSchema" else self.output_schema


class LintContext:
    """Everything about one lint run that rules may read."""

    def __init__(
        self,
        tools: list[ToolView],
        *,
        profiles: tuple[str, ...],  # in PROFILES order
        protocol: str,
        instructions: str | None,
        server_key: str | None,
        payload_bytes: int,
        groups: tuple[str, ...] = ("compat",),
    ) -> None:
        self.tools = tools
        self.profiles = profiles
        self.protocol = protocol
        self.instructions = instructions
        #: The user's config key for this server, when known (clients prefix tool names with it).
        self.server_key = server_key
        self.payload_bytes = payload_bytes
        self.groups = groups


class Rule:
    """A check with a stable id. Subclasses set the class attributes and override one or more `check_*`.

    Rules yield findings through `report`, which keeps only the selected clients and takes the
    worst of their severities. The class docstring is the rule's documentation, in ruff's sections.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    status: ClassVar[RuleStatus] = "stable"
    #: `compat` rules run by default; `security` rules only when asked for.
    group: ClassVar[str] = "compat"
    #: The worst severity per profile; a profile missing here is never broken by this rule.
    severity: ClassVar[Mapping[str, Severity]]
    #: Whether `fix_tools` repairs (some of) its findings without changing meaning.
    fixable: ClassVar[bool] = False
    #: `check_node` runs on nodes that have one of these keywords (an instance may narrow it).
    keywords: frozenset[str] = frozenset()
    #: ... or whose keyword value is one of these strings, or of one of these JSON types (`list`, `dict`).
    triggers: ClassVar[Mapping[str, frozenset[str | type]]] = MappingProxyType({})

    def __init__(self, ctx: LintContext) -> None:
        self.ctx = ctx
        #: id(finding) -> tool index, for findings of `check_list` (whose labels may repeat).
        self.indexes: dict[int, int] = {}

    def applies(self) -> bool:
        """Whether any selected profile can be broken by this rule."""
        return any(p in self.severity for p in self.ctx.profiles)

    def check_list(self) -> Iterable[Finding]:
        """Findings about the list or server as a whole."""
        return ()

    def check_tool(self, tool: ToolView) -> Iterable[Finding]:
        """Findings about one tool (runs after `check_node` has seen all of that tool's nodes)."""
        return ()

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        """Findings about one subschema matching `keywords`/`triggers` (a list: this runs per node)."""
        return []

    def report(
        self,
        tool: ToolView | None,
        path: str,
        message: str,
        clients: Iterable[str] | Mapping[str, Severity] | None = None,
    ) -> list[Finding]:
        """One finding for the selected clients among `clients` (all of `severity` by default).

        A mapping gives per-client severities for this finding; an iterable uses `severity`'s.
        The list is empty when no selected client is affected.
        """
        if clients is None:
            levels: Mapping[str, Severity] = self.severity
        elif isinstance(clients, Mapping):
            levels = clients
        else:
            levels = {c: self.severity[c] for c in clients if c in self.severity}
        hit = tuple(p for p in self.ctx.profiles if p in levels)
        if not hit:
            return []
        worst = max((levels[p] for p in hit), key=SEVERITY_RANK.__getitem__)
        found = Finding(self.code, worst, None if tool is None else tool.label, path, message, hit)
        self.indexes[id(found)] = -1 if tool is None else tool.index
        return [found]


def register(cls: _R) -> _R:
    """Class decorator: add a rule to `REGISTRY` after checking its id and attributes."""
    code = cls.code
    if code in REGISTRY and REGISTRY[code] is not cls:
        raise ValueError(f"rule id {code} registered twice")
    if not (len(code) == 5 and code.startswith("SL") and code[2:].isdigit()):
        raise ValueError(f"rule id {code!r} is not SL###")
    if cls.group not in GROUPS:
        raise ValueError(f"{code}: unknown group {cls.group!r}")
    unknown = set(cls.severity) - PROFILES.keys()
    if unknown:
        raise ValueError(f"{code}: unknown profile(s) {sorted(unknown)}")
    REGISTRY[code] = cls
    return cls
