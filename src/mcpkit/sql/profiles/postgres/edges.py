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

from typing import Final

__all__ = ["EDGES", "FOREIGN", "KIND", "UNCHECKED"]

# Node fields that name a type whose input function, domain CHECK or attributes run when the tree
# does (red team pg14 F6: a view's `jsonb_to_record(...) AS r(a some_domain)` column definition
# list, a constant of a composite type): only user types (OID 16384 and up) are edges.
_TYPE_FIELDS: Final = (
    "consttype|vartype|funcresulttype|opresulttype|aggtype|wintype|minmaxtype|array_typeid"
    "|element_typeid|casetype|row_typeid|typeId|paramtype|firstColType"
)
# A node field holding one OID, or a list of them (`:opnos (o 97 521)`, `:funccoltypes (o 23 16390)`):
# one pass.
_FIELDS: Final = (
    r"':(funcid|opfuncid|aggfnoid|winfnoid|relid|resulttype|opno|eqop|sortop|startInRangeFunc"
    rf"|endInRangeFunc|{_TYPE_FIELDS}) (\d+)|[:](opnos|funccoltypes|coltypes) \(o ([0-9 ]+)\)'"
)
_TREE: Final = (
    "(SELECT f, o FROM (SELECT CASE WHEN m[3] = 'opnos' THEN 'opno' ELSE coalesce(m[1], m[3]) END AS f,"
    f" x::oid AS o FROM regexp_matches({{tree}}, {_FIELDS}, 'g') m,"
    " unnest(string_to_array(trim(coalesce(m[2], m[4])), ' ')) x) e"
    f" WHERE e.f !~ '^({_TYPE_FIELDS}|funccoltypes|coltypes)$' OR e.o >= 16384)"
)

# Edges out of a relation besides its view rule and policies (see the module docstring).
_RELATION_EDGES: Final = f"""UNION ALL SELECT 'rel', i.inhparent, 'child', i.inhrelid FROM pg_inherits i
UNION ALL SELECT 'rel', x.indrelid, m.f, m.o FROM pg_index x,
  LATERAL {_TREE.format(tree="coalesce(x.indexprs::text, '') || coalesce(x.indpred::text, '')")} m
UNION ALL SELECT 'rel', c.conrelid, m.f, m.o FROM pg_constraint c,
  LATERAL {_TREE.format(tree="coalesce(c.conbin::text, '')")} m WHERE c.conrelid <> 0
UNION ALL SELECT 'rel', s.stxrelid, m.f, m.o FROM pg_statistic_ext s,
  LATERAL {_TREE.format(tree="coalesce(s.stxexprs::text, '')")} m
UNION ALL SELECT 'rel', s.stxrelid, 'resulttype', m[2]::oid FROM pg_statistic_ext s,
  regexp_matches(coalesce(s.stxexprs::text, ''), '[:](funcresulttype|opresulttype) (\\d+)', 'g') m
  WHERE m[2]::oid >= 16384
UNION ALL SELECT 'rel', x.indrelid, 'resulttype', a.atttypid FROM pg_index x
  JOIN pg_attribute a ON a.attrelid = x.indexrelid WHERE a.atttypid >= 16384
UNION ALL SELECT 'rel', p.partrelid, m.f, m.o FROM pg_partitioned_table p,
  LATERAL {_TREE.format(tree="coalesce(p.partexprs::text, '')")} m
"""
# A function's (or aggregate's) own types that hold code run on coercion into them: domains (their
# CHECK), composites (their attributes'), ranges, multiranges, and arrays of these. A base type's
# I/O is the type's own entry (the query names the type), not every function over it.
_STRUCTURED: Final = """JOIN pg_type ty ON ty.oid = a.t
  LEFT JOIN pg_type el ON el.oid = ty.typelem AND ty.typcategory = 'A'
  WHERE a.t >= 16384 AND (ty.typtype IN ('d', 'c', 'r', 'm') OR el.typtype IN ('d', 'c', 'r', 'm'))"""
