"""The edges of the route audit (`routes`): what PostgreSQL runs or reads for a thing the role uses.

Besides the node trees of views, policies, domain CHECKs, default arguments and SQL bodies, a
readable relation leads (red team pg11, F3/F4; verified on PostgreSQL 15) to:

- its partitions and inheritance children (pg_inherits, transitively): PostgreSQL checks SELECT on
  the parent only and scans them with no privilege of their own, wherever their schema, so a
  foreign table attached there is read by every query on the parent;
- its indexes' expressions and partial-index predicates, its CHECK constraints (constraint
  exclusion) and its partition key expressions, which the planner constant-folds as the reader
  (an IMMUTABLE function in them runs for a plain `SELECT count(*)`), and the expressions of its
  extended statistics objects, which the planner evaluates for estimates. Each such call is
  checked for EXECUTE against the reader, so a function the reader may execute is judged whatever
  schema it sits in.

A function leads to every user type it returns or takes (red team pg13 F9, pg14 F1/F2): a returned
domain's CHECK runs as the caller, and so does the CHECK of a domain inside a returned composite
(`jsonb_populate_record(f(), ...)` coerces into its attributes); an aggregate leads to its transition
types (pg14 F3: the INITCOND is read by the type's input, a domain's CHECK included). The node trees
lead to every user type they name, not only result types (pg14 F6): a column definition list, a
constant, a row or array constructor. A relation leads to the types of its index columns and
statistics expressions (pg13, F3): the planner runs a range's subtype_diff on their statistics,
unchecked. An operator without estimators leads to its commutator and negator (pg13 F7): the
planner rewrites `NOT (a op b)` to `a negator b` (and may commute a clause), and the executor runs
that operator's function, checked for EXECUTE against the reader, wherever its schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

__all__ = ["EDGES", "FOREIGN", "KIND", "UNCHECKED", "tree_edges"]

# Node fields that name a type whose input function, domain CHECK or attributes run when the tree
# does (red team pg14 F6: a view's `jsonb_to_record(...) AS r(a some_domain)` column definition
# list, a constant of a composite type): only user types (OID 16384 and up) are edges.
_TYPE_FIELDS: Final = (
    "consttype|vartype|funcresulttype|opresulttype|aggtype|wintype|minmaxtype|array_typeid"
    "|element_typeid|casetype|row_typeid|typeId|paramtype|firstColType"
)
# A node field holding one OID, or a list of them (`:opnos (o 97 521)`, `:funccoltypes (o 23 16390)`).
# Matched in Python (`tree_edges`): PostgreSQL's regex engine took 0.5 s over the 2.8 MB of the
# system views' trees on every start-up, Python's takes 15 ms.
_FIELDS: Final = re.compile(
    r":(funcid|opfuncid|aggfnoid|winfnoid|relid|resulttype|opno|eqop|sortop|startInRangeFunc"
    rf"|endInRangeFunc|{_TYPE_FIELDS}) (\d+)|:(opnos|funccoltypes|coltypes) \(o ([0-9 ]+)\)"
)
_USER_TYPE_FIELDS: Final = frozenset([*_TYPE_FIELDS.split("|"), "funccoltypes", "coltypes"])
_FIRST_USER_OID: Final = 16384


def tree_edges(tree: str) -> Iterator[tuple[str, int]]:
    """(field, oid) for every OID a stored node tree names; type fields only for user types.

    >>> list(tree_edges("{FUNCEXPR :funcid 16400 :funcresulttype 25 :opnos (o 97 521)}"))
    [('funcid', 16400), ('opno', 97), ('opno', 521)]
    """
    for m in _FIELDS.finditer(tree):
        field = m[1] or ("opno" if m[3] == "opnos" else m[3])
        for oid in map(int, (m[2] or m[4]).split()):
            if field not in _USER_TYPE_FIELDS or oid >= _FIRST_USER_OID:
                yield field, oid


# Edges out of a relation besides its view rule and policies (see the module docstring).
_RELATION_EDGES: Final = """UNION ALL SELECT 'rel', i.inhparent, 'child', i.inhrelid, NULL FROM pg_inherits i
UNION ALL SELECT 'rel', x.indrelid, NULL, NULL, concat_ws(' ', x.indexprs::text, x.indpred::text)
  FROM pg_index x
  WHERE x.indexprs IS NOT NULL OR x.indpred IS NOT NULL
UNION ALL SELECT 'rel', c.conrelid, NULL, NULL, c.conbin::text FROM pg_constraint c
  WHERE c.conrelid <> 0 AND c.conbin IS NOT NULL
