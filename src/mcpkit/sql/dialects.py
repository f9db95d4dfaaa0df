"""DSNs and dialect names: which SQLAlchemy driver a URL uses and which sqlglot dialect parses for it."""

from __future__ import annotations

from typing import Final

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.grammar import read_dialect, sent_dialect

__all__ = ["normalize_url", "read_dialect", "sent_dialect", "sqlglot_dialect"]

# Plain URLs pick the drivers mcpkit installs.
_DEFAULT_DRIVERS: Final[dict[str, str]] = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}

# SQLAlchemy backend name -> sqlglot dialect name.
_SQLGLOT: Final[dict[str, str]] = {
    "postgresql": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
    "oracle": "oracle",
    "mssql": "tsql",
    "duckdb": "duckdb",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
}


def normalize_url(dsn: str | URL) -> URL:
    """Parse a SQLAlchemy URL, mapping plain `postgresql://` and `mysql://` to psycopg and pymysql.

    >>> str(normalize_url("postgresql://u@h/db"))
    'postgresql+psycopg://u@h/db'
    >>> normalize_url("mysql://root@127.0.0.1/test").drivername
    'mysql+pymysql'

    Args:
        dsn: A SQLAlchemy URL string or object.

    Returns:
        The URL with an explicit driver.

    Raises:
        SqlConfigError: the text is not a URL.
    """
    try:
        url = make_url(dsn) if isinstance(dsn, str) else dsn
    except ArgumentError as exc:
        raise SqlConfigError("The DSN is not a valid SQLAlchemy URL (scheme://user@host/db).") from exc
    driver = _DEFAULT_DRIVERS.get(url.drivername)
    return url.set(drivername=driver) if driver else url


def sqlglot_dialect(url: URL) -> str:
    """The sqlglot dialect that reads SQL for this URL's backend.

    >>> sqlglot_dialect(normalize_url("sqlite:///x.db"))
    'sqlite'

    Args:
        url: A normalized URL.

    Returns:
        A sqlglot dialect name.
    """
    backend = url.get_backend_name()
    return _SQLGLOT.get(backend, backend)
