"""SQLAlchemy's reflection read where nothing of the reader's names answers it (red team rtA F3).

SQLAlchemy's PostgreSQL reflection writes unqualified operators (`pg_attribute.attnum > 0::SMALLINT`)
and reads them on the session's search_path. A reader whose path lists `public` before pg_catalog
found `public.>(smallint, smallint)` (built on `pg_catalog.int2lt`, no user function at all) first:
`customers` was reflected as its system columns only, `*.email` masked nothing, and the e-mails were
served in clear. Masking's reflection runs on one connection under the profile's `catalog_reads`
(PostgreSQL: pg_catalog alone on the path), where the schema a name means must be given: the
session's default schema (read before the path is pinned) stands for None.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

from sqlalchemy import inspect
from sqlalchemy.engine import Engine as SaEngine
from sqlalchemy.engine.reflection import Inspector
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.dialects import sqlglot_dialect
from mcpkit.sql.profiles import profile_for_dialect

__all__ = ["catalog_inspector", "path_schemas", "reflect_views"]


@contextmanager
def catalog_inspector(engine: SaEngine, schema: str | None) -> Iterator[tuple[Inspector, str | None]]:
    """An inspector on one connection whose catalog reads no user object answers, and the schema
    to pass it for `schema` (PostgreSQL: None is the session's default schema)."""
    with engine.connect() as conn:
        if schema is None and engine.dialect.name == "postgresql":
            schema = inspect(conn).default_schema_name
        with profile_for_dialect(sqlglot_dialect(engine.url)).catalog_reads(conn):
            yield inspect(conn), schema


def path_schemas(engine: SaEngine) -> tuple[str, ...] | None:
    """The schemas an unqualified table name is looked up in, in order (None: one namespace)."""
    with engine.connect() as conn:
        return profile_for_dialect(sqlglot_dialect(engine.url)).name_path(conn)


def reflect_views(engine: SaEngine, schema: str | None = None) -> frozenset[str]:
    """The names of one schema's views and materialized views."""
    with catalog_inspector(engine, schema) as (insp, named):
        try:
            names = set(insp.get_view_names(named))
            with suppress(NotImplementedError):  # a dialect without materialized views
                names |= set(insp.get_materialized_view_names(named))
        except DBAPIError:  # a schema dropped since it was listed (another session's DDL) has none
            if schema is None or schema in inspect(engine).get_schema_names():
                raise
            return frozenset()
    return frozenset(names)
