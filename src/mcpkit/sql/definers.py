"""`DefinerCatalog`: functions that would run as someone else (SECURITY DEFINER, or a SET role
clause) count as refused when calls run as per-principal roles."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Final

from mcpkit.sql.admission import FunctionCatalog, FunctionRef
from mcpkit.sql.admission.limit_expansion import RelationRef, ViewCatalog
from mcpkit.sql.engines.engine import SqlEngine

__all__ = ["DefinerCatalog"]

_DEFINERS: Final = (  # every operator, function and type qualified: the reader's path answers none
    "SELECT n.nspname, p.proname FROM pg_catalog.pg_proc p"
    " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace"
    " WHERE p.proname OPERATOR(pg_catalog.=) ANY (CAST(:names AS pg_catalog.text[]))"
    " AND (p.prosecdef OR EXISTS (SELECT 1 FROM"
    " pg_catalog.unnest(coalesce(p.proconfig, CAST('{}' AS pg_catalog.text[]))) c"
    " WHERE c OPERATOR(pg_catalog.~~) 'role=%' OR c OPERATOR(pg_catalog.~~) 'session_authorization=%'))"
)


class DefinerCatalog:
    """A `FunctionCatalog` that also reports functions running as someone else as refused.

    With roles, a SECURITY DEFINER function (or one with a `SET role` clause) executes with its
    owner's rights and would read past row-level security, even when it is declared STABLE.

    Args:
        engine: Looks names up (the server's own account).
        inner: The volatility catalog to extend (`PostgresCatalog`), if any.
        ttl_s: Cache lifetime of one answer.
    """

    def __init__(self, engine: SqlEngine, inner: FunctionCatalog | None = None, ttl_s: float = 300.0) -> None:
        self._engine, self._inner, self._ttl_s = engine, inner, ttl_s
        self._cache: dict[FunctionRef, tuple[bool, float]] = {}

    def volatile(self, refs: Collection[FunctionRef]) -> set[FunctionRef]:
        """Refs that are volatile (per `inner`) or run as another role."""
        out = set(self._inner.volatile(refs)) if self._inner is not None else set()
        now = time.monotonic()
        missing = [r for r in refs if r not in self._cache or self._cache[r][1] < now]
        if missing:
            names = sorted({n for _, n in missing})
            hits = self._engine.execute(_DEFINERS, {"names": names}, 100_000, 5.0, "catalog").rows
            search = {
                str(r[0])
                for r in self._engine.execute(
                    "SELECT pg_catalog.unnest(pg_catalog.current_schemas(true))", {}, 1000, 5.0, "catalog"
                ).rows
            }
            for schema, name in missing:
                bad = any(p == name and (s == schema if schema else s in search) for s, p in hits)
                self._cache[(schema, name)] = (bad, now + self._ttl_s)
        return out | {r for r in refs if self._cache[r][0]}

    def view_nodes(self, refs: Collection[RelationRef]) -> Mapping[RelationRef, int]:
        """The wrapped catalog's view sizes (a `ViewCatalog`), if it has them."""
        return self._inner.view_nodes(refs) if isinstance(self._inner, ViewCatalog) else {}