UNION ALL SELECT 'rel', s.stxrelid, NULL, NULL, s.stxexprs::text FROM pg_statistic_ext s
  WHERE s.stxexprs IS NOT NULL
UNION ALL SELECT 'rel', s.stxrelid, 'resulttype', m[2]::oid, NULL FROM pg_statistic_ext s,
  regexp_matches(coalesce(s.stxexprs::text, ''), '[:](funcresulttype|opresulttype) (\\d+)', 'g') m
  WHERE m[2]::oid >= 16384
UNION ALL SELECT 'rel', x.indrelid, 'resulttype', a.atttypid, NULL FROM pg_index x
  JOIN pg_attribute a ON a.attrelid = x.indexrelid WHERE a.atttypid >= 16384
UNION ALL SELECT 'rel', p.partrelid, NULL, NULL, p.partexprs::text FROM pg_partitioned_table p
  WHERE p.partexprs IS NOT NULL
"""
# A function's (or aggregate's) own types that hold code run on coercion into them: domains (their
# CHECK), composites (their attributes'), ranges, multiranges, and arrays of these. A base type's
# I/O is the type's own entry (the query names the type), not every function over it.
_STRUCTURED: Final = """JOIN pg_type ty ON ty.oid = a.t
  LEFT JOIN pg_type el ON el.oid = ty.typelem AND ty.typcategory = 'A'
  WHERE a.t >= 16384 AND (ty.typtype IN ('d', 'c', 'r', 'm') OR el.typtype IN ('d', 'c', 'r', 'm'))"""
# (kind, oid, field, oid, NULL) edges, and (kind, oid, NULL, NULL, tree) for each node tree PostgreSQL
# stores (its edges: `tree_edges`).
EDGES: Final = f"""
SELECT 'rel', r.ev_class, NULL::text, NULL::oid, r.ev_action::text FROM pg_rewrite r
UNION ALL SELECT 'rel', p.polrelid, NULL, NULL, p.polqual::text FROM pg_policy p
  WHERE p.polcmd IN ('r', '*') AND p.polqual IS NOT NULL
UNION ALL SELECT 'type', c.contypid, NULL, NULL, c.conbin::text FROM pg_constraint c
  WHERE c.contypid <> 0 AND c.conbin IS NOT NULL
UNION ALL SELECT 'type', t.oid, 'resulttype', t.typbasetype, NULL FROM pg_type t WHERE t.typtype = 'd'
UNION ALL SELECT 'type', r.rngtypid, 'subdiff', r.rngsubdiff, NULL FROM pg_range r WHERE r.rngsubdiff <> 0
UNION ALL SELECT 'type', r.rngmultitypid, 'resulttype', r.rngtypid, NULL FROM pg_range r
UNION ALL SELECT 'type', r.rngtypid, 'resulttype', r.rngsubtype, NULL FROM pg_range r
  WHERE r.rngsubtype >= 16384
UNION ALL SELECT 'type', t.oid, 'resulttype', a.atttypid, NULL FROM pg_type t
  JOIN pg_attribute a ON a.attrelid = t.typrelid WHERE t.typtype = 'c' AND t.oid >= 16384
  AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid >= 16384
UNION ALL SELECT 'type', t.oid, 'resulttype', t.typelem, NULL FROM pg_type t
  WHERE t.oid >= 16384 AND t.typelem <> 0 AND t.typcategory = 'A'
UNION ALL SELECT 'rel', a.attrelid, 'resulttype', a.atttypid, NULL FROM pg_attribute a
  WHERE a.attrelid >= 16384 AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid >= 16384
UNION ALL SELECT 'fn', p.oid, NULL, NULL, concat_ws(' ', p.proargdefaults::text, p.prosqlbody::text)
  FROM pg_proc p WHERE p.proargdefaults IS NOT NULL OR p.prosqlbody IS NOT NULL
UNION ALL SELECT 'fn', p.oid, 'resulttype', a.t, NULL FROM pg_proc p,
  unnest(p.prorettype::oid || p.proargtypes::oid[] || coalesce(p.proallargtypes, ARRAY[]::oid[])) a(t)
  {_STRUCTURED}
UNION ALL SELECT 'fn', g.aggfnoid, 'resulttype', a.t, NULL FROM pg_aggregate g,
  unnest(ARRAY[g.aggtranstype::oid, g.aggmtranstype::oid]) a(t)
  {_STRUCTURED}
