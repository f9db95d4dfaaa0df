"""PostgreSQL SECURITY DEFINER functions that PostgreSQL runs for the role with no EXECUTE check
(an aggregate's transition or final function, an operator's function or estimator, a type's I/O,
an operator family's support function: `routes.unchecked_functions`), whose owner may read a masked
column or a view over one. The mask check's definer search (`handed_on.masked_routes`) counts only the
functions the role may EXECUTE: `CREATE AGGREGATE collect_info(int) (SFUNC = agg_step, ...)` over
a definer `agg_step` reading `staff.email` answered every e-mail while `doctor --mask` said ok, with
the aggregate opted in (red team rt19mask F9). Its body is not read: its owner's rights count, as
for a definer body that runs SQL from strings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.handed_on import VIEWS_OVER, masked_attributes
from mcpkit.sql.profiles.postgres.routes import unchecked_functions

__all__ = ["unchecked_definer_findings"]

# The definer functions whose owner may read a masked column or a view over one (the walk of what
# runs unchecked costs a second or two; it runs only when there is one).
_DEFINERS: Final = """
SELECT p.oid, quote_ident(n.nspname) || '.' || quote_ident(p.proname) || '('
       || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')'
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE p.prosecdef
  AND (EXISTS (SELECT 1 FROM unnest(CAST(:relids AS oid[]), CAST(:attnums AS int2[])) AS m(relid, attnum)
               WHERE has_column_privilege(p.proowner, m.relid, m.attnum, 'SELECT'))
       OR EXISTS (SELECT 1 FROM unnest(CAST(:views AS oid[])) AS v(relid)
                  WHERE has_table_privilege(p.proowner, v.relid, 'SELECT')))
ORDER BY 2
"""


def unchecked_definer_findings(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """One finding per such function, with the statement that stops it running as its owner."""
    relids, attnums = masked_attributes(conn, masked)
    if not relids:
        return []
    closure = conn.execute(text(VIEWS_OVER), {"relids": relids, "attnums": attnums}).all()
    views = sorted({int(r[0]) for r in closure if r[3] in ("v", "m")})
    params = {"relids": relids, "attnums": attnums, "views": views}
    definers = conn.execute(text(_DEFINERS), params).all()
    unchecked = unchecked_functions(conn) if definers else frozenset()
    return [
        Finding(
            "masked-column-definer",
            f"function {function} runs as its owner with no EXECUTE check (an aggregate's component, "
            "an operator's function or estimator, a type's I/O or an operator family's support "
            "function), and its owner may read masked columns",
            f"ALTER FUNCTION {function} SECURITY INVOKER (or drop the aggregate, operator, type or "
            "operator family that runs it)",
        )
        for oid, function in definers
        if int(oid) in unchecked
    ]
