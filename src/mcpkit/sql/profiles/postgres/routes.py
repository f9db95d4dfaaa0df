"""Every function the role can make PostgreSQL run, directly or through the catalog, checked.

What PostgreSQL checks EXECUTE for, and against whom (verified on PostgreSQL 15 by
tests/sql/test_sql_enforcement.py):

- a call, an operator (its function), a cast (its function), a domain CHECK, a function's
  default argument, attribute notation `t.f`, a function called in a view or an RLS policy: against
  the user running the query (a view's *relations* are read as the view's owner, its *functions*
  are run as the caller). Revoking EXECUTE closes each of these routes;
- an aggregate: EXECUTE on the aggregate against the caller, but its transition, final and
  combine functions against the aggregate's *owner*, so revoking them closes nothing; the
  aggregate itself must not be executable;
- a range type's subtype_diff runs inside the planner with no EXECUTE check at all, whenever a
  readable column of that type has statistics (even under EXPLAIN), so a readable relation with
  such a column counts as calling it;
- an operator with a selectivity estimator (RESTRICT / JOIN, as `eqsel`, `scalarltsel`): the
  planner runs the operator's function on the column's most common values and histogram, and the
  estimator itself, before the executor checks EXECUTE (verified: a `WHERE c OPERATOR(s.=#) 'x'`
  over a plpgsql function whose EXECUTE was revoked took a transaction id), so REVOKE closes
  nothing; the fix is DROP OPERATOR or `ALTER OPERATOR ... SET (RESTRICT = NONE, JOIN = NONE)`.
  The estimators also look up the operator's COMMUTATOR (a constant on the left) and NEGATOR
  (`NOT (a op b)`) and run theirs, unchecked, whatever schema they live in;
- a type's I/O, typmod, analyze and subscript functions, a range's canonical function and a
  function's planner support function (prosupport) run with no EXECUTE check (a cast
  `'x'::t(5)` runs TYPMOD_IN as the reader: verified with a plpgsql one on an extension's type),
  so a usable base type whose such function is hazardous is refused;
- an operator family's support functions (pg_amproc) run with no EXECUTE check, whoever may use
  their schema (verified: btree FUNCTION 1, cmp, for ORDER BY, GROUP BY, UNION, GREATEST/LEAST,
  row and array comparison; btree FUNCTION 3, in_range, for a window's RANGE offset; hash
  FUNCTION 1 for GROUP BY and DISTINCT; the same code serves merge and hash joins and the
  GiST/GIN/SP-GiST/BRIN support functions of index scans).
  Sortsupport (btree FUNCTION 2) takes `internal`, so only a C function can be one. Its operators
  (pg_amop) run unchecked too when the type cache calls them (`ARRAY[x] = ARRAY[x]` uses the
  element type's default equality; DISTINCT and `ROW(x) = ROW(x)` do check EXECUTE). So every
  operator family with a user-defined support function or operator is a starting point, every
  step out of it unchecked; its fix is DROP OPERATOR FAMILY (or a vetted IMMUTABLE SQL-standard
  body), its opt-in the function's `function:schema.name`.

So the audit walks, from everything the role can use (readable relations, executable functions,
operators, casts, types, operator families), the node trees PostgreSQL stores (view rules, policy
quals, domain CHECKs, default arguments, SQL-standard bodies; a relation's partitions and
inheritance children, index expressions, CHECKs, statistics and partition key: `edges`;
operators also as a clause's eqop/sortop and a row comparison's opnos; `pg_depend` omits pinned
built-ins such as txid_current, the node trees do not), and refuses what reaches a function that is volatile,
SECURITY DEFINER, switches role, comes from an extension that runs SQL from strings, has a body
PostgreSQL does not track (plpgsql, non-atomic SQL, C: its STABLE label cannot be verified), or
is a built-in that must stay unreachable (`knowledge.UNREACHABLE`: the admission never families).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.admission.function_tables.postgres import NEVER_RELATIONS
from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.edges import EDGES as _EDGES
from mcpkit.sql.profiles.postgres.edges import FOREIGN as _FOREIGN
from mcpkit.sql.profiles.postgres.edges import KIND as _KIND
from mcpkit.sql.profiles.postgres.edges import UNCHECKED as _UNCHECKED
from mcpkit.sql.profiles.postgres.edges import tree_edges
from mcpkit.sql.profiles.postgres.knowledge import (
    HARMLESS_VOLATILE,
    STRING_SQL_EXTENSIONS,
    unreachable_reason,
)
from mcpkit.sql.profiles.postgres.overloads import OptIns

__all__ = ["FIRST_NORMAL_OID", "Fn", "audit_routes", "unchecked_functions"]

_CATALOG: Final = ("pg_catalog", "information_schema")
FIRST_NORMAL_OID: Final = 16384
"""PostgreSQL's FirstNormalObjectId: every object initdb creates has a lower OID."""
# Relations admission never lets a query read; a view over one must not be readable either.
_CATALOG_RELS: Final = """
SELECT c.oid, n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('v', 'r', 'm') AND (n.nspname IN ('pg_catalog', 'information_schema')
  OR c.relname LIKE 'pg\\_%')
"""
# Extension membership counts (trusted language checks skipped, `extension:N` opt-ins) only for a
# function a superuser owns, as the objects an extension's script creates are: the owner of a
# trusted extension installed by a non-superuser may ALTER EXTENSION ... ADD FUNCTION any function
# of his own (red team pg11, F1: a plpgsql one added to citext was then trusted).
_FUNCTIONS: Final = """
SELECT p.oid, n.nspname, p.proname, p.oid::regprocedure::text, p.prokind,
  p.provolatile, p.prosecdef, coalesce(array_to_string(p.proconfig, ','), ''), l.lanname,
  p.prosqlbody IS NOT NULL, CASE WHEN o.rolsuper THEN e.extname END, has_function_privilege(p.oid, 'EXECUTE'),
  pg_has_role(p.proowner, 'USAGE'), has_schema_privilege(n.oid, 'USAGE'),
  EXISTS (SELECT 1 FROM pg_depend g WHERE g.classid = 'pg_proc'::regclass AND g.objid = p.oid
          AND g.deptype = 'i' AND g.refclassid = 'pg_type'::regclass),
  ARRAY(SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(a.grantee::regrole::text) END
        FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
          AND (a.grantee = 0 OR pg_has_role(a.grantee, 'USAGE')))
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
JOIN pg_roles o ON o.oid = p.proowner
LEFT JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
LEFT JOIN pg_extension e ON e.oid = d.refobjid
WHERE p.prokind <> 'p'
"""
# Non-catalog things the role can use, each a starting point: (kind, oid, name, fix).
_ENTRIES: Final = """
SELECT 'rel', c.oid, quote_ident(n.nspname) || '.' || quote_ident(c.relname),
  'REVOKE SELECT ON ' || quote_ident(n.nspname) || '.' || quote_ident(c.relname) || ' FROM '
  || coalesce((SELECT string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
       ELSE quote_ident(a.grantee::regrole::text) END, ', ')
     FROM aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
     WHERE a.privilege_type = 'SELECT' AND (a.grantee = 0 OR pg_has_role(a.grantee, 'USAGE'))),
     quote_ident(current_user))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND (n.nspname NOT IN ('pg_catalog', 'information_schema') OR c.oid >= 16384)
  AND n.nspname NOT LIKE 'pg_toast%' AND has_schema_privilege(n.oid, 'USAGE')
  AND (has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'))
UNION ALL SELECT 'op', o.oid, o.oid::regoperator::text,
  'DROP OPERATOR ' || o.oid::regoperator::text
FROM pg_operator o WHERE o.oid >= 16384 AND has_schema_privilege(o.oprnamespace, 'USAGE')
UNION ALL SELECT 'cast', c.oid, format('(%s AS %s)', c.castsource::regtype, c.casttarget::regtype),
  format('DROP CAST (%s AS %s)', c.castsource::regtype, c.casttarget::regtype)
FROM pg_cast c WHERE c.oid >= 16384
UNION ALL SELECT 'type', t.oid, t.oid::regtype::text,
  format('DROP %s %s', CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, t.oid::regtype)
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE t.typtype IN ('b', 'd', 'r', 'm', 'c') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%' AND has_schema_privilege(n.oid, 'USAGE')
UNION ALL SELECT 'opf', f.oid, format('%I.%I (%s)', n.nspname, f.opfname, m.amname),
  format('DROP OPERATOR FAMILY %I.%I USING %I', n.nspname, f.opfname, m.amname)
FROM pg_opfamily f JOIN pg_namespace n ON n.oid = f.opfnamespace JOIN pg_am m ON m.oid = f.opfmethod
WHERE EXISTS (SELECT 1 FROM pg_amproc a WHERE a.amprocfamily = f.oid AND a.amproc >= 16384)
  OR EXISTS (SELECT 1 FROM pg_amop a WHERE a.amopfamily = f.oid AND a.amopopr >= 16384)
"""
# An operator family is a starting point whatever the role's privileges: its support functions
# and operators run with no EXECUTE check for any value of its types (a literal will do).
# A type is a starting point whatever its USAGE privilege says: a cast to it by name (which
# needs USAGE on its schema, not on the type) runs its domain CHECKs, and those of its
# attributes and range subtype, each call checked for EXECUTE. So the fix that stops such a route
# is REVOKE EXECUTE on the function called (verified on PostgreSQL 15; REVOKE USAGE ON DOMAIN
# does not stop `CAST(1 AS d)`).


