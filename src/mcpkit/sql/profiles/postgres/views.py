"""PostgreSQL: views that read their relations with another role's rights.

A view that is not `security_invoker` (and every materialized view) reads its relations as its
owner: the owner's table and column privileges apply, and row-level security applies as the
owner (not at all when the owner owns the table, is a superuser or has BYPASSRLS). So a view the
reader can select is a route around the reader's own grants when it gives more than the reader
could read itself. The rule, for each such view the reader can select and does not own:

- the owner is a superuser or has BYPASSRLS: refused;
- it reads a relation with row-level security: refused (the policies are the owner's, not the
  reader's);
- it reads a relation the reader may not SELECT whole (a catalog such as pg_authid or
  pg_statistic, a table with column grants, another role's table): refused.

Otherwise the view shows nothing the reader could not read itself. The relations are taken from
the view's stored rule (its range table), which names pinned catalogs that `pg_depend` omits.
Functions a view calls run as the caller and are checked by `routes.audit_routes`.

A partitioned or inheritance parent is the same kind of route (`rls_parents`): PostgreSQL applies
only the queried table's policies, so a parent without row-level security hands out the rows its
children's policies hide (red team pg14 F8).
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding

__all__ = ["owner_views", "rls_parents", "row_filtered_views"]

_VIEWS: Final = r"""
SELECT c.oid, quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relkind,
  quote_ident(o.rolname), o.rolsuper, o.rolbypassrls,
  coalesce((SELECT lower(option_value) IN ('on', 'true', 'yes', '1')
            FROM pg_options_to_table(c.reloptions) WHERE option_name = 'security_invoker'), false),
  ARRAY(SELECT DISTINCT m[1]::oid FROM pg_rewrite r,
        regexp_matches(r.ev_action::text, '[:]relid (\d+)', 'g') m
        WHERE r.ev_class = c.oid AND m[1]::oid <> c.oid),
  coalesce((SELECT string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
       ELSE quote_ident(a.grantee::regrole::text) END, ', ')
     FROM aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
     WHERE a.privilege_type = 'SELECT' AND (a.grantee = 0 OR pg_has_role(a.grantee, 'USAGE'))),
     quote_ident(current_user))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_roles o ON o.oid = c.relowner
