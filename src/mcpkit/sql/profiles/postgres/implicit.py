"""PostgreSQL user functions a query runs without naming them: each counts as a per-row one.

Every user function counts as a per-row function over masked reads (`routine_state`), but the
per-call check sees only the names a query calls. An operator (`id + true` over a user
`+(integer, boolean)`), a cast (`CAST(id AS t)` with a user cast), a domain's CHECK (`CAST(id AS d)`
runs it for each row) and an operator family's support function (ORDER BY, GROUP BY over a user
type) run one for each row a query over a masked table reads, in its scan order (red team rt32 F1
and its domain CHECK residual); so do a user type's input/output functions (`CAST(x AS t)`, rt35a
F3) and a user function a reviewed extension's SQL body calls by an unqualified name (earthdistance's
`sec_to_gc` calls `earth()`: a user `public.earth()` on the path runs instead, rt35a F2). So each
such function the role can reach that way is a start-up finding over masked tables, accepted by
`--allow function-order:S.N` only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.postgres.catalog_path import catalog_path
from mcpkit.sql.profiles.postgres.ext_bodies import open_members
from mcpkit.sql.profiles.postgres.routine_state import postgres_row_order_routines, reviewed_params
from mcpkit.sql.profiles.stored import StoredQuery

__all__ = ["with_implicit"]

# (function, how it is reached, whether PostgreSQL checks EXECUTE on it against the reader)
_REACHED: Final = """
WITH reached(fn, how, checked) AS (
    SELECT o.oprcode, 'operator ' || o.oid::regoperator::text, true
    FROM pg_catalog.pg_operator o WHERE o.oid >= 16384
  UNION ALL
    SELECT c.castfunc, format('cast (%s AS %s)', c.castsource::regtype, c.casttarget::regtype), true
    FROM pg_catalog.pg_cast c WHERE c.oid >= 16384 AND c.castfunc <> 0
  UNION ALL
    SELECT d.refobjid, 'the CHECK of domain ' || k.contypid::regtype::text, true
    FROM pg_catalog.pg_constraint k
    JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_constraint'::regclass AND d.objid = k.oid
     AND d.refclassid = 'pg_catalog.pg_proc'::regclass
    WHERE k.contypid <> 0
  UNION ALL
    SELECT a.amproc, format('operator family %I.%I', s.nspname, f.opfname), false
    FROM pg_catalog.pg_amproc a JOIN pg_catalog.pg_opfamily f ON f.oid = a.amprocfamily
    JOIN pg_catalog.pg_namespace s ON s.oid = f.opfnamespace WHERE a.amproc >= 16384
  UNION ALL
    SELECT io.fn, 'the input/output of type ' || t.oid::regtype::text, false
    FROM pg_catalog.pg_type t
    CROSS JOIN LATERAL (VALUES (t.typinput), (t.typoutput), (t.typreceive), (t.typsend),
                               (t.typmodin), (t.typmodout), (t.typsubscript)) io(fn)
    WHERE t.oid >= 16384 AND io.fn <> 0
  UNION ALL
    SELECT p.oid, format('a call by name in the body of %s', c.member::regprocedure), true
    FROM unnest(CAST(:members AS oid[]), CAST(:calls AS text[])) c(member, name)
    JOIN pg_catalog.pg_depend m ON m.classid = 'pg_catalog.pg_proc'::regclass AND m.objid = c.member
     AND m.deptype = 'e'
    JOIN pg_catalog.pg_proc p ON lower(p.proname) = c.name AND p.oid >= 16384
    WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::regclass
                      AND d.objid = p.oid AND d.deptype = 'e' AND d.refobjid = m.refobjid)
)
SELECT n.nspname, p.proname, min(r.how),
       format('%I.%I(%s)', n.nspname, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)),
       bool_or(NOT r.checked OR has_function_privilege(p.oid, 'EXECUTE'))
FROM reached r
JOIN pg_catalog.pg_proc p ON p.oid = r.fn
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
GROUP BY n.nspname, p.proname, p.oid
ORDER BY 1, 2, 4
"""


def with_implicit(items: list[StoredQuery], conn: Connection, role: str) -> list[StoredQuery]:
    """`items` with each user function an operator, a cast, a domain CHECK, an operator family, a
    type's I/O or an extension's body runs (see the module) refused: listed already, it gets that
    reason; else it is added."""
    per_row = postgres_row_order_routines(conn)
    members = open_members(conn, reviewed_params(conn))
    calls = [(m, n) for m, (_, names) in members.items() for n in names or ()]
    params = {"members": [str(m) for m, _ in calls], "calls": [n for _, n in calls]}
    found: dict[tuple[str, str], StoredQuery] = {}
    with catalog_path(conn):  # `o.oid >= 16384`, `'operator ' || ...`: no user operator's
        reached = conn.execute(text(_REACHED), params).all()
    for schema, name, how, signature, usable in reached:
        key = (str(schema), str(name))
        if key in per_row and key not in found:
            why = f"{how} runs it for each row a query reads, where the per-call check does not see it"
            revoke = f"REVOKE EXECUTE ON FUNCTION {signature} FROM {role}, PUBLIC"
            found[key] = StoredQuery("function", key[0], key[1], (), revoke, hidden=why, usable=bool(usable))
    out = []
    for item in items:
        extra = found.pop((item.schema, item.name), None) if item.kind == "function" else None
        out.append(
            item
            if extra is None
            else replace(item, hidden=item.hidden or extra.hidden, usable=item.usable or extra.usable)
        )
    return out + list(found.values())