@dataclass(frozen=True)
class Fn:
    """One function as the audit sees it."""

    oid: int
    schema: str
    name: str
    signature: str
    kind: str
    volatility: str
    definer: bool
    config: str
    language: str
    atomic: bool
    extension: str | None
    executable: bool
    owned: bool
    visible: bool
    generated: bool
    grantees: tuple[str, ...]

    @property
    def catalog(self) -> bool:
        """A built-in: in pg_catalog or information_schema and created by initdb (an OID below
        FirstNormalObjectId). An extension installed SCHEMA pg_catalog, or a function an operator
        put there, is judged like any other function."""
        return self.schema in _CATALOG and self.oid < FIRST_NORMAL_OID

    def hazard(self) -> str | None:
        """Why running this function could change something or escape the role, or None."""
        if self.catalog:
            return unreachable_reason(self.name)
        if self.definer:
            return "runs as its owner (SECURITY DEFINER)"
        if "role=" in self.config or "session_authorization=" in self.config:
            return "switches role (SET role)"
        if self.extension in STRING_SQL_EXTENSIONS:
            return f"runs SQL from a string or another server (extension {self.extension})"
        if self.volatility == "v" and self.name not in HARMLESS_VOLATILE:
            return "is VOLATILE"
        # CREATE TYPE's own constructors (range, multirange) are generated, not written.
        if self.extension is None and self.kind in ("f", "w") and not (self.atomic or self.generated):
            return (
                f"is written in {self.language} (PostgreSQL does not track what its body calls, so its "
                f"{'STABLE' if self.volatility == 's' else 'IMMUTABLE'} label cannot be verified)"
            )
        return None

    def revoke(self) -> str:
        """The statement that takes EXECUTE away from the role."""
        if self.owned:
            return f"ALTER FUNCTION {self.signature} OWNER TO <another role>  -- the role owns it"
        return f"REVOKE EXECUTE ON FUNCTION {self.signature} FROM {', '.join(self.grantees) or 'PUBLIC'}"

    @property
    def group(self) -> str:
        """Findings of one extension, or of one function's overloads, share a line."""
        return f"extension {self.extension}" if self.extension else f"{self.schema}.{self.name}"


