"""PostgreSQL `--allow function-order:` opt-ins, by name or by signature, and what they accepted.

`function-order:S.F(argtypes)` is what start-up asks for when `S.F` has overloads (`overloads`),
so it accepts that overload; a name is accepted when each of its user functions is (red team
rt35a L1: only the name form matched, so an overloaded function could never be used). An opt-in
accepts the function start-up saw: its language, body, settings and owner are kept (a digest per
signature), and a body replaced while serving (`CREATE OR REPLACE`, same OID: a harmless SQL
`x + 1` turned into a plpgsql counter, rt35a F7) fails the re-verification; so does a view or a
policy a `view-order:` / `policy-order:` opt-in accepted whose query changed.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.postgres.overloads import OptIns
from mcpkit.sql.profiles.postgres.routine_state import postgres_row_order_routines

__all__ = ["postgres_accepted_bodies", "postgres_order_accepted"]

_FUNCTIONS: Final = """
SELECT p.oid, n.nspname, p.proname,
       format('%I.%I(%s)', n.nspname, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)),
       md5(ROW(l.lanname, p.prosrc, p.prosqlbody::text, p.proconfig, p.provolatile, p.prosecdef,
               p.proowner, p.proretset, p.prorettype, p.proargdefaults::text, p.probin)::text)
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.oid >= 16384 AND p.prokind IN ('f', 'w', 'a')
ORDER BY 4
"""
# Views and policies an `--allow view-order:` / `policy-order:` opt-in names (as stored), with a digest
# of their query: `CREATE OR REPLACE VIEW` keeps the name and the opt-in (rt35a F7, same family).
_STORED: Final = """
SELECT 'view ' || n.nspname || '.' || c.relname,
       md5(ROW(pg_catalog.pg_get_viewdef(c.oid), c.reloptions, c.relowner, c.relkind)::text)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('v', 'm') AND c.oid >= 16384
  AND 'view-order:' || n.nspname || '.' || c.relname = ANY(CAST(:allow AS text[]))
UNION ALL
SELECT 'policy ' || n.nspname || '.' || c.relname || '.' || p.polname,
       md5(ROW(p.polqual::text, p.polwithcheck::text, p.polcmd, p.polpermissive, p.polroles)::text)
FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE 'policy-order:' || n.nspname || '.' || c.relname || '.' || p.polname = ANY(CAST(:allow AS text[]))
"""


def _accepted(conn: Connection, allow: Collection[str]) -> list[tuple[str, str, str, str, bool]]:
    """Each user function: schema, name, signature, digest, whether a function-order opt-in accepts it."""
    if not any(a.startswith("function-order:") for a in allow):
        return []
    opt = OptIns.read(conn, allow)
    out = []
    for oid, schema, name, signature, digest in conn.execute(text(_FUNCTIONS)):
        ok = opt.accepts("function-order", int(oid), str(schema), str(name), str(signature))
        out.append((str(schema), str(name), str(signature), str(digest), ok))
    return out


def postgres_order_accepted(conn: Connection, allow: Collection[str]) -> frozenset[tuple[str, str]]:
    """(schema, name) of the per-row functions whose every overload `allow` accepts."""
    per_row = postgres_row_order_routines(conn)
    every: dict[tuple[str, str], bool] = {}
    for schema, name, _, _, ok in _accepted(conn, allow):
        if (schema, name) in per_row:
            every[(schema, name)] = every.get((schema, name), True) and ok
    return frozenset(k for k, ok in every.items() if ok)


def postgres_accepted_bodies(conn: Connection, allow: Collection[str]) -> dict[str, str]:
    """What each function (language, body, settings, owner), view and policy (query) an `--allow
    *-order:` opt-in accepts is: `function S.F(args)` / `view S.V` / `policy S.T.P` -> a digest."""
    out = {f"function {sig}": digest for _, _, sig, digest, ok in _accepted(conn, allow) if ok}
    named = sorted(a for a in allow if a.startswith(("view-order:", "policy-order:")))
    if named:
        out.update((str(k), str(d)) for k, d in conn.execute(text(_STORED), {"allow": named}))
    return out
