"""PostgreSQL views and functions over masked tables, with their stored SQL.

Which objects `masking.view_order` analyses (red team rt19mask F8): every view and materialized
view that reads a masked table (pg_depend from its rewrite rule, any column, through other views
and functions too) and that the current role, or a role it can SET ROLE to, may select; and every
function over one such a role may execute, whatever the function policy says (red team rt23 F2/F3:
attribute notation `o.f`, an operator over a built-in symbol and a cast call functions admission
never names), or that PostgreSQL runs with no EXECUTE check (an aggregate's components,
`routes.unchecked_functions`):

- LANGUAGE sql, whose body reads one of those relations or functions (pg_depend for a SQL-standard
  body, a mention of the name otherwise), analysed; the reads are followed to a fixpoint (rt23 F5:
  a cap of 8 levels let a 12-deep chain through), and a function no such role may execute still
  counts for those calling it (a SECURITY DEFINER caller runs it without the reader's EXECUTE);
- any other language (plpgsql, C, ...) whose owner or caller can read one of those relations:
  its body cannot be analysed, so it counts (red team rt21 F3: a plpgsql `string_agg` over the
  table answered the masked ranking), unless a superuser's extension installed it.

Each carries the names of the user-defined aggregates (pg_proc prokind 'a' outside pg_catalog).
`pg_get_viewdef` and `prosrc` are readable by every role, so nothing is hidden here. Row-level-security
policies over those relations and functions come too (`postgres.policies`, red team rt27 F7).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.postgres.body_settings import foreign_settings
from mcpkit.sql.profiles.postgres.catalog_path import catalog_path, on_path
from mcpkit.sql.profiles.postgres.fnpath import path_reason, volatile_names
from mcpkit.sql.profiles.postgres.implicit import with_implicit
from mcpkit.sql.profiles.postgres.policies import policy_queries
from mcpkit.sql.profiles.postgres.routes import unchecked_functions
from mcpkit.sql.profiles.stored import ORDER_FIX, StoredQuery

__all__ = ["ESCAPED", "POSITIONS", "name_pattern", "postgres_primary_key", "postgres_stored_queries"]

_RESOLVE: Final = "SELECT coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))::oid"
_MEMBER: Final = (
    "EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE pg_has_role(current_user, r.oid, 'MEMBER')"
)
# The masked tables, then every view over them or over a function that reads them (any column:
# the scan order is the table's).
_READERS: Final = f"""
WITH RECURSIVE reads(relid) AS (
    SELECT unnest(CAST(:relids AS oid[]))
  UNION
    SELECT r.ev_class FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid AND d.classid = 'pg_catalog.pg_rewrite'::regclass
    WHERE d.refclassid = 'pg_catalog.pg_proc'::regclass AND d.refobjid = ANY(CAST(:fns AS oid[]))
  UNION
    SELECT r.ev_class FROM reads t
    JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = t.relid
      AND d.classid = 'pg_catalog.pg_rewrite'::regclass
    JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
    WHERE r.ev_class <> d.refobjid
)
SELECT c.oid, n.nspname, c.relname, lower(c.relname), c.relkind IN ('v', 'm')
       AND {_MEMBER} AND has_schema_privilege(r.oid, n.oid, 'USAGE')
           AND (has_table_privilege(r.oid, c.oid, 'SELECT')
                OR has_any_column_privilege(r.oid, c.oid, 'SELECT'))),
       CASE WHEN c.relkind IN ('v', 'm') THEN pg_catalog.pg_get_viewdef(c.oid) END,
       quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relkind
