"""PostgreSQL row-level-security policies over masked tables, as stored SQL for the order check.

A policy's USING (and WITH CHECK) expression is stored SQL the reader runs on every read of its
table, never named in the query: `USING (id IN (SELECT c.id FROM customers c LIMIT 2))` on a table
`tickets` made `SELECT id FROM tickets` answer the tickets of the two smallest e-mails once
`customers` was CLUSTERed on its e-mail index (red team rt27 F7). Each policy whose expression
reads a masked table, a view over one or a function that reads one (pg_depend, which lists every
relation and function of the expression, subqueries included), or that sits on such a relation,
is handed to `masking.view_order` as `SELECT 1 FROM <table> WHERE <expression>`, kind "policy",
opt-in `policy-order:SCHEMA.TABLE.POLICY`. A policy whose expression reads a masked column itself
(or the whole row of a masked table) is a finding of the same kind and opt-in, whatever its order.

Which policies apply: those of PUBLIC, or of a role the reader is a member of, on a table one of
its roles can read or write; and, failing closed, those of a role that owns a view or a SECURITY
DEFINER function (other than a superuser or BYPASSRLS role): a view or function running with its
owner's rights applies its owner's policies, whoever calls it. RLS need not be enabled on the
table yet (`ALTER TABLE ... ENABLE ROW LEVEL SECURITY` turns every stored policy on at once).
`pg_policy` and `pg_get_expr` are readable by every role, so nothing is hidden here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.stored import StoredQuery

__all__ = ["policy_queries"]

# PostgreSQL checks no column privilege inside a policy: `USING (email < 'k')` shows the reader
# exactly the rows whose masked e-mail sorts below 'k' (red team rt28 F3). A masked column, or the
# whole row of a masked table (`customers::text`), in the expression is a finding.
_READS_MASKED: Final = "its expression reads a masked column (rows are filtered on the masked values)"

# A role under the policy: PUBLIC (0) takes every role, a role its members.
_UNDER: Final = "CASE WHEN pr.oid = 0 THEN true ELSE pg_has_role({role}, pr.oid, 'MEMBER') END"
_OWNER: Final = "EXISTS (SELECT 1 FROM owners o WHERE " + _UNDER.format(role="o.oid") + ")"
_POLICIES: Final = f"""
WITH owners AS MATERIALIZED (  -- roles whose policies apply to whoever uses their views, functions
    SELECT o.oid FROM pg_catalog.pg_roles o WHERE NOT o.rolsuper AND NOT o.rolbypassrls
      AND (o.oid IN (SELECT v.relowner FROM pg_catalog.pg_class v WHERE v.relkind IN ('v', 'm'))
           OR o.oid IN (SELECT f.proowner FROM pg_catalog.pg_proc f WHERE f.prosecdef))
)
SELECT n.nspname, c.relname, p.polname,
       quote_ident(p.polname) || ' ON ' || quote_ident(n.nspname) || '.' || quote_ident(c.relname),
       quote_ident(n.nspname) || '.' || quote_ident(c.relname),
       pg_catalog.pg_get_expr(p.polqual, p.polrelid), pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid),
       EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
               JOIN unnest(CAST(:tables AS oid[]), CAST(:columns AS text[])) m(relid, col)
                 ON m.relid = d.refobjid
               LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
               WHERE d.classid = 'pg_catalog.pg_policy'::regclass AND d.objid = p.oid
                 AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'n'
                 AND (d.refobjsubid = 0 OR lower(a.attname) = lower(m.col)))
       OR (p.polrelid = ANY(CAST(:tables AS oid[]))  -- its own whole row: pg_depend omits it
           AND concat(p.polqual::text, p.polwithcheck::text) ~ '\\:varattno 0 ')
FROM pg_catalog.pg_policy p
JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE (p.polrelid = ANY(CAST(:relids AS oid[]))
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                  WHERE d.classid = 'pg_catalog.pg_policy'::regclass AND d.objid = p.oid
                    AND ((d.refclassid = 'pg_catalog.pg_class'::regclass
                          AND d.refobjid = ANY(CAST(:relids AS oid[])))
                      OR (d.refclassid = 'pg_catalog.pg_proc'::regclass
                          AND d.refobjid = ANY(CAST(:fns AS oid[]))))))
  AND EXISTS (SELECT 1 FROM unnest(p.polroles) pr(oid)
              WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                            WHERE pg_has_role(current_user, r.oid, 'MEMBER') AND {_UNDER.format(role="r.oid")}
                              AND has_any_column_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE'))
                 OR {_OWNER})
ORDER BY 1, 2, 3
"""


def policy_queries(
    conn: Connection,
    relids: Iterable[int],
    fns: Iterable[int],
    role: str,
    aggregates: frozenset[str],
    positions: frozenset[str],
    columns: Sequence[tuple[int, str]] = (),
) -> list[StoredQuery]:
    """The policies over masked tables (`relids`: the tables and the views over them; `fns`: the
    functions that read them) that may apply to the reader, each as one query per expression;
    `columns`: (table oid, masked column) pairs, a policy reading one is `hidden` (rt28 F3)."""
    params = {
        "relids": sorted(relids),
        "fns": sorted(fns),
        "tables": [t for t, _ in columns],
        "columns": [c for _, c in columns],
    }
    out: list[StoredQuery] = []
    rows = conn.execute(text(_POLICIES), params)
    for schema, table, name, quoted, relation, using, check, reads_masked in rows:
        statements = tuple(f"SELECT 1 FROM {relation} WHERE {e}" for e in (using, check) if e is not None)
        out.append(
            StoredQuery(
                "policy",
                str(schema),
                f"{table}.{name}",
                statements,
                f"DROP POLICY {quoted} (or ALTER POLICY it so its LIMIT, window or aggregate has an ORDER BY "
                f"on the primary key; {role} reads the table under it)",
                aggregates=aggregates,
                positions=positions,
                table=str(table),
                hidden=_READS_MASKED if reads_masked else None,
            )
        )
    return out
