"""Masked columns on PostgreSQL: the calls' role must hold SELECT on the other columns only, and
read no view, materialized view or SECURITY DEFINER function that reads them with its owner's rights."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot import exp

from mcpkit.sql.profiles.base import DerivedMask, Finding
from mcpkit.sql.profiles.scan_order import hint, index_hints

__all__ = ["derived_masks", "exact_ties", "masked_routes", "readable_masked_columns", "scan_order_hints"]

# Resolved through the session's search_path, as the calls' queries resolve the name; the
# privilege is the engine's own answer for this role (direct, through PUBLIC or a membership).
_COLUMNS = """
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), quote_ident(current_user),
       array_agg(a.attname ORDER BY a.attnum)
           FILTER (WHERE a.attname = ANY(:masked) AND has_column_privilege(c.oid, a.attnum, 'SELECT')),
       array_agg(quote_ident(a.attname) ORDER BY a.attnum) FILTER (WHERE NOT a.attname = ANY(:masked))
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))
GROUP BY n.nspname, c.relname
"""


def readable_masked_columns(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """One finding per table whose masked columns the current role can still select.

    The fix revokes the table-wide SELECT and grants the other columns (column privileges).
    """
    findings = []
    for table, columns in sorted(masked.items()):
        row = conn.execute(text(_COLUMNS), {"table": table, "masked": sorted(columns)}).first()
        if row is None or not row[2]:
            continue
        name, role, readable, others = row
        grant = f"GRANT SELECT ({', '.join(others)}) ON {name} TO {role}" if others else ""
        findings.append(
            Finding(
                "masked-column-readable",
                f"can read masked column(s) {', '.join(readable)} of {name}",
                f"REVOKE SELECT ON {name} FROM {role}; {grant}".rstrip("; ")
                + " (also from PUBLIC or the role that grants it, where it comes from there)",
            )
        )
    return findings


# Views and materialized views whose rewrite rule references a masked column (or the whole row of
# a masked table), then every view over those, transitively: PostgreSQL records each column a
# view's query reads in pg_depend (refobjsubid), but not a whole-row reference (`c::text`), so a
# view over such a table whose query holds any whole-row Var counts too. A view reads its relations
# with its owner's rights unless it is security_invoker, so a readable one hands the column on;
# invoker views are followed (a definer view over one still reads as its owner) but not reported.
# Readable counts every role the current one can SET ROLE to (MEMBER: NOINHERIT too; mask17 F6).
_CLOSURE = """
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

_MASKED_ATTRS = """
SELECT c.oid, a.attnum FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table)) AND a.attname = ANY(:masked)
"""