WHERE c.relkind IN ('v', 'm') AND (n.nspname NOT IN ('pg_catalog', 'information_schema') OR c.oid >= 16384)
  AND has_schema_privilege(n.oid, 'USAGE')
  AND (has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'))
  AND NOT pg_has_role(c.relowner, 'USAGE')
ORDER BY 2
"""
_RELATIONS: Final = """
SELECT c.oid, n.nspname || '.' || c.relname, c.relrowsecurity,
  has_table_privilege(c.oid, 'SELECT') AND has_schema_privilege(n.oid, 'USAGE')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ANY(:oids)
"""


def owner_views(conn: Connection, allowed: frozenset[str] = frozenset()) -> list[Finding]:
    """One finding per selectable view that reads with its owner's rights more than the role could.

    Args:
        conn: A connection in the role's read-only session.
        allowed: `view:schema.name` opt-ins for reviewed views.
    """
    views = conn.execute(text(_VIEWS)).all()
    oids = sorted({int(o) for v in views for o in v[7]})
    rows = conn.execute(text(_RELATIONS), {"oids": oids})
    relations = {int(r[0]): (str(r[1]), bool(r[2]), bool(r[3])) for r in rows}
    found = []
    for _, name, kind, owner, rolsuper, bypassrls, invoker, reads, grantees in views:
        if (kind == "v" and invoker) or f"view:{name}" in allowed:
            continue
        why = (
            f"its owner {owner} is a superuser"
            if rolsuper
            else f"its owner {owner} has BYPASSRLS"
            if bypassrls
            else None
        )
        for oid in reads:
            if why or int(oid) not in relations:
                continue
            rel, rls, selectable = relations[int(oid)]
            if rls:
                why = f"it reads {rel}, which has row-level security (the owner's policies apply)"
            elif not selectable:
                why = (
                    f"it reads {rel}, which the role may not read whole itself, so it may hand on"
                    " those columns' values or their order (a LIMIT, a numbering, a row's ctid)"
                )
        if why is None:
            continue
        what = "materialized view" if kind == "m" else "view"
        fix = (
            f"REVOKE SELECT ON {name} FROM {grantees}"
            if kind == "m"
            else f"ALTER VIEW {name} SET (security_invoker = on); or REVOKE SELECT ON {name} FROM {grantees}"
        )
        found.append(
            Finding(
                "owner-view",
                f"{what} {name} reads its relations with its owner's rights and {why}",
                fix,
                f"view:{name}",
            )
        )
    return found


# Pairs in a partition or inheritance tree where the one read has no row-level security and the
# other has it: a parent read over children's policies (PostgreSQL applies only the queried table's),
# or a child read by its own name under its ancestors' policies.
_UNGUARDED_IN_TREE: Final = """
WITH RECURSIVE tree(parent, child) AS (
  SELECT inhparent, inhrelid FROM pg_inherits
  UNION SELECT t.parent, i.inhrelid FROM tree t JOIN pg_inherits i ON i.inhparent = t.child),
pairs(read, guarded, read_is_parent) AS (
  SELECT parent, child, true FROM tree UNION ALL SELECT child, parent, false FROM tree)
SELECT quote_ident(rn.nspname) || '.' || quote_ident(r.relname), pairs.read_is_parent,
  string_agg(DISTINCT quote_ident(gn.nspname) || '.' || quote_ident(g.relname), ', '),
  quote_ident(current_user)
FROM pairs JOIN pg_class r ON r.oid = pairs.read JOIN pg_namespace rn ON rn.oid = r.relnamespace
JOIN pg_class g ON g.oid = pairs.guarded JOIN pg_namespace gn ON gn.oid = g.relnamespace
WHERE g.relrowsecurity AND row_security_active(g.oid) AND NOT r.relrowsecurity
  AND has_schema_privilege(rn.oid, 'USAGE')
  AND (has_table_privilege(r.oid, 'SELECT') OR has_any_column_privilege(r.oid, 'SELECT'))
GROUP BY 1, 2 ORDER BY 1, 2
"""


def rls_parents(conn: Connection, allowed: frozenset[str] = frozenset()) -> list[Finding]:
    """One finding per selectable parent without row-level security whose partitions or
    inheritance children have it (a query on the parent reads their rows under no policy), and per
    selectable child or partition without it under a parent with it (read by its own name).

    Args:
        conn: A connection in the role's read-only session.
        allowed: `relation:schema.name` opt-ins.
    """
    found = []
    for name, is_parent, others, role in conn.execute(text(_UNGUARDED_IN_TREE)):
        if f"relation:{name}" in allowed:
            continue
        if is_parent:
            message = (
                f"table {name} has no row-level security while its partitions or children {others} do:"
                " PostgreSQL applies only the queried table's policies, so reading the parent shows the"
                " rows theirs hide"
            )
            fix = (
                f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY (with the children's policies); or REVOKE "
                f"SELECT ON {name} FROM {role}"
            )
        else:
            message = (
                f"table {name} has no row-level security while {others}, which it is a partition or child"
                " of, does: read by its own name, its rows are under no policy"
            )
            fix = (
                f"REVOKE SELECT ON {name} FROM {role} (read it through its parent); or ALTER TABLE {name}"
                " ENABLE ROW LEVEL SECURITY with the parent's policies"
            )
        found.append(Finding("rls-parent", message, fix, f"relation:{name}"))
    return found


# A deparsed definition naming the current user (a keyword, upper case unless quoted as a name, or
# the function by its quoted name) or a session setting.
_PER_USER: Final = (
    r'(^|[^"\w])(CURRENT_USER|SESSION_USER|CURRENT_ROLE|USER)([^"\w]|$)'
    r'|(current_user|session_user|current_role|current_setting)"?\('
)
_INVOKER: Final = (
    "coalesce(%s.reloptions, '{}') && ARRAY['security_invoker=true', 'security_invoker=on',"
    " 'security_invoker=1', 'security_invoker=yes']"
)
# Views the role may select from that read with their owner's rights, and every such view below
# them (a security_invoker view reads as the querying role, so the role could read what it reads
# itself: the walk stops there). For each view reached: a definition naming the current user or a
# session setting, and each table it reads whose row-level security applies to its owner (neither
# superuser nor BYPASSRLS, and not the table's owner unless FORCE ROW LEVEL SECURITY).
_FILTERING_VIEWS: Final = rf"""
WITH RECURSIVE reach(top, view) AS (
  SELECT c.oid, c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind = 'v' AND NOT {_INVOKER % "c"}
    AND (n.nspname NOT IN ('pg_catalog', 'information_schema') OR c.oid >= 16384)
    AND has_schema_privilege(n.oid, 'USAGE')
    AND (has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'))
UNION
  SELECT r.top, d.refobjid FROM reach r
  JOIN pg_catalog.pg_rewrite w ON w.ev_class = r.view
  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = w.oid
   AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid <> r.view
  JOIN pg_catalog.pg_class c ON c.oid = d.refobjid
  WHERE c.relkind = 'v' AND NOT {_INVOKER % "c"}
), why(top, reason) AS (
  SELECT r.top, 'filters by the current user or a session setting'
    || CASE WHEN r.view <> r.top THEN ' (in ' || r.view::regclass::text || ')' ELSE '' END
  FROM reach r
  WHERE pg_catalog.pg_get_viewdef(r.view) ~ :per_user
UNION
  SELECT r.top, 'reads ' || t.oid::regclass::text || ' under its owner''s row-level security'
    || CASE WHEN r.view <> r.top THEN ' (through ' || r.view::regclass::text || ')' ELSE '' END
  FROM reach r
  JOIN pg_catalog.pg_class v ON v.oid = r.view
  JOIN pg_catalog.pg_roles o ON o.oid = v.relowner
  JOIN pg_catalog.pg_rewrite w ON w.ev_class = r.view
  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = w.oid
   AND d.refclassid = 'pg_catalog.pg_class'::regclass
  JOIN pg_catalog.pg_class t ON t.oid = d.refobjid
  WHERE t.relkind IN ('r', 'p') AND t.relrowsecurity AND NOT o.rolsuper AND NOT o.rolbypassrls
    AND (t.relforcerowsecurity OR NOT pg_has_role(v.relowner, t.relowner, 'USAGE'))
)
SELECT top::regclass::text || ' (' || string_agg(DISTINCT reason, '; ') || ')'
FROM why GROUP BY top ORDER BY 1 LIMIT 20
"""


def row_filtered_views(conn: Connection) -> list[str]:
    """Views the role may select from that read, with their owner's rights, rows filtered for it:
    through the owner's row-level security or a filter on the current user, in the view or in a
    view below it. Each with why. The planner estimates them from the base tables' statistics,
    gathered over every row, so a cost ceiling tells about the rows they leave out."""
    conn.execute(text("SET LOCAL search_path = pg_catalog"))  # regclass names come out qualified
    return [str(r) for r in conn.execute(text(_FILTERING_VIEWS), {"per_user": _PER_USER}).scalars()]
