"""Which relations a PostgreSQL query must reach for its read order to follow a masked index.

PostgreSQL has no index hints, so a masked call turns index scans off in its transaction
(`PostgresSession`): only where it can reach an index whose key, INCLUDE columns, expressions
(a whole-row one too) or predicate read a masked column, any access method (B-tree, GiST, BRIN,
GIN...), on the masked table or any member of its inheritance tree (partitions, children, parents:
a parent's scan reads its children's). A view is planned inside the query and a policy's quals
with it, so one whose rule or policy depends on such a relation counts (`pg_depend`), transitively;
so does a view or policy that calls a user function, whose body (PL/pgSQL, dynamic SQL) is not
resolved, and a query calling one by name. A user operator or cast over a user function, or a
masked table not found, pins every masked call. With no such index anywhere nothing is pinned
(`IndexReach()`): plans keep their index scans (the bench's top-N over a join, 0.25 ms against
243 ms with them off). Read again with the pins when the catalog moves (`scanpins.pins_check`).

Bitmap scans stay on in every case: a bitmap heap scan reads the heap in block order, each block's
rows in item order (exact or lossy, rechecked), so its rows come out as a sequential scan's with
the same filter; the filter itself may not name a masked column (`masking.plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.scan_order import IndexReach, pin_key, split_key

__all__ = ["postgres_index_reach"]

# A masked table by name, casefolded, in its schema or (unqualified) any: the role re-verifying may
# not resolve it on its own path (`scanpins.pin_findings_check`), nor have USAGE on its schema.
_OIDS: Final = """
SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE lower(c.relname) = lower(:t) AND (CAST(:s AS text) IS NULL OR lower(n.nspname) = lower(:s))
"""
# The masked table's inheritance tree, both ways (partitions at any depth, parents, siblings).
_TREE: Final = """
WITH RECURSIVE tree(relid) AS (
  SELECT CAST(:oid AS oid)
  UNION
  SELECT CASE WHEN i.inhparent = t.relid THEN i.inhrelid ELSE i.inhparent END
  FROM tree t JOIN pg_inherits i ON t.relid IN (i.inhparent, i.inhrelid)
)
SELECT relid FROM tree
"""
# The columns the indexes of those relations read: key and INCLUDE columns (indkey), those their
# expressions and predicate read (pg_depend), every column for a whole-row reference (subid 0, auto
# or normal: a partition's index depends on its table so too, as 'S').
_READ: Final = """
SELECT DISTINCT a.attname
FROM pg_index x
JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum > 0 AND NOT a.attisdropped
  AND (a.attnum = ANY (x.indkey) OR EXISTS (SELECT 1 FROM pg_depend d
    WHERE d.classid = 'pg_class'::regclass AND d.objid = x.indexrelid AND d.refclassid = 'pg_class'::regclass
      AND d.refobjid = x.indrelid
      AND (d.refobjsubid = a.attnum OR d.refobjsubid = 0 AND d.deptype IN ('a', 'n'))))
WHERE x.indrelid = ANY (CAST(:oids AS oid[]))
"""
_USER_FUNCTIONS: Final = (
    "SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
    " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')"
)
# The relations a view's rule or a policy belongs to, closed over what they depend on: a relation
# already reached, or any user function.
_CLOSURE: Final = f"""
WITH RECURSIVE edges(owner, refclassid, refobjid) AS (
  SELECT r.ev_class, d.refclassid, d.refobjid FROM pg_depend d
  JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
  UNION ALL
  SELECT p.polrelid, d.refclassid, d.refobjid FROM pg_depend d
  JOIN pg_policy p ON d.classid = 'pg_policy'::regclass AND p.oid = d.objid
), reach(relid) AS (
  SELECT unnest(CAST(:seeds AS oid[]))
  UNION
  SELECT e.owner FROM edges e
  WHERE e.refclassid = 'pg_proc'::regclass AND e.refobjid IN ({_USER_FUNCTIONS})
  UNION
  SELECT e.owner FROM edges e JOIN reach r ON e.refclassid = 'pg_class'::regclass AND e.refobjid = r.relid
)
SELECT n.nspname, c.relname FROM reach JOIN pg_class c ON c.oid = reach.relid
JOIN pg_namespace n ON n.oid = c.relnamespace
"""
_FUNCTION_NAMES: Final = f"SELECT DISTINCT p.proname FROM pg_proc p WHERE p.oid IN ({_USER_FUNCTIONS})"
# A user operator or cast runs its function unnamed in the query text.
_HIDDEN_CALLS: Final = f"""
SELECT EXISTS (SELECT 1 FROM pg_operator o WHERE o.oprcode::oid IN ({_USER_FUNCTIONS}))
  OR EXISTS (SELECT 1 FROM pg_cast c WHERE c.castfunc IN ({_USER_FUNCTIONS}))
"""


def postgres_index_reach(conn: Connection, masked: Mapping[str, frozenset[str]]) -> IndexReach:
    """What a masked call must reach to run without index scans (read under `catalog_path`)."""
    seeds: set[int] = set()
    for key, columns in sorted(masked.items()):
        schema, table = split_key(key)
        oids = conn.execute(text(_OIDS), {"t": table, "s": schema}).scalars().all()
        if not oids:
            return IndexReach(always=True)  # not resolved: stay on the safe side
        wanted = {c.casefold() for c in columns}
        for oid in oids:
            tree = [int(r) for (r,) in conn.execute(text(_TREE), {"oid": int(oid)})]
            read = conn.execute(text(_READ), {"oids": tree}).scalars().all()
            if any(str(name).casefold() in wanted for name in read):
                seeds.update(tree)
    if not seeds:
        return IndexReach()
    relations = frozenset(
        pin_key(str(schema), str(name))
        for schema, name in conn.execute(text(_CLOSURE), {"seeds": sorted(seeds)})
    )
    functions = frozenset(str(n).casefold() for n in conn.execute(text(_FUNCTION_NAMES)).scalars())
    return IndexReach(relations, functions, bool(conn.execute(text(_HIDDEN_CALLS)).scalar()))