FROM (SELECT DISTINCT relid FROM reads) t
JOIN pg_catalog.pg_class c ON c.oid = t.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
ORDER BY 2, 3
"""
_FUNCTIONS: Final = f"""
WITH fn AS MATERIALIZED (
    SELECT p.oid, n.nspname, p.proname, p.prosrc, p.prosqlbody, p.proargnames, p.proretset, p.proconfig,
           CASE WHEN p.prosecdef THEN pg_catalog.pg_get_userbyid(p.proowner) ELSE current_user END AS runner,
           p.oid = ANY(CAST(:unchecked AS oid[]))
           OR {_MEMBER} AND has_function_privilege(r.oid, p.oid, 'EXECUTE')) AS usable
    FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    JOIN pg_catalog.pg_language l ON l.oid = p.prolang
    WHERE l.lanname = 'sql' AND p.prokind = 'f' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
)
SELECT f.oid, f.nspname, f.proname, quote_ident(f.nspname) || '.' || quote_ident(f.proname)
           || '(' || pg_catalog.pg_get_function_identity_arguments(f.oid) || ')',
       CASE WHEN f.prosqlbody IS NULL THEN f.prosrc ELSE pg_catalog.pg_get_function_sqlbody(f.oid) END,
       coalesce(f.proargnames, '{{}}'), f.usable, NOT f.proretset,
       CASE WHEN f.prosqlbody IS NULL THEN (
           SELECT substr(c, strpos(c, '=') + 1) FROM unnest(f.proconfig) c
           WHERE lower(split_part(c, '=', 1)) = 'search_path' LIMIT 1) END, f.runner,
       f.proconfig, f.prosqlbody IS NULL AND strpos(lower(coalesce(f.prosrc, '')), 'u&"') > 0
FROM fn f
WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
              WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = f.oid
                AND ((d.refclassid = 'pg_catalog.pg_class'::regclass
                      AND d.refobjid = ANY(CAST(:relids AS oid[])))
                  OR (d.refclassid = 'pg_catalog.pg_proc'::regclass
                      AND d.refobjid = ANY(CAST(:fns AS oid[])))))
   OR lower(coalesce(f.prosrc, '')) ~ CAST(:pattern AS text)
   OR (f.prosqlbody IS NULL AND strpos(lower(coalesce(f.prosrc, '')), 'u&"') > 0)
ORDER BY 1, 2, 3
"""
# Every function and procedure with a setting of its own (`body_settings`): it stays in force for
# every body parsed while it runs, its callees' string bodies too (red team rt31 F5).
_CONFIGURED: Final = f"""
SELECT p.oid, n.nspname, p.proname, quote_ident(n.nspname) || '.' || quote_ident(p.proname)
           || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')', p.proconfig,
       p.oid = ANY(CAST(:unchecked AS oid[]))
       OR {_MEMBER} AND has_function_privilege(r.oid, p.oid, 'EXECUTE')),
       NOT p.proretset, CASE WHEN p.prokind = 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE p.proconfig IS NOT NULL
ORDER BY 2, 3, 1
"""
# Functions in any other language the role may execute, whose owner (SECURITY DEFINER) or caller
# can read a relation over a masked table: nothing tells what their body reads, or in what order.
_OPAQUE: Final = f"""
SELECT p.oid, n.nspname, p.proname, quote_ident(n.nspname) || '.' || quote_ident(p.proname)
           || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')', l.lanname,
       NOT p.proretset
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE l.lanname <> 'sql' AND p.prokind IN ('f', 'w') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND p.prorettype NOT IN ('pg_catalog.trigger'::regtype, 'pg_catalog.event_trigger'::regtype)
  AND {_MEMBER} AND (has_function_privilege(r.oid, p.oid, 'EXECUTE')
                    OR p.oid = ANY(CAST(:unchecked AS oid[])))
       AND EXISTS (SELECT 1 FROM unnest(CAST(:relids AS oid[])) t(relid)
                   WHERE has_any_column_privilege(CASE WHEN p.prosecdef THEN p.proowner ELSE r.oid END,
                                                  t.relid, 'SELECT')))
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_roles o ON o.oid = p.proowner
                  WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
                    AND o.rolsuper)
ORDER BY 2, 3, 1
"""
# An inheritance parent's key holds for its own rows only: a read of it reads its children's rows
# too, which may repeat a key (rt30 F1), so it has none (a partitioned table's key holds over all).
_PRIMARY: Final = """
SELECT a.attname FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
WHERE i.indisprimary AND i.indrelid = to_regclass(:name)
  AND (c.relkind = 'p' OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits h WHERE h.inhparent = c.oid))
