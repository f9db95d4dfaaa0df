"""The function policy: the engine's reviewed allowlist, what the operator adds, and the never list.

call --never list?--> refused, whatever the options
     --SQL syntax (CAST, CASE, ->>)?--> admitted
     --on the allowlist (built-in, or added by the operator)?--> admitted
     --else--> refused, naming the function and how the operator can allow it
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.function_tables import Family, FunctionTable, matches
from mcpkit.sql.admission.function_tables.tables import TABLES, table_for
from mcpkit.sql.admission.functions import SYNTAX_FUNCTIONS, FunctionCall, function_calls
from mcpkit.sql.errors import SqlConfigError

__all__ = ["ALLOW_OPTION", "FunctionPolicy", "load_allowlist"]

ALLOW_OPTION: Final = "--allow-function"
# Schemas whose functions are the built-ins themselves (a qualified call is the same function).
_BUILTIN_SCHEMAS: Final[dict[str, frozenset[str]]] = {"postgres": frozenset({"pg_catalog"})}


def _shown(name: str) -> str:
    return "".join(c for c in name if c.isalnum() or c in "_.$ ")[:64] or "this function"


def _normalized(name: str) -> str:
    text = name.strip().lower()
    if not text or not all(c.isalnum() or c in "_.$*" for c in text) or text.count(".") > 2:
        raise SqlConfigError(
            f"{ALLOW_OPTION} {name!r}: give a function name, schema.name, db.package.name, or prefix*"
        )
    if "*" in text and (not text.endswith("*") or text.count("*") > 1 or len(text.split(".")[-1]) < 2):
        raise SqlConfigError(
            f"{ALLOW_OPTION} {name!r}: a pattern is a prefix of two or more characters, then *"
        )
    return text


def _clash(pattern: str, table: FunctionTable) -> Family | None:
    # The never family an operator name or prefix* would admit something of, if any.
    bare = pattern.split(".")[-1]
    for fam in table.families:
        if fam.verdict != "never":
            continue
        for entry in fam.names:
            if bare.endswith("*"):
                prefix = bare[:-1]
                head = entry.split("*", 1)[0]
                if entry.startswith(prefix) or ("*" in entry and prefix.startswith(head)):
                    return fam
            elif matches(bare, [entry]):
                return fam
    return None


@dataclass(frozen=True)
class FunctionPolicy:
    """Which functions admission lets through.

    Args:
        dialect: The sqlglot dialect; it picks the reviewed table.
        extra: Names the operator allows beyond the table (`name`, `schema.name`, `prefix*`).
        only: When set, these names replace the table's allowlist (`--functions FILE`).
    """

    dialect: str
    extra: frozenset[str] = frozenset()
    only: frozenset[str] | None = None
    table: FunctionTable = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "table", table_for(self.dialect))
        # Every engine's never list: a name that is dangerous on one is not waved through on another.
        tables = [self.table, *(t for t in TABLES.values() if t is not self.table)]
        for name in sorted(self.extra | (self.only or frozenset())):
            fam = next((f for t in tables if (f := _clash(name, t)) is not None), None)
            if fam is not None:
                raise SqlConfigError(
                    f"{ALLOW_OPTION} {name}: never allowed ({fam.name}: it {fam.why}); "
                    "no option admits it, because the server could no longer promise a read-only, "
                    "side-effect-free answer"
                )

    @classmethod
    def for_dialect(
        cls, dialect: str, allow: Iterable[str] | None = None, extra: Iterable[str] = ()
    ) -> FunctionPolicy:
        """The default policy of a dialect; `extra` adds names, `allow` replaces the allowlist.

        Raises:
            SqlConfigError: a name is malformed or on the never list.
        """
        return cls(
            dialect=dialect,
            extra=frozenset(_normalized(n) for n in extra),
            only=None if allow is None else frozenset(_normalized(n) for n in allow),
        )

    @property
    def deny(self) -> frozenset[str]:
        """The never list (names and patterns)."""
        return self.table.never

    def _operator_allows(self, name: str, schema: str | None) -> bool:
        chosen = self.only if self.only is not None else self.extra
        qualified = f"{schema}.{name}" if schema else name
        return matches(qualified, chosen) or (schema is not None and matches(f"{schema}.*", chosen))

    def allows_under(self, qualifier: str) -> bool:
        """Whether the operator's names let a call qualified by `qualifier` (lower case) through: a
        MariaDB package's functions, `db.pkg.f` (red team rt34 F2)."""
        chosen = self.only if self.only is not None else self.extra
        return any(
            c.startswith(f"{qualifier}.") or (c.endswith("*") and f"{qualifier}.".startswith(c[:-1]))
            for c in chosen
        )

    def reaches(self, name: str, schema: str) -> bool:
        """Whether a call may name `schema.name` (or bare `name`), or a function of package
        `schema.name` (MariaDB, `allows_under`)."""
        name = name.lower()
        return (
            self.allows_name(name, schema)
            or self.allows_name(name)
            or self.allows_under(f"{schema}.{name}".lower())
            or self.allows_under(name)
        )

    def allows_name(self, name: str, schema: str | None = None) -> bool:
        """Whether a call of `name` (lower case) in `schema` is admitted: for engine-level checks too.

        >>> FunctionPolicy.for_dialect("sqlite").allows_name("upper")
        True
        >>> FunctionPolicy.for_dialect("sqlite", extra=["my_fn"]).allows_name("my_fn")
        True
        """
        name = name.lower()
        fam = self.table.lookup(name)  # never first, as `matches(name, self.table.never)`
        if fam is not None and fam.verdict == "never":
            return False
        if name in SYNTAX_FUNCTIONS:
            return True
        if schema is not None and schema in _BUILTIN_SCHEMAS.get(self.dialect, frozenset()):
            schema = None
        if self._operator_allows(name, schema):
            return True
        return schema is None and self.only is None and name in self.table.allowed

    def opted_in(self, tree: exp.Expr) -> bool:
        """Whether `tree` calls a function admitted by the operator's opt-in alone, not the reviewed
        list: `--allow function:S.F` holds only while S.F names one function (PostgreSQL), so such a
        call reads the catalog before its SQL (`reverify.catalog_checked`, red team rt25 F3)."""
        for call in function_calls(tree, self.dialect):
            name = call.name.lower()
            reviewed = call.schema is None and self.only is None and name in self.table.allowed
            if call.is_call and not reviewed and self._operator_allows(name, call.schema):
                return True
        return False

    def refusal(self, call: FunctionCall) -> str | None:
        """The sentence refusing `call`, or None when it is admitted."""
        for alias in sorted(call.names):
            fam = self.table.lookup(alias)
            if fam is not None and fam.verdict == "never":
                return f"The function {_shown(alias)} is never allowed on this server: it {fam.why}."
        if not call.is_call:
            return None
        if call.in_from and self.dialect == "sqlite":
            return None  # a virtual table (see function_tables/sqlite.py), never an SQL function
        if self.allows_name(call.name, call.schema):
            return None
        shown = _shown(f"{call.schema}.{call.name}" if call.schema else call.name)
        fam = self.table.lookup(call.name) if call.schema is None else None
        why = f" (left out: {fam.why})" if fam is not None and fam.verdict == "absent" else ""
        return (
            f"The function {shown} is not on this server's list of allowed functions{why}; use "
            "built-in aggregate, window, string, date, math or JSON functions, or ask the operator to "
            f"allow it ({ALLOW_OPTION} {shown})."
        )


def load_allowlist(path: str | Path) -> frozenset[str]:
    """Read a function list: one name a line (`name`, `schema.name`, `prefix*`), `#` starts a comment.

    Args:
        path: The file.

    Returns:
        The lower-case names.
    """
    names = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        name = line.split("#", 1)[0].strip().lower()
        if name:
            names.add(name)
    return frozenset(names)