_LABEL: Final = {
    "fn": "function",
    "rel": "relation",
    "op": "operator",
    "cast": "cast",
    "type": "type",
    "opf": "operator family",
}
_HOW_COMPONENT: Final = (
    " with no EXECUTE check (an aggregate component, a range subtype_diff, a type's I/O or typmod"
    " function, or an operator's function or estimator the planner runs on a column's statistics)"
)
_HOW: Final = {
    "opf": " with no EXECUTE check (an operator-class support function or operator: ORDER BY, GROUP BY,"
    " DISTINCT, GREATEST/LEAST, window RANGE, row and array comparison run it)",
}


def _never_why(name: str) -> str | None:
    bare = name.split(".")[-1].lower()
    return next((r.why for r in NEVER_RELATIONS if r.refuses(None, bare)), None)


def _fn(r: Any) -> Fn:
    return Fn(
        int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), bool(r[6]), str(r[7]), str(r[8]),
        bool(r[9]), r[10], bool(r[11]), bool(r[12]), bool(r[13]), bool(r[14]), tuple(r[15]),
    )  # fmt: skip


def _graph(conn: Connection) -> dict[tuple[str, int], list[tuple[str, tuple[str, int]]]]:
    graph: dict[tuple[str, int], list[tuple[str, tuple[str, int]]]] = {}
    for kind, oid, field, target, tree in conn.execute(text(_EDGES)):
        pairs = tree_edges(tree) if tree is not None else [(str(field), int(target))] if target else []
        for name, to in pairs:
            graph.setdefault((str(kind), int(oid)), []).append((name, (_KIND[name], to)))
    return graph


