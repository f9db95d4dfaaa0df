"""PostgreSQL catalog reads under `search_path = pg_catalog` (operator capture).

An unqualified operator resolves on the session's search_path, where PostgreSQL weighs operators of
other argument types alike whatever their schema: an exact match wins over pg_catalog's operator
that needs a coercion, though pg_catalog is searched first. A user `public.>=(oid, integer)` so
answered the start-up checks' `p.oid >= 16384`: it returning false made every user function the
server's own (no per-row function, no catalog finding, no implicit reach). The checks' queries that
resolve no user name through the path run with pg_catalog alone on it, where no user operator (nor
type, nor function) is found; the reader's path comes back afterwards. A query that fails leaves
the transaction to its rollback, which undoes the setting too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["catalog_path"]

_PIN: Final = (
    "SELECT pg_catalog.current_setting('search_path'),"
    " pg_catalog.set_config('search_path', 'pg_catalog', false)"
)
_BACK: Final = "SELECT pg_catalog.set_config('search_path', CAST(:path AS pg_catalog.text), false)"


@contextmanager
def catalog_path(conn: Connection) -> Iterator[None]:
    """Run the block's statements in `conn` with `search_path` pg_catalog alone, then restore it."""
    row = conn.execute(text(_PIN)).one()
    yield
    conn.execute(text(_BACK), {"path": str(row[0])})