"""
# User-defined aggregates: any may concatenate its rows in the order they arrive (red team rt21 F6).
_AGGREGATES: Final = """
SELECT DISTINCT lower(p.proname) FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE p.prokind = 'a' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
"""
# System columns that tell where a row sits or when it was written (rt23 F6): after CLUSTER on a
# masked column's index, or a load in its order, they follow the masked ranking. `tableoid` names
# the partition, which a range partitioning on a masked column makes a ranking too.
POSITIONS: Final = frozenset({"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"})
_BODY: Final = re.compile(r"^\s*BEGIN\s+ATOMIC\b(?P<body>.*)\bEND\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_RETURN: Final = re.compile(r"^\s*RETURN\b(?P<expr>.*)$", re.IGNORECASE | re.DOTALL)


def name_pattern(names: Iterable[str]) -> str:
    r"""A PostgreSQL regular expression matching a mention of any of `names` (lower case) in a
    lower-cased body: also where a name starts or ends with a character no word holds, and with a
    double quote written doubled as a quoted identifier writes it.

    >>> name_pattern(["cust", 'a"b'])
    '(?<![[:alnum:]_])(a\\"\\"b|a\\"b|cust)(?![[:alnum:]_])'
    """
    spelt = {n for name in names for n in (name, name.replace('"', '""'))}
    shown = sorted(re.sub(r"([^\w])", r"\\\1", n) for n in spelt)
    return rf"(?<![[:alnum:]_])({'|'.join(shown)})(?![[:alnum:]_])"


def postgres_primary_key(conn: Connection, schema: str | None, table: str) -> list[str]:
    """The primary key columns of a table (pg_index, readable by every role: the whole key)."""
    quoted = ".".join('"' + n.replace('"', '""') + '"' for n in (schema, table) if n is not None)
    return [str(r[0]) for r in conn.execute(text(_PRIMARY), {"name": on_path(conn, quoted)})]


def _lexed(settings: str) -> str | None:
    """Why a function run under its own `settings` (`body_settings`) cannot be checked, if so: they
    hold for its string body and for that of every function it runs (red team rt30 F4b, rt31 F5)."""
    if not settings:
        return None
    return (
        f"its own setting {settings} may make PostgreSQL read its body, and those of the functions"
        " it runs, otherwise than this check"
    )


ESCAPED: Final = (
    'its body spells a name with Unicode escapes (U&"..."), which this check does not read as PostgreSQL does'
)
"""Why a string body holding `U&"` is unreadable: the name match and the parse miss the name it
spells (red team rt31 F7), so it counts as naming every masked table."""


def _statements(body: str) -> tuple[str, ...]:
    """The statements of a function body (`BEGIN ATOMIC ... END` and `RETURN expr` unwrapped)."""
    found = _BODY.match(body)
    if found:
        body = found["body"]
    returned = _RETURN.match(body)
    if returned:
        body = f"SELECT {returned['expr'].strip().rstrip(';')}"
    return (body,)


def postgres_stored_queries(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[StoredQuery]:
    """The views and functions over masked tables the current role can use."""
    relids = set()
    columns: list[tuple[int, str]] = []  # (table, masked column): a policy reading one (rt28 F3)
    for table, cols in masked.items():
        oid = conn.execute(text(_RESOLVE), {"table": on_path(conn, table)}).scalar()
        if oid is not None:
            relids.add(int(oid))
            columns += [(int(oid), c) for c in cols]
    if not relids:
        return []
    with catalog_path(conn):  # no user operator answers `>= 16384` (`catalog_path`)
        role = str(conn.execute(text("SELECT quote_ident(current_user)")).scalar())
        unchecked = sorted(unchecked_functions(conn))  # aggregate components, ...: no EXECUTE check
        configured = conn.execute(text(_CONFIGURED), {"unchecked": unchecked}).all()
        configured = [r for r in configured if foreign_settings(r[4])]
        fns: set[int] = {int(r[0]) for r in configured}  # what calls one is over a masked table (rt31 F5)
        names: set[str] = {str(r[2]).lower() for r in configured}
        functions: Sequence[Any] = []
        while True:  # to a fixpoint (red team rt23 F5: a depth cap let a 12-deep chain through)
            rows = conn.execute(text(_READERS), {"relids": sorted(relids), "fns": sorted(fns)}).all()
            readers = sorted(int(r[0]) for r in rows)
            opaque = conn.execute(text(_OPAQUE), {"relids": readers, "unchecked": unchecked}).all()
            names |= {str(r[3]) for r in rows} | {str(f[2]).lower() for f in opaque}
            params = {
                "relids": readers,
                "fns": sorted(fns | {int(f[0]) for f in opaque}),
                "pattern": name_pattern(names),
                "unchecked": unchecked,
            }
            functions = conn.execute(text(_FUNCTIONS), params).all()
            found = {int(f[0]) for f in [*opaque, *functions]}
            grown = {str(f[2]).lower() for f in functions} - names
            if found <= fns and not grown:
                break
            fns |= found
            names |= grown
        aggregates = frozenset(str(r[0]) for r in conn.execute(text(_AGGREGATES)))
    out: list[StoredQuery] = []
    for _, schema, name, _, usable, definition, quoted, kind in rows:
        if definition is not None:
            what = "MATERIALIZED VIEW" if kind == "m" else "VIEW"
            out.append(
                StoredQuery(
                    "view",
                    str(schema),
                    str(name),
                    (str(definition),),
                    f"REVOKE SELECT ON {quoted} FROM {role} (also from PUBLIC or the role that grants it; "
                    f"or {ORDER_FIX}: {what})",
                    usable=bool(usable),
                    aggregates=aggregates,
                    positions=POSITIONS,
                )
            )
    # clock_timestamp(), random(), nextval(), every user function: numbers in scan order (rt27 F4, rt29)
    volatile = volatile_names(conn)
    out = [replace(item, volatile=volatile) for item in out]
    for _, schema, name, signature, body, argnames, usable, one_row, setting, runner, config, u in functions:
        # its own settings: one that changes how its and its callees' bodies read (rt30 F4b, rt31 F5,
        # any body kind); a name spelt with Unicode escapes (rt31 F7); its own search_path, where a
        # name of its string body may be another relation (rt27 F2)
        own = _lexed(foreign_settings(config)) or (ESCAPED if u else None)
        if own is None and setting is not None:
            own = path_reason(conn, str(body or ""), str(setting), str(runner))
        out.append(
            StoredQuery(
                "function",
                str(schema),
                str(name),
                _statements(str(body or "")),
                f"REVOKE EXECUTE ON FUNCTION {signature} FROM {role}, PUBLIC (or {ORDER_FIX})",
                frozenset(str(a) for a in argnames if a),
                # Whatever the function policy says: `o.f`, an operator or a cast calls it (rt23 F2, F3).
                usable=bool(usable),
                aggregates=aggregates,
                positions=POSITIONS,
                one_row=bool(one_row),  # a non-SETOF function keeps its last query's first row (rt24 F5)
                hidden=own,
                volatile=volatile,
            )
        )
    for _, schema, name, signature, language, one_row in opaque:
        out.append(
            StoredQuery(
                "function",
                str(schema),
                str(name),
                (),
                f"REVOKE EXECUTE ON FUNCTION {signature} FROM {role}, PUBLIC",
                hidden=f"it is written in {language}, whose body this check cannot read",
                one_row=bool(one_row),  # not SETOF: one value where a body calls it (rt27 F8)
            )
        )
    listed = {int(f[0]) for f in [*functions, *opaque]}
    for oid, schema, name, signature, config, usable, one_row, what in configured:
        if int(oid) not in listed:  # whatever it reads: what it runs may reach one (rt31 F5)
            out.append(
                StoredQuery(
                    "function",
                    str(schema),
                    str(name),
                    (),
                    f"ALTER {what} {signature} RESET ALL (or REVOKE EXECUTE ON {what} {signature}"
                    f" FROM {role}, PUBLIC)",
                    hidden=_lexed(foreign_settings(config)),
                    usable=bool(usable),
                    one_row=bool(one_row),
                )
            )
    # Row-level-security policies run on every read of their table (red team rt27 F7).
    with catalog_path(conn):
        policies = policy_queries(conn, readers, fns, role, aggregates, POSITIONS, columns)
    out += [replace(item, volatile=volatile) for item in policies]  # `nextval(...) <= 2`: rt27 F4
    return with_implicit(out, conn, role)  # operators, casts, domain CHECKs run user functions (rt32)
