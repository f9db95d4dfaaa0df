"""Function opt-ins by name or by signature (red team rt23 F4).

`--allow function:S.F` (and `function-config:`, `function-order:`) names a function, and PostgreSQL
lets a name have overloads: one added later (`S.F(integer)`, SECURITY DEFINER, taking an xid) was
accepted with the one reviewed. So a name-only opt-in counts only while the name has exactly one
function; with several, start-up refuses it, listing the signatures, and each is opted in by its
own `function:S.F(integer)` (the argument types as `oid::regprocedure` shows them, or their usual
aliases: `int`, `int4`, `varchar`, ...; an unqualified type matches one of any schema).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding

__all__ = ["PREFIXES", "OptIns"]

PREFIXES: Final = ("function", "function-config", "function-order")
"""The opt-ins that name one function."""
_ALIASES: Final = {
    "int": "integer", "int4": "integer", "int2": "smallint", "int8": "bigint", "float8": "double precision",
    "float": "double precision", "float4": "real", "bool": "boolean", "varchar": "character varying",
    "char": "character", "decimal": "numeric", "timestamptz": "timestamp with time zone",
    "timestamp": "timestamp without time zone", "timetz": "time with time zone",
    "time": "time without time zone", "varbit": "bit varying",
}  # fmt: skip
_OVERLOADED: Final = """
SELECT n.nspname, p.proname, array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text)
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE p.prokind <> 'p' AND p.oid >= 16384
GROUP BY 1, 2 HAVING count(*) > 1
"""
_SIGNATURE: Final = re.compile(r"^(?P<name>[^(]+)\((?P<args>.*)\)$")


def _types(args: str) -> tuple[str, ...]:
    """Argument types split at top-level commas, each folded (aliases, case, quotes, spaces)."""
    parts, depth, current = [], 0, ""
    for ch in args:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    folded = (" ".join(p.replace('"', "").lower().split()) for p in parts)
    return tuple(_ALIASES.get(t, t) for t in folded if t)


def _same(wanted: tuple[str, ...], actual: tuple[str, ...]) -> bool:
    return len(wanted) == len(actual) and all(
        w == a or ("." not in w and a.rsplit(".", 1)[-1] == w) for w, a in zip(wanted, actual, strict=True)
    )


@dataclass(frozen=True)
class OptIns:
    """The `--allow` values, and the names of functions they name that have several overloads."""

    allowed: frozenset[str]
    overloads: dict[str, tuple[str, ...]]

    @classmethod
    def read(cls, conn: Connection, allowed: Collection[str]) -> OptIns:
        """What `allowed` names, looked up in `conn` (search_path pg_catalog: qualified types)."""
        rows = conn.execute(text(_OVERLOADED)).all()
        return cls(frozenset(allowed), {f"{s}.{n}": tuple(sigs) for s, n, sigs in rows})

    def _given(self, prefix: str, signature: str) -> str | None:
        head = _SIGNATURE.match(signature)
        if head is None:
            return None
        actual = _types(head["args"])
        for a in self.allowed:
            kind, _, value = a.partition(":")
            found = _SIGNATURE.match(value.strip())
            if (
                kind == prefix
                and found is not None
                and found["name"].strip().replace('"', "") == head["name"].replace('"', "")
                and _same(_types(found["args"]), actual)
            ):
                return a
        return None

    def opt_in(self, prefix: str, schema: str, name: str, signature: str) -> str:
        """The value that accepts this function: the one given for its signature, else the name
        while it has one function, else its signature."""
        given = self._given(prefix, signature)
        if given is not None:
            return given
        return (
            f"{prefix}:{signature}" if f"{schema}.{name}" in self.overloads else f"{prefix}:{schema}.{name}"
        )

    def accepts(self, prefix: str, schema: str, name: str, signature: str) -> bool:
        """Whether the opt-ins accept this function (`prefix` of it)."""
        return self.opt_in(prefix, schema, name, signature) in self.allowed

    def ambiguous(self) -> list[Finding]:
        """One finding per name-only opt-in whose name has several functions: it accepts none."""
        found = []
        for a in sorted(self.allowed):
            kind, _, value = a.partition(":")
            sigs = self.overloads.get(value.strip()) if kind in PREFIXES else None
            if sigs:
                message = (
                    f"--allow {a} names {len(sigs)} functions ({', '.join(sigs)}) and accepts none of them:"
                    " an overload added later would be accepted with the one reviewed"
                )
                fix = " ".join(f"--allow {kind}:{s}" for s in sigs) + "  -- each one you reviewed"
                found.append(Finding("ambiguous-opt-in", message, fix, None))
        return found