def _reached(
    graph: dict[tuple[str, int], list[tuple[str, tuple[str, int]]]],
    start: tuple[str, int],
    filtered: frozenset[int] = frozenset(),
) -> Iterator[tuple[tuple[str, int], str | None]]:
    """Functions and relations reachable from `start`: (node, first unchecked field) where None
    says every step on the way was an EXECUTE-checked call (else the first aggregate component,
    subtype_diff, estimator, type I/O or operator-family support function or operator crossed).
    The walk does not go on through `filtered` relations (information_schema's views, which show
    only what the calling role holds a privilege on, as they test it with current_user)."""
    seen: set[tuple[tuple[str, int], str | None]] = set()
    stack: list[tuple[tuple[str, int], str | None]] = [(start, None)]
    while stack:
        node, via = stack.pop()
        if (node, via) in seen:
            continue
        seen.add((node, via))
        if node[0] in ("fn", "rel") and node != start:
            yield node, via
        if node[0] == "rel" and node[1] in filtered:
            continue
        for field, target in graph.get(node, ()):
            stack.append((target, via or (field if field in _UNCHECKED else None)))


def audit_routes(conn: Connection, allowed: frozenset[str] = frozenset()) -> list[Finding]:
    """Findings for every route from what the role can use to a hazardous function.

    Args:
        conn: A connection in the role's read-only session.
        allowed: `function:schema.name` (or `view:`, ... any entry's name) the operator accepted.

    Returns:
        One finding per entry point (function, relation, operator, cast, type) that reaches one.
    """
    conn.execute(text("SET LOCAL search_path = pg_catalog"))  # signatures come out schema-qualified
    fns = {int(r[0]): _fn(r) for r in conn.execute(text(_FUNCTIONS))}
    graph = _graph(conn)
    catalog_rels = [(int(o), str(n)) for o, n in conn.execute(text(_CATALOG_RELS))]
    never_rels = {o: n for o, n in catalog_rels if _never_why(n.split(".")[-1])}
    filtered = frozenset(
        o for o, n in catalog_rels if n.startswith("information_schema.") and o < FIRST_NORMAL_OID
    )
    foreign = {
        int(r[0]): (str(r[1]), str(r[2]), str(r[3]), str(r[4]), r[5]) for r in conn.execute(text(_FOREIGN))
    }
    opt = OptIns.read(conn, allowed)  # a name-only opt-in covers one function, not its overloads
    findings: list[Finding] = []
    own: dict[tuple[str, str, str, tuple[str, ...], bool], list[Fn]] = {}
    entries: list[tuple[str, int, str, str]] = [
        ("fn", f.oid, f"{f.schema}.{f.name}", f.revoke())
        for f in fns.values()
        if f.executable and f.visible and not f.catalog
    ]
    entries += [(str(k), int(o), str(n), str(fix)) for k, o, n, fix in conn.execute(text(_ENTRIES))]
    for kind, oid, name, fix in entries:
        label = _LABEL[kind]
        if kind == "fn":
            entry = fns[oid]
            name_opt_in = opt.opt_in("function", entry.oid, entry.schema, entry.name, entry.signature)
            if name_opt_in in allowed or f"extension:{entry.extension}" in allowed:
                continue
        elif f"{label}:{name}" in allowed:
            continue
        hazard = fns[oid].hazard() if kind == "fn" else None
        if hazard:
            key = f"extension:{entry.extension}" if entry.extension else name_opt_in
            own.setdefault((entry.group, key, hazard, entry.grantees, entry.owned), []).append(entry)
            continue
        for (target_kind, target), via in _reached(graph, (kind, oid), filtered):
            checked = via is None
            if via == "subdiff" and kind != "rel":
                continue  # subtype_diff runs for a relation's statistics: the relation entry covers it
            if target_kind == "rel":
                if target in foreign and f"foreign-table:{foreign[target][0]}" not in allowed:
                    plain, qualified, server, wrapper, detach = foreign[target]
                    message = (
                        f"{label} {name} reads foreign table {qualified} (server {server}, {wrapper})"
                        " through a partition, an inheritance child or a view: each read reaches outside"
                        " this database"
                    )
                    findings.append(
                        Finding("foreign-table", message, detach or fix, f"foreign-table:{plain}")
                    )
                    break
                if target in never_rels:
                    message = (
                        f"{label} {name} reads {never_rels[target]}, which {_never_why(never_rels[target])}"
                    )
                    findings.append(Finding("route", message, fix, f"{label}:{name}"))
                    break
                continue
            fn = fns.get(target)
            hazard = fn.hazard() if fn is not None else None
            if fn is None or hazard is None:
                continue
            if kind == "opf":
                opt_in = opt.opt_in("function", fn.oid, fn.schema, fn.name, fn.signature)
            else:
                opt_in = name_opt_in if kind == "fn" else f"{label}:{name}"
            if kind == "opf" and (opt_in in allowed or f"extension:{fn.extension}" in allowed):
                continue
            if fn.catalog or not checked or (fn.executable and not fn.visible):
                how = "" if checked else _HOW.get(kind, _HOW_COMPONENT)
                message = f"{label} {name} runs {fn.schema}.{fn.name}{how}, which {hazard}"
                stop = fn.revoke() if kind == "type" and checked and not fn.catalog else fix
                if kind == "opf":
                    stop += f"  -- or rewrite {fn.signature} as IMMUTABLE LANGUAGE sql BEGIN ATOMIC"
                elif kind == "op" and not checked:
                    stop += f"  -- or ALTER OPERATOR {name} SET (RESTRICT = NONE, JOIN = NONE)"
                findings.append(Finding("route", message, stop, opt_in))
                break
    for (group, opt_in, hazard, grantees, owned), same in own.items():
        names = ", ".join(f.signature for f in same)
        fix = (
            same[0].revoke()
            if owned or len(same) == 1
            else f"REVOKE EXECUTE ON FUNCTION {names} FROM {', '.join(grantees) or 'PUBLIC'}"
        )
        what = f"{len(same)} functions of {group}: each" if len(same) > 1 else f"function {same[0].signature}"
        findings.append(Finding("function", f"{what} {hazard}", fix, opt_in))
    return findings


_EXECUTABLE: Final = """
SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.oid >= 16384 AND p.prokind <> 'p' AND has_function_privilege(p.oid, 'EXECUTE')
  AND has_schema_privilege(n.oid, 'USAGE')
"""


def unchecked_functions(conn: Connection) -> frozenset[int]:
    """The functions PostgreSQL runs for the role with no EXECUTE check on some route (an
    aggregate's components, an operator's function or estimator on statistics, a type's I/O, an
    operator family's support functions, ...), from everything the role can use, opt-ins ignored:
    the mask check's SECURITY DEFINER search starts from them too (red team rt19mask F9)."""
    graph = dict(_graph(conn))
    starts = [("fn", int(oid)) for (oid,) in conn.execute(text(_EXECUTABLE))]
    starts += [(str(kind), int(oid)) for kind, oid, _, _ in conn.execute(text(_ENTRIES))]
    graph[("start", 0)] = [("start", node) for node in starts]  # one walk from all of them
    return frozenset(oid for (kind, oid), via in _reached(graph, ("start", 0)) if kind == "fn" and via)
