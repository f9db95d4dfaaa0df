"""PostgreSQL `--allow function-order:` opt-ins, by name or by signature, and what they accepted.

`function-order:S.F(argtypes)` is what start-up asks for when `S.F` has overloads (`overloads`),
so it accepts that overload; a name is accepted when each of its user functions is (red team
rt35a L1: only the name form matched, so an overloaded function could never be used). An opt-in
accepts the function start-up saw: its language, body, settings and owner are kept (a digest per
signature), and a body replaced while serving (`CREATE OR REPLACE`, same OID: a harmless SQL
`x + 1` turned into a plpgsql counter, rt35a F7) fails the re-verification; so does a view or a
policy a `view-order:` / `policy-order:` opt-in accepted whose query changed. Every function any
function opt-in accepts (`function:`, `function-config:` too) is kept so: an accepted view, aggregate
or function reaches the callee start-up saw, not one swapped while serving (red team v1 F2, F4, F5:
the helper a view calls, an aggregate's state function, a function's callee); an aggregate's digest
holds its support functions (`CREATE OR REPLACE AGGREGATE` keeps the OID).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.postgres.catalog_path import catalog_path
from mcpkit.sql.profiles.postgres.overloads import PREFIXES, OptIns
from mcpkit.sql.profiles.postgres.routine_state import postgres_row_order_routines

__all__ = ["postgres_accepted_bodies", "postgres_order_accepted"]

_FUNCTIONS: Final = """
SELECT p.oid, n.nspname, p.proname,
       format('%I.%I(%s)', n.nspname, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)),
       md5(ROW(l.lanname, p.prosrc, p.prosqlbody::text, p.proconfig, p.provolatile, p.prosecdef,
               p.proowner, p.proretset, p.prorettype, p.proargdefaults::text, p.probin,
               ROW(a.aggkind, a.aggnumdirectargs, a.aggtransfn::oid, a.aggfinalfn::oid, a.aggcombinefn::oid,
                   a.aggserialfn::oid, a.aggdeserialfn::oid, a.aggmtransfn::oid, a.aggminvtransfn::oid,
                   a.aggmfinalfn::oid, a.aggfinalextra, a.aggmfinalextra, a.aggfinalmodify,
                   a.aggmfinalmodify, a.aggsortop, a.aggtranstype, a.agginitval, a.aggminitval))::text)
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
LEFT JOIN pg_catalog.pg_aggregate a ON a.aggfnoid = p.oid
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


def _accepted(conn: Connection, allow: Collection[str]) -> list[tuple[str, str, str, str, frozenset[str]]]:
    """Each user function: schema, name, signature, digest, the function opt-in kinds accepting it."""
    if not any(a.partition(":")[0] in PREFIXES for a in allow):
        return []
    with catalog_path(conn):  # `p.oid >= 16384`, `format(...)`, `md5(...)`: no user operator's or function's
        opt = OptIns.read(conn, allow)
        rows = conn.execute(text(_FUNCTIONS)).all()
    out = []
    for oid, schema, name, signature, digest in rows:
        kinds = frozenset(
            k for k in PREFIXES if opt.accepts(k, int(oid), str(schema), str(name), str(signature))
        )
        out.append((str(schema), str(name), str(signature), str(digest), kinds))
    return out


def postgres_order_accepted(conn: Connection, allow: Collection[str]) -> frozenset[tuple[str, str]]:
    """(schema, name) of the per-row functions whose every overload `allow` accepts."""
    per_row = postgres_row_order_routines(conn)
    every: dict[tuple[str, str], bool] = {}
    for schema, name, _, _, kinds in _accepted(conn, allow):
        if (schema, name) in per_row:
            every[(schema, name)] = every.get((schema, name), True) and "function-order" in kinds
    return frozenset(k for k, ok in every.items() if ok)


def postgres_accepted_bodies(conn: Connection, allow: Collection[str]) -> dict[str, str]:
    """What each function (language, body, settings, owner) a function opt-in accepts, and each view
    and policy (query) an `--allow *-order:` one does, is: `function S.F(args)` / `view S.V` /
    `policy S.T.P` -> a digest."""
    out = {f"function {sig}": digest for _, _, sig, digest, kinds in _accepted(conn, allow) if kinds}
    named = sorted(a for a in allow if a.startswith(("view-order:", "policy-order:")))
    if named:
        with catalog_path(conn):
            out.update((str(k), str(d)) for k, d in conn.execute(text(_STORED), {"allow": named}))
    return out
