"""A short digest of what some catalog queries return, for the catalog fingerprints (`reverify`)."""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["catalog_digest"]


def catalog_digest(dbapi: Any, *queries: str) -> str:
    """The queries' rows, in order, hashed: equal catalogs give equal digests within a process."""
    rows: list[tuple[Any, ...]] = []
    for sql in queries:
        cur = dbapi.cursor()
        try:
            cur.execute(sql)
            rows += list(cur.fetchall())
        finally:
            cur.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:32]
