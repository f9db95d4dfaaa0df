"""Function opt-ins by name or by signature (red team rt23 F4).

`--allow function:S.F` (and `function-config:`, `function-order:`) names a function, and PostgreSQL
lets a name have overloads: one added later (`S.F(integer)`, SECURITY DEFINER, taking an xid) was
accepted with the one reviewed. So a name-only opt-in counts only while the name has exactly one
function; with several, start-up refuses it, listing the signatures, and each is opted in by its
own `function:S.F(integer)`. PostgreSQL resolves each signature (`to_regprocedure`, red team rt24
F1/F2): quoted names keep their case, an unqualified type is the one the search_path finds, and a
signature naming no function refuses start-up. A name-only opt-in is read as PostgreSQL reads a
qualified name: `a."b.c"` and `"a.b".c` are two names, and `a.b.c` neither (rt24 F6).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.profiles.base import Finding

__all__ = ["PREFIXES", "OptIns"]

PREFIXES: Final = ("function", "function-config", "function-order")
"""The opt-ins that name one function."""
_OVERLOADED: Final = """
SELECT n.nspname, p.proname, array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text)
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE p.prokind <> 'p' AND p.oid >= 16384
GROUP BY 1, 2 HAVING count(*) > 1
"""
_DEFAULT_PATH: Final = (
    "SELECT set_config('search_path', reset_val, true) FROM pg_catalog.pg_settings WHERE name = 'search_path'"
)
_PART: Final = re.compile(r'"((?:[^"]|"")+)"|([a-z_][a-z0-9_$]*)')
_PLAIN: Final = re.compile(r"[a-z_][a-z0-9_]*")


def _name(value: str) -> tuple[str, str] | None:
    """`schema.name` as PostgreSQL reads it: a part with a dot, uppercase, ... only when quoted."""
    parts, rest = [], value.strip()
    while True:
        m = _PART.match(rest)
        if m is None:
            return None
        parts.append(m[1].replace('""', '"') if m[1] is not None else m[2])
        rest = rest[m.end() :]
        if not rest:
            return (parts[0], parts[1]) if len(parts) == 2 else None
        if not rest.startswith("."):
            return None
        rest = rest[1:]


def _quoted(part: str) -> str:
    return part if _PLAIN.fullmatch(part) else '"' + part.replace('"', '""') + '"'


def _resolve(conn: Connection, signatures: Collection[str]) -> dict[str, int | None]:
    """Each `S.F(types)` resolved by PostgreSQL's own parser (`to_regprocedure`) under the role's
    default search_path: exact quoting and case, an unqualified type as the queries would read it."""
    found: dict[str, int | None] = {}
    if not signatures:
        return found
    conn.exec_driver_sql("SAVEPOINT mcpkit_opt_ins")
    try:
        conn.execute(text(_DEFAULT_PATH))
        for sig in sorted(signatures):
            conn.exec_driver_sql("SAVEPOINT mcpkit_opt_in")
            try:
                oid = conn.execute(text("SELECT pg_catalog.to_regprocedure(:s)::oid"), {"s": sig}).scalar()
            except DBAPIError:  # a syntax error, a type that does not exist, a schema without USAGE
                oid = None
                conn.exec_driver_sql("ROLLBACK TO SAVEPOINT mcpkit_opt_in")
            conn.exec_driver_sql("RELEASE SAVEPOINT mcpkit_opt_in")
            found[sig] = None if oid is None else int(oid)
    finally:
        conn.exec_driver_sql("ROLLBACK TO SAVEPOINT mcpkit_opt_ins")
        conn.exec_driver_sql("RELEASE SAVEPOINT mcpkit_opt_ins")
    return found


@dataclass(frozen=True)
class OptIns:
    """The `--allow` values, the functions their signatures name, and the names with several overloads."""

    allowed: frozenset[str]
    overloads: dict[tuple[str, str], tuple[str, ...]]
    signatures: dict[str, int | None]

    @classmethod
    def read(cls, conn: Connection, allowed: Collection[str]) -> OptIns:
        """What `allowed` names, looked up in `conn` (search_path pg_catalog: qualified types)."""
        rows = conn.execute(text(_OVERLOADED)).all()
        sigs = {
            a.partition(":")[2].strip()
            for a in allowed
            if a.partition(":")[0] in PREFIXES and "(" in a.partition(":")[2]
        }
        return cls(
            frozenset(allowed), {(str(s), str(n)): tuple(sigs) for s, n, sigs in rows}, _resolve(conn, sigs)
        )

    def opt_in(self, prefix: str, oid: int, schema: str, name: str, signature: str) -> str:
        """The value that accepts this function: the one given for its signature, else the name
        while it has one function, else its signature."""
        overloaded = (schema, name) in self.overloads
        for a in sorted(self.allowed):
            kind, _, value = a.partition(":")
            if kind != prefix:
                continue
            if "(" in value:
                if self.signatures.get(value.strip()) == oid:
                    return a
            elif not overloaded and _name(value) == (schema, name):
                return a
        return f"{prefix}:{signature}" if overloaded else f"{prefix}:{_quoted(schema)}.{_quoted(name)}"

    def accepts(self, prefix: str, oid: int, schema: str, name: str, signature: str) -> bool:
        """Whether the opt-ins accept this function (`prefix` of it)."""
        return self.opt_in(prefix, oid, schema, name, signature) in self.allowed

    def ambiguous(self) -> list[Finding]:
        """One finding per name-only opt-in whose name has several functions (it accepts none), and
        per signature opt-in that names no function (a start-up error, not a silent no-op)."""
        found = []
        for a in sorted(self.allowed):
            kind, _, value = a.partition(":")
            if kind not in PREFIXES:
                continue
            if "(" in value:
                if self.signatures.get(value.strip()) is None:
                    message = (
                        f"--allow {a} names no function this role can resolve (PostgreSQL reads the"
                        " signature: quoted names keep their case, an unqualified type is looked up on the"
                        " search_path)"
                    )
                    fix = f"write the signature as {kind}:S.F(types) from `SELECT oid::regprocedure`"
                    found.append(Finding("unresolved-opt-in", message, fix, None))
                continue
            parsed = _name(value)
            sigs = self.overloads.get(parsed) if parsed is not None else None
            if sigs:
                message = (
                    f"--allow {a} names {len(sigs)} functions ({', '.join(sigs)}) and accepts none of them:"
                    " an overload added later would be accepted with the one reviewed"
                )
                fix = " ".join(f"--allow {kind}:{s}" for s in sigs) + "  -- each one you reviewed"
                found.append(Finding("ambiguous-opt-in", message, fix, None))
        return found
