"""PostgreSQL function volatility from `pg_proc`, cached per name."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Final

from mcpkit.sql.admission.reject_volatile_functions import FunctionRef
from mcpkit.sql.engines.base import Engine

__all__ = ["HARMLESS_VOLATILE", "PostgresCatalog"]

# Built-ins PostgreSQL marks volatile that only read or draw random numbers (pg_catalog only).
HARMLESS_VOLATILE: Final = frozenset(
    {
        "random",
        "random_normal",
        "clock_timestamp",
        "timeofday",
        "gen_random_uuid",
        "pg_relation_size",
        "pg_total_relation_size",
        "pg_table_size",
        "pg_indexes_size",
        "pg_database_size",
        "pg_tablespace_size",
        "pg_partition_tree",
        "pg_partition_ancestors",
        "pg_is_in_recovery",
        "pg_jit_available",
        "currval",
        "lastval",
        "pg_sequence_last_value",
        "pg_blocking_pids",
        "pg_lock_status",
    }
)

_LOOKUP: Final = (
    "SELECT n.nspname, p.proname, p.provolatile FROM pg_catalog.pg_proc p"
    " JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = ANY(:names)"
)


class PostgresCatalog:
    """A `FunctionCatalog`: a name is volatile when any overload it can resolve to has provolatile 'v'.

    Unqualified names resolve in `current_schemas(true)`; qualified ones in their schema. Unknown
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
                    (nsp, vol)
                    for nsp, proname, vol in rows
                    if proname == name and (nsp == schema if schema else nsp in search)
                ]
                volatile = any(
                    vol == "v" and not (nsp == "pg_catalog" and name in HARMLESS_VOLATILE)
                    for nsp, vol in hits
                )
                self._cache[(schema, name)] = (volatile, now + self._ttl_s)
        return {r for r in refs if self._cache[r][0]}
