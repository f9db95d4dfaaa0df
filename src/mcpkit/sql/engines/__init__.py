"""Engines: run one statement read-only on a real database (or a fake one, for tests)."""

__all__ = [
    "Column",
    "Engine",
    "FakeEngine",
    "Params",
    "PostgresCatalog",
    "Rows",
    "SqlEngine",
]

from mcpkit.sql.engines.base import Column, Engine, Params, Rows
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.engines.fake import FakeEngine
from mcpkit.sql.profiles.postgres.catalog import PostgresCatalog
