"""PostgreSQL: what hands a masked column on with its owner's rights: views and materialized views
over it (`VIEWS_OVER`, transitively) and SECURITY DEFINER functions that reach one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.catalog_path import on_path

__all__ = ["VIEWS_OVER", "masked_attributes", "masked_routes"]

# Views and materialized views whose rewrite rule references a masked column (or the whole row of
# a masked table), then every view over those, transitively: PostgreSQL records each column a
# view's query reads in pg_depend (refobjsubid), but not a whole-row reference (`c::text`), so a
# view over such a table whose query holds any whole-row Var counts too. A view reads its relations
# with its owner's rights unless it is security_invoker, so a readable one hands the column on;
# invoker views are followed (a definer view over one still reads as its owner) but not reported.
# Readable counts every role the current one can SET ROLE to (MEMBER: NOINHERIT too; mask17 F6).
VIEWS_OVER: Final = """
WITH RECURSIVE tainted(relid, attnum) AS (
    SELECT t.relid, t.attnum
    FROM unnest(CAST(:relids AS oid[]), CAST(:attnums AS int2[])) AS t(relid, attnum)
  UNION
    SELECT r.ev_class, CAST(0 AS int2)
    FROM tainted t
    JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = t.relid
    JOIN pg_catalog.pg_rewrite r ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND r.oid = d.objid
    WHERE r.ev_class <> d.refobjid
      AND (t.attnum = 0 OR d.refobjsubid IN (0, t.attnum) OR r.ev_action::text LIKE '%\\:varattno 0 %')
)
SELECT DISTINCT c.oid, quote_ident(n.nspname) || '.' || quote_ident(c.relname), lower(c.relname),
       c.relkind,
       c.relkind IN ('v', 'm') AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
           WHERE pg_has_role(current_user, r.oid, 'MEMBER') AND has_schema_privilege(r.oid, n.oid, 'USAGE')
             AND (has_table_privilege(r.oid, c.oid, 'SELECT')
                  OR has_any_column_privilege(r.oid, c.oid, 'SELECT')))
       AND NOT (c.relkind = 'v' AND coalesce(c.reloptions, '{}') && ARRAY['security_invoker=true',
            'security_invoker=on', 'security_invoker=1', 'security_invoker=yes'])