def masked_routes(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """Views, materialized views and SECURITY DEFINER functions that hand a masked column to the
    current role with their owner's rights (one finding each, with the statement that stops it)."""
    relids: list[int] = []
    attnums: list[int] = []
    for table, columns in sorted(masked.items()):
        for oid, attnum in conn.execute(text(_MASKED_ATTRS), {"table": table, "masked": sorted(columns)}):
            relids.append(int(oid))
            attnums.append(int(attnum))
    if not relids:
        return []
    role = str(conn.execute(text("SELECT quote_ident(current_user)")).scalar())
    closure = conn.execute(text(_CLOSURE), {"relids": relids, "attnums": attnums}).all()
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


# The masked table, resolved as queries resolve it (a derived key is already quoted and qualified),
# then every partition and inheritance child below it and every parent above it (PostgreSQL checks
# only the privileges of the table a query names, so a parent hands on its children's rows), each
# with the masked columns it has and whether it is an ancestor.
_FAMILY = """
WITH RECURSIVE down(relid) AS (
    SELECT coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))::oid
  UNION
    SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN down f ON i.inhparent = f.relid
), up(relid) AS (
    SELECT coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))::oid
  UNION
    SELECT i.inhparent FROM pg_catalog.pg_inherits i JOIN up f ON i.inhrelid = f.relid
), family(relid, above) AS (
    SELECT relid, false FROM down
  UNION
    SELECT relid, true FROM up WHERE NOT EXISTS (SELECT 1 FROM down d WHERE d.relid = up.relid)
)
SELECT f.relid, n.nspname, c.relname, pg_catalog.pg_table_is_visible(c.oid),
       array_agg(a.attnum ORDER BY a.attnum), array_agg(a.attname ORDER BY a.attnum), f.above
FROM family f
JOIN pg_catalog.pg_class c ON c.oid = f.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE a.attname = ANY(:masked)
GROUP BY f.relid, n.nspname, c.relname, c.oid, f.above
"""
_RESOLVE = "SELECT coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))::oid"
# Generated columns computed from the given columns: PostgreSQL records each column a generation
# expression reads in pg_depend, from the expression (pg_attrdef) to the column.
_GENERATED = """
SELECT DISTINCT a.attname FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.objid = ad.oid
  AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = a.attrelid
  AND d.refobjsubid = ANY(CAST(:attnums AS int2[]))
WHERE a.attrelid = :relid AND a.attgenerated <> ''
"""
# Row triggers of a table (tgtype bits: 1 row, 2 before, 4 insert, 16 update) with their function
# and arguments (tgargs: each argument ends in a zero byte).
_TRIGGERS = """
SELECT t.tgname, n.nspname, p.proname, t.tgargs, t.tgnargs
FROM pg_catalog.pg_trigger t
JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE t.tgrelid = :relid AND NOT t.tgisinternal AND t.tgtype & 3 = 3 AND t.tgtype & 20 <> 0
ORDER BY t.tgname
"""
# The built-in full-text triggers: (target tsvector column, configuration, source columns...).
_TSVECTOR_TRIGGERS: Final = frozenset({"tsvector_update_trigger", "tsvector_update_trigger_column"})


def _triggers(conn: Connection, relid: int) -> list[tuple[str, bool, list[str]]]:
    """BEFORE INSERT/UPDATE row triggers: name, whether it is a built-in full-text trigger, arguments
    (the others are warned about: `profiles.postgres.triggers`)."""
    out = []
    for name, schema, fn, args, nargs in conn.execute(text(_TRIGGERS), {"relid": relid}).all():
        parts = [a.decode("utf-8", "replace") for a in bytes(args).split(b"\0")[: int(nargs)]]
        out.append((str(name), str(schema) == "pg_catalog" and str(fn) in _TSVECTOR_TRIGGERS, parts))
    return out


def _trigger_copies(conn: Connection, relid: int, masked: set[str]) -> set[str]:
    """Columns a built-in full-text trigger writes from a masked column (or from such a copy)."""
    copies: set[str] = set()
    tsvector = [args for _, builtin, args in _triggers(conn, relid) if builtin and len(args) >= 3]
    grew = True
    while grew:
        grew = False
        for args in tsvector:
            if args[0] not in copies | masked and masked.union(copies).intersection(args[2:]):
                copies.add(args[0])
                grew = True
    return copies


def derived_masks(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[DerivedMask]:
    """Generated columns computed from a masked column, the partitions and inheritance children of
    a masked table (a partition is readable by its own name, with its own grants), its parents
    (a query on a parent reads the children's rows with the parent's grants), and the tsvector
    columns PostgreSQL's full-text triggers write from a masked column."""
    out = []
    for table, columns in sorted(masked.items()):
        parent = conn.execute(text(_RESOLVE), {"table": table}).scalar()
        rows = conn.execute(text(_FAMILY), {"table": table, "masked": sorted(columns)}).all()
        for relid, schema, name, visible, attnums, attnames, above in rows:
            found = conn.execute(text(_GENERATED), {"relid": relid, "attnums": list(attnums)})
            generated = {str(r[0]) for r in found}
            generated |= _trigger_copies(conn, int(relid), generated | {str(a) for a in attnames})
            top = relid == parent
            if top and not generated:
                continue
            key = str(name) if visible else _qualified(conn, str(schema), str(name))
            names = frozenset(generated if top else generated | {str(a) for a in attnames})
            if top:
                why = "generated from a masked column, or written from one by a full-text trigger"
            elif above:
                why = f"a parent of {table}, whose rows it reads"
            else:
                why = f"a partition or child of {table}"
            out.append(DerivedMask(key, str(schema), str(name), names, why))
    return out


def _qualified(conn: Connection, schema: str, name: str) -> str:
    quoted = conn.execute(text("SELECT quote_ident(:s) || '.' || quote_ident(:n)"), {"s": schema, "n": name})
    return str(quoted.scalar())


_CLUSTERED = """
SELECT i.relname, a.attname
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY (x.indkey)
WHERE x.indrelid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table)) AND x.indisclustered
"""
# pg_stats shows a column only to a role that may read it: the serving role (without the
# masked column) sees nothing here; an administrator's doctor run sees the correlation.
_CORRELATED = """
SELECT s.attname, s.correlation
FROM pg_stats s
JOIN pg_class c ON c.relname = s.tablename
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = s.schemaname
WHERE c.oid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table)) AND abs(s.correlation) > 0.9
"""


# The partition key (red team mask17 F3: Append scans partitions in bound order, so the scan order
# follows a key over a masked column): its plain columns, and the key's text for expressions.
_PARTITION_KEY = """
SELECT pg_catalog.pg_get_partkeydef(p.partrelid),
       ARRAY(SELECT a.attname FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = p.partrelid AND a.attnum = ANY(CAST(p.partattrs AS int2[])))
FROM pg_catalog.pg_partitioned_table p
WHERE p.partrelid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))
"""


def _partition_hints(conn: Connection, table: str, wanted: set[str]) -> list[str]:
    out = []
    for keydef, plain in conn.execute(text(_PARTITION_KEY), {"table": table}).all():
        pairs = re.findall(r'"((?:[^"]|"")+)"|(\w+)', str(keydef))  # quoted or plain names
        words = {part.casefold() for pair in pairs for part in pair if part}
        for column in sorted(wanted & ({str(c).casefold() for c in plain} | words)):
            out.append(hint(table, column, f"partitioned by {keydef}: partitions are scanned in bound order"))
    return out


def scan_order_hints(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
    """Indexes over a masked column (key or INCLUDE), CLUSTER on one, a partition key over one (any
    level: partitions and parents of a masked table are masked too), and a physical order that
    follows one (`pg_stats.correlation` near +-1, where the role may read it)."""
    out = index_hints(conn, masked)
    for table, columns in sorted(masked.items()):
        wanted = {c.casefold() for c in columns}
        out += _partition_hints(conn, table, wanted)
        for index, column in conn.execute(text(_CLUSTERED), {"table": table}).all():
            if str(column).casefold() in wanted:
                out.append(hint(table, str(column), f"table clustered on index {index}"))
        for column, correlation in conn.execute(text(_CORRELATED), {"table": table}).all():
            if str(column).casefold() in wanted:
                out.append(hint(table, str(column), f"physical order, correlation {float(correlation):+.2f}"))
    return out


def exact_ties(node: exp.Expr) -> list[exp.Expr]:
    """The text form in the C collation: numeric 1.0 = 1.00 and interval '1 day' = '24:00:00'."""
    text_form = exp.Cast(this=node.copy(), to=exp.DataType.build("text"))
    return [exp.Collate(this=text_form, expression=exp.Identifier(this="C", quoted=True))]