UNION ALL SELECT 'fn', a.aggfnoid, 'component', c.f::oid, NULL FROM pg_aggregate a,
  unnest(ARRAY[a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn, a.aggdeserialfn,
               a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn]) c(f) WHERE c.f::oid <> 0
UNION ALL SELECT 'op', o.oid, 'funcid', o.oprcode::oid, NULL FROM pg_operator o WHERE o.oprcode::oid <> 0
UNION ALL SELECT 'op', o.oid, 'commute', c.c, NULL FROM pg_operator o,
  unnest(ARRAY[o.oprcom::oid, o.oprnegate::oid]) c(c)
  WHERE c.c <> 0 AND (o.oprrest::oid <> 0 OR o.oprjoin::oid <> 0)
UNION ALL SELECT 'op', o.oid, 'negate', c.c, NULL FROM pg_operator o,
  unnest(ARRAY[o.oprcom::oid, o.oprnegate::oid]) c(c)
  WHERE c.c <> 0 AND o.oprrest::oid = 0 AND o.oprjoin::oid = 0
UNION ALL SELECT 'op', o.oid, 'estimate', f.f, NULL FROM pg_operator o,
  unnest(ARRAY[CASE WHEN o.oprrest::oid <> 0 OR o.oprjoin::oid <> 0 THEN o.oprcode::oid END,
               o.oprrest::oid, o.oprjoin::oid]) f(f) WHERE f.f >= 16384
UNION ALL SELECT 'opf', a.amprocfamily, 'support', a.amproc, NULL FROM pg_amproc a WHERE a.amproc >= 16384
UNION ALL SELECT 'opf', a.amopfamily, 'member', a.amopopr, NULL FROM pg_amop a WHERE a.amopopr >= 16384
UNION ALL SELECT 'cast', c.oid, 'funcid', c.castfunc, NULL FROM pg_cast c WHERE c.castfunc <> 0
UNION ALL SELECT 'type', r.rngtypid, 'typeio', r.rngcanonical::oid, NULL FROM pg_range r
  WHERE r.rngcanonical::oid >= 16384
UNION ALL SELECT 'fn', p.oid, 'estimate', p.prosupport::oid, NULL FROM pg_proc p
  WHERE p.prosupport::oid >= 16384
UNION ALL SELECT 'type', t.oid, 'typeio', f.f, NULL FROM pg_type t,
  unnest(ARRAY[t.typinput::oid, t.typoutput::oid, t.typreceive::oid, t.typsend::oid, t.typmodin::oid,
               t.typmodout::oid, t.typanalyze::oid, t.typsubscript::oid]) f(f) WHERE f.f >= 16384
{_RELATION_EDGES}"""

KIND: Final = {
    **dict.fromkeys([*_TYPE_FIELDS.split("|"), "funccoltypes", "coltypes"], "type"),
    "funcid": "fn",
    "opfuncid": "fn",
    "aggfnoid": "fn",
    "winfnoid": "fn",
    "component": "fn",
    "relid": "rel",
    "resulttype": "type",
    "opno": "op",
    "eqop": "op",
    "sortop": "op",
    "startInRangeFunc": "fn",
    "endInRangeFunc": "fn",
    "support": "fn",
    "member": "op",
    "estimate": "fn",
    "commute": "op",
    "negate": "op",
    "child": "rel",
    "typeio": "fn",
    "subdiff": "fn",
}
# Edges PostgreSQL follows without an EXECUTE check (see the module docstring).
UNCHECKED: Final = frozenset({"component", "support", "member", "estimate", "commute", "typeio", "subdiff"})

# Foreign tables the role cannot read itself (those it can are `account` findings): reached through
# a partition or inheritance parent (or a view), each read still leaves the database. The fix
# detaches it from its parent.
FOREIGN: Final = """
SELECT c.oid, n.nspname || '.' || c.relname, quote_ident(n.nspname) || '.' || quote_ident(c.relname),
  s.srvname, w.fdwname,
  (SELECT CASE WHEN c.relispartition
     THEN format('ALTER TABLE %s DETACH PARTITION %s', i.inhparent::regclass, c.oid::regclass)
     ELSE format('ALTER TABLE %s NO INHERIT %s', c.oid::regclass, i.inhparent::regclass) END
   FROM pg_inherits i WHERE i.inhrelid = c.oid ORDER BY i.inhseqno LIMIT 1)
FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid
JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_foreign_server s ON s.oid = ft.ftserver
JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
WHERE NOT (has_schema_privilege(n.oid, 'USAGE')
  AND (has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT')))
"""