FROM tainted t
JOIN pg_catalog.pg_class c ON c.oid = t.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
ORDER BY 2
"""

# SECURITY DEFINER functions the role can execute that reach a relation holding masked values.
# SQL-standard bodies record their relations and functions in pg_depend; other bodies are text,
# matched on names (cheap and conservative: a mention is enough). A body also reaches them through
# a function it calls that does (matched the same way, transitively), SQL it builds (plpgsql
# EXECUTE) or a language mcpkit cannot read (C: dblink, crosstab; plpython): those count where the
# definer's owner may read a masked column or a view over one (red team rt15pg F2: a definer
# function returning an invoker helper's `SELECT email` named no masked relation itself).
# Built-ins that run SQL carried in text, or read a column's values from the statistics: a body
# calling one reaches what its owner can read without naming it (red team rt16 F7: a LANGUAGE sql
# definer returning query_to_xml('SELECT email FROM ...'), another pg_stats' histogram bounds).
_SQL_FROM_TEXT: Final = "|".join(
    [
        "query_to_xml",
        "query_to_xmlschema",
        "query_to_xml_and_xmlschema",
        "cursor_to_xml",
        "table_to_xml",
        "table_to_xmlschema",
        "table_to_xml_and_xmlschema",
        "schema_to_xml",
        "schema_to_xml_and_xmlschema",
        "database_to_xml",
        "database_to_xml_and_xmlschema",
        "ts_stat",
        "pg_stats",
        "pg_stats_ext",
        "pg_stats_ext_exprs",
        "pg_statistic",
        "pg_statistic_ext_data",
    ]
)
_DEFINERS = r"""
WITH RECURSIVE fn AS (
    SELECT p.oid, p.proname, p.prosecdef, p.proowner, p.prosqlbody, l.lanname,
           lower(coalesce(p.prosrc, '')) AS src, quote_ident(n.nspname) || '.' || quote_ident(p.proname)
           || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS signature
    FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    JOIN pg_catalog.pg_language l ON l.oid = p.prolang
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
), named AS (
    SELECT f.oid FROM fn f
    WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                  WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = f.oid
                    AND d.refclassid = 'pg_catalog.pg_class'::regclass
                    AND d.refobjid = ANY(CAST(:relids AS oid[]))
                    AND (d.refobjsubid = 0 OR d.refobjid = ANY(CAST(:views AS oid[]))
                         OR (d.refobjid::text || '.' || d.refobjsubid) = ANY(CAST(:columns AS text[]))
                         OR f.prosqlbody::text LIKE '%\:varattno 0 %'))
       OR EXISTS (SELECT 1 FROM unnest(CAST(:names AS text[])) AS m(name)
                  WHERE f.src ~ ('\m' || regexp_replace(m.name, '([^a-z0-9_])', '\', 'g') || '\M'))
), reach(oid) AS (
    SELECT oid FROM named
    UNION SELECT oid FROM fn WHERE lanname NOT IN ('sql', 'plpgsql', 'internal')
                                OR (lanname = 'plpgsql' AND src ~ '\mexecute\M')
                                OR src ~ ('\m(' || :builtins || ')\M')
                                OR strpos(src, 'u&"') > 0
  UNION
    SELECT f.oid FROM reach r JOIN fn g ON g.oid = r.oid JOIN fn f ON f.oid <> g.oid
    WHERE f.src ~ ('\m' || regexp_replace(lower(g.proname), '([^a-z0-9_])', '\', 'g') || '\M')
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                  WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = f.oid
                    AND d.refclassid = 'pg_catalog.pg_proc'::regclass AND d.refobjid = g.oid)
)
SELECT DISTINCT f.signature FROM fn f
WHERE f.prosecdef AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                              WHERE pg_has_role(current_user, r.oid, 'MEMBER')
                                AND has_function_privilege(r.oid, f.oid, 'EXECUTE'))
  AND (f.oid IN (SELECT oid FROM named)
       OR (f.oid IN (SELECT oid FROM reach)
           AND (EXISTS (SELECT 1 FROM unnest(CAST(:masked_relids AS oid[]), CAST(:masked_attnums AS int2[]))
                            AS m(relid, attnum)
                        WHERE has_column_privilege(f.proowner, m.relid, m.attnum, 'SELECT'))
                OR EXISTS (SELECT 1 FROM unnest(CAST(:views AS oid[])) AS v(relid)
                           WHERE has_table_privilege(f.proowner, v.relid, 'SELECT')))))
ORDER BY 1
"""

_MASKED_ATTRS: Final = """
SELECT c.oid, a.attnum FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table)) AND a.attname = ANY(:masked)
"""


def masked_attributes(conn: Connection, masked: Mapping[str, frozenset[str]]) -> tuple[list[int], list[int]]:
    """The masked columns as (table oids, attnums), in table order: what `VIEWS_OVER` starts from.

    Each table is resolved as the calls' queries resolve it (the session's search_path).
    """
    relids: list[int] = []
    attnums: list[int] = []
    for table, columns in sorted(masked.items()):
        for oid, attnum in conn.execute(
            text(_MASKED_ATTRS), {"table": on_path(conn, table), "masked": sorted(columns)}
        ):
            relids.append(int(oid))
            attnums.append(int(attnum))
    return relids, attnums


def masked_routes(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """Views, materialized views and SECURITY DEFINER functions that hand a masked column to the
    current role with their owner's rights (one finding each, with the statement that stops it)."""
    relids, attnums = masked_attributes(conn, masked)
    if not relids:
        return []
    role = str(conn.execute(text("SELECT quote_ident(current_user)")).scalar())
    closure = conn.execute(text(VIEWS_OVER), {"relids": relids, "attnums": attnums}).all()
    findings = []
    for _, name, _, kind, exposed in closure:
        if not exposed:
            continue
        if kind == "m":
            what, alt = "materialized view", ""
        else:
            what, alt = "view", f"; or ALTER VIEW {name} SET (security_invoker = true)"
        findings.append(
            Finding(
                "masked-column-view",
                f"{what} {name} reads a masked column with its owner's rights",
                f"REVOKE SELECT ON {name} FROM {role} (also from PUBLIC or the role that grants it{alt})",
            )
        )
    params = {
        "relids": sorted({int(r[0]) for r in closure}),
        "views": sorted({int(r[0]) for r in closure if r[3] in ("v", "m")}),
        "columns": [f"{r}.{a}" for r, a in zip(relids, attnums, strict=True)],
        "names": sorted({str(r[2]) for r in closure}),
        "builtins": _SQL_FROM_TEXT,
        "masked_relids": relids,
        "masked_attnums": attnums,
    }
    for (function,) in conn.execute(text(_DEFINERS), params):
        findings.append(
            Finding(
                "masked-column-definer",
                f"function {function} runs as its owner and reads a relation with masked columns",
                f"REVOKE EXECUTE ON FUNCTION {function} FROM {role}, PUBLIC",
            )
        )
    return findings
