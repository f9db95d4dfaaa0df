"""`mcpkit sql grant` on PostgreSQL: which granted relations the printed script leaves unreadable.

PostgreSQL checks EXECUTE against the reader for the functions a view's query or a row-level
security policy calls, so a `REVOKE EXECUTE` the script prints (a plpgsql or non-atomic SQL
function counts as a route) makes such a relation fail with `permission denied for function` for
the reader (red team rtg L1: `doctor` said ok, and the granted view and table could not be read).
Read from the catalog in the script's rolled-back trial, as the reader: nothing is run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["unreadable_notes"]

# The functions the granted relations' view rules and SELECT policies (those that apply to the
# current role: PUBLIC or a role it inherits) call that the current role
# (the reader, after SET LOCAL ROLE) may not execute. Not through a view below: PostgreSQL drops the
# columns a query does not use from a view it reads, so a view over such a view may read fine.
_UNREADABLE: Final = """
WITH calls(rel, fn, how) AS (
    SELECT r.ev_class, d.refobjid, 'view query'
    FROM pg_catalog.pg_rewrite r
    JOIN pg_catalog.pg_depend d
      ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
      AND d.objid OPERATOR(pg_catalog.=) r.oid
      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  UNION ALL
    SELECT p.polrelid, d.refobjid, 'policy ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(p.polname)
    FROM pg_catalog.pg_policy p
    JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) p.polrelid AND t.relrowsecurity
    JOIN pg_catalog.pg_depend d
      ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_policy'::pg_catalog.regclass
      AND d.objid OPERATOR(pg_catalog.=) p.oid
      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
    WHERE p.polcmd IN ('r', '*') AND (CAST(0 AS pg_catalog.oid) OPERATOR(pg_catalog.=) ANY(p.polroles)
      OR EXISTS (SELECT FROM pg_catalog.unnest(p.polroles) AS g(r)
                 WHERE pg_catalog.pg_has_role(g.r, 'USAGE')))
)
SELECT DISTINCT CAST(CAST(calls.rel AS pg_catalog.regclass) AS pg_catalog.text), calls.how,
       CAST(CAST(calls.fn AS pg_catalog.regprocedure) AS pg_catalog.text),
       pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'
         OPERATOR(pg_catalog.||) pg_catalog.quote_ident(f.proname)
FROM calls
JOIN pg_catalog.pg_proc f ON f.oid OPERATOR(pg_catalog.=) calls.fn
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) f.pronamespace
WHERE calls.rel OPERATOR(pg_catalog.=) ANY(CAST(CAST(:rels AS pg_catalog.text[]) AS pg_catalog.regclass[]))
  AND NOT pg_catalog.has_function_privilege(calls.fn, 'EXECUTE')
ORDER BY 1, 2, 3
"""


def unreadable_notes(conn: Connection, granted: Sequence[str]) -> list[str]:
    """One `--` line per granted relation (`schema.name` as the script quotes it) and function its view
    query or a SELECT policy calls that the current role may not execute: the reader's reads that
    evaluate it fail with `permission denied`. `conn` is in the trial, after `SET LOCAL ROLE`."""
    if not granted:
        return []
    notes = []
    for rel, how, signature, name in conn.execute(text(_UNREADABLE), {"rels": list(granted)}):
        notes.append(
            f"-- note: after this script the reader's reads of {rel} that evaluate {signature} (its {how}"
            f" calls it) fail with permission denied: PostgreSQL checks EXECUTE against the reader. To"
            f" keep them, rewrite {name} as LANGUAGE sql with a BEGIN ATOMIC body, or review it, keep"
            f" its EXECUTE and serve with --allow function:{name}"
        )
    return notes