# (kind, oid) -> (field, oid) edges out of the node trees PostgreSQL stores.
EDGES: Final = f"""
SELECT 'rel', r.ev_class, m.f, m.o FROM pg_rewrite r,
  LATERAL {_TREE.format(tree="r.ev_action::text")} m
UNION ALL SELECT 'rel', p.polrelid, m.f, m.o FROM pg_policy p,
  LATERAL {_TREE.format(tree="coalesce(p.polqual::text, '')")} m WHERE p.polcmd IN ('r', '*')
UNION ALL SELECT 'type', c.contypid, m.f, m.o FROM pg_constraint c,
  LATERAL {_TREE.format(tree="coalesce(c.conbin::text, '')")} m WHERE c.contypid <> 0
UNION ALL SELECT 'type', t.oid, 'resulttype', t.typbasetype FROM pg_type t WHERE t.typtype = 'd'
UNION ALL SELECT 'type', r.rngtypid, 'subdiff', r.rngsubdiff FROM pg_range r WHERE r.rngsubdiff <> 0
UNION ALL SELECT 'type', r.rngmultitypid, 'resulttype', r.rngtypid FROM pg_range r
UNION ALL SELECT 'type', r.rngtypid, 'resulttype', r.rngsubtype FROM pg_range r WHERE r.rngsubtype >= 16384
UNION ALL SELECT 'type', t.oid, 'resulttype', a.atttypid FROM pg_type t
  JOIN pg_attribute a ON a.attrelid = t.typrelid WHERE t.typtype = 'c' AND t.oid >= 16384
  AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid >= 16384
UNION ALL SELECT 'type', t.oid, 'resulttype', t.typelem FROM pg_type t
  WHERE t.oid >= 16384 AND t.typelem <> 0 AND t.typcategory = 'A'
UNION ALL SELECT 'rel', a.attrelid, 'resulttype', a.atttypid FROM pg_attribute a
  WHERE a.attrelid >= 16384 AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid >= 16384
UNION ALL SELECT 'fn', p.oid, m.f, m.o FROM pg_proc p,
  LATERAL {_TREE.format(tree="coalesce(p.proargdefaults::text, '') || coalesce(p.prosqlbody::text, '')")} m
UNION ALL SELECT 'fn', p.oid, 'resulttype', a.t FROM pg_proc p,
  unnest(p.prorettype::oid || p.proargtypes::oid[] || coalesce(p.proallargtypes, ARRAY[]::oid[])) a(t)
  {_STRUCTURED}
UNION ALL SELECT 'fn', g.aggfnoid, 'resulttype', a.t FROM pg_aggregate g,
  unnest(ARRAY[g.aggtranstype::oid, g.aggmtranstype::oid]) a(t)
  {_STRUCTURED}
UNION ALL SELECT 'fn', a.aggfnoid, 'component', c.f::oid FROM pg_aggregate a,
  unnest(ARRAY[a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn, a.aggdeserialfn,
               a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn]) c(f) WHERE c.f::oid <> 0
UNION ALL SELECT 'op', o.oid, 'funcid', o.oprcode::oid FROM pg_operator o WHERE o.oprcode::oid <> 0
UNION ALL SELECT 'op', o.oid, 'commute', c.c FROM pg_operator o,
  unnest(ARRAY[o.oprcom::oid, o.oprnegate::oid]) c(c)
  WHERE c.c <> 0 AND (o.oprrest::oid <> 0 OR o.oprjoin::oid <> 0)
UNION ALL SELECT 'op', o.oid, 'negate', c.c FROM pg_operator o,
  unnest(ARRAY[o.oprcom::oid, o.oprnegate::oid]) c(c)
  WHERE c.c <> 0 AND o.oprrest::oid = 0 AND o.oprjoin::oid = 0
UNION ALL SELECT 'op', o.oid, 'estimate', f.f FROM pg_operator o,
  unnest(ARRAY[CASE WHEN o.oprrest::oid <> 0 OR o.oprjoin::oid <> 0 THEN o.oprcode::oid END,
               o.oprrest::oid, o.oprjoin::oid]) f(f) WHERE f.f >= 16384
UNION ALL SELECT 'opf', a.amprocfamily, 'support', a.amproc FROM pg_amproc a WHERE a.amproc >= 16384
UNION ALL SELECT 'opf', a.amopfamily, 'member', a.amopopr FROM pg_amop a WHERE a.amopopr >= 16384
UNION ALL SELECT 'cast', c.oid, 'funcid', c.castfunc FROM pg_cast c WHERE c.castfunc <> 0
UNION ALL SELECT 'type', r.rngtypid, 'typeio', r.rngcanonical::oid FROM pg_range r
  WHERE r.rngcanonical::oid >= 16384
UNION ALL SELECT 'fn', p.oid, 'estimate', p.prosupport::oid FROM pg_proc p WHERE p.prosupport::oid >= 16384
UNION ALL SELECT 'type', t.oid, 'typeio', f.f FROM pg_type t,
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
