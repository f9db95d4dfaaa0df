"""PostgreSQL function volatility from `pg_proc`, cached per name."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Final

from mcpkit.sql.admission.reject_volatile_functions import FunctionRef
from mcpkit.sql.engines.base import Engine
from mcpkit.sql.profiles.postgres.knowledge import HARMLESS_VOLATILE

__all__ = ["HARMLESS_VOLATILE", "PostgresCatalog"]

_LOOKUP: Final = (
    "SELECT n.nspname, p.proname, p.provolatile, p.proargtypes::text FROM pg_catalog.pg_proc p"
    " JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = ANY(:names)"
)


class PostgresCatalog:
    """A `FunctionCatalog`: a name is volatile when any overload it can resolve to has provolatile 'v'.

    Unqualified names resolve in `current_schemas(true)`; qualified ones in their schema. An overload
    hidden by one with the same argument types earlier on the path is never called, so it does not
    count (pgcrypto's `public.gen_random_uuid()` behind `pg_catalog.gen_random_uuid()`). Unknown
    names are left to the database (it fails the call). Answers are cached for `ttl_s`.

    Args:
        engine: The engine to look names up with (same account as the queries).
        ttl_s: Cache lifetime of one answer.
        timeout_s: Timeout of one lookup.
    """

    def __init__(self, engine: Engine, ttl_s: float = 300.0, timeout_s: float = 5.0) -> None:
        self._engine = engine
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._cache: dict[FunctionRef, tuple[bool, float]] = {}
        self._search: tuple[str, ...] | None = None

    def _search_path(self) -> tuple[str, ...]:
        if self._search is None:
            rows = self._engine.execute(
                "SELECT unnest(current_schemas(true))", {}, 1000, self._timeout_s, "catalog"
            )
            self._search = tuple(str(r[0]) for r in rows.rows)
        return self._search

    def volatile(self, refs: Collection[FunctionRef]) -> set[FunctionRef]:
        """Return the refs that resolve to a volatile function."""
        now = time.monotonic()
        missing = [r for r in refs if r not in self._cache or self._cache[r][1] < now]
        if missing:
            names = sorted({name for _, name in missing})
            rows = self._engine.execute(_LOOKUP, {"names": names}, 100_000, self._timeout_s, "catalog").rows
            search = self._search_path()
            for schema, name in missing:
                hits = [
                    (nsp, vol, args)
                    for nsp, proname, vol, args in rows
                    if proname == name and (nsp == schema if schema else nsp in search)
                ]
                if not schema:  # the first schema on the path with these argument types wins
                    first: dict[str, int] = {}
                    for nsp, _, args in hits:
                        first[args] = min(first.get(args, len(search)), search.index(nsp))
                    hits = [h for h in hits if search.index(h[0]) == first[h[2]]]
                volatile = any(
                    vol == "v" and not (nsp == "pg_catalog" and name in HARMLESS_VOLATILE)
                    for nsp, vol, _ in hits
                )
                self._cache[(schema, name)] = (volatile, now + self._ttl_s)
        return {r for r in refs if self._cache[r][0]}
