"""A short digest of what some catalog queries return, for the catalog fingerprints (`reverify`)."""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["catalog_digest", "digest", "fetch"]


def fetch(dbapi: Any, sql: str) -> list[tuple[Any, ...]]:
    """One statement's rows, on the driver connection."""
    cur = dbapi.cursor()
    try:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


def digest(rows: object) -> str:
    """Rows hashed: equal catalogs give equal digests within a process."""
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:32]


def catalog_digest(dbapi: Any, *queries: str) -> str:
    """The queries' rows, in order, hashed."""
    return digest([row for sql in queries for row in fetch(dbapi, sql)])
