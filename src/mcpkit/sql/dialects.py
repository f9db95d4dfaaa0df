"""DSNs and dialect names: which SQLAlchemy driver a URL uses and which sqlglot dialect parses for it."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.mysql import MySQL
from sqlglot.generator import Generator
from sqlglot.generators.mysql import MySQLGenerator

from mcpkit.sql.errors import SqlConfigError

__all__ = ["normalize_url", "sent_dialect", "sqlglot_dialect"]

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


def _regexp(gen: Generator, node: exp.RegexpLike) -> str:
    if node.args.get("flag") is not None:  # only the function takes match flags (MySQL 8)
        return gen.func("REGEXP_LIKE", node.this, node.expression, node.args.get("flag"))
    return f"({gen.binary(node, 'REGEXP')})"  # parenthesised: REGEXP binds looser than + or ||


class MySQLFamily(MySQL):
    """MySQL as MySQL 8 and MariaDB both read it: sqlglot writes `x REGEXP y` as REGEXP_LIKE(),
    a function MariaDB does not have, so every REGEXP/RLIKE query failed there."""

    class Generator(MySQLGenerator):
        TRANSFORMS: ClassVar[dict[type[exp.Expr], Any]] = {
            **MySQLGenerator.TRANSFORMS,
            exp.RegexpLike: _regexp,
        }


_SENT: Final[dict[str, Dialect]] = {"mysql": MySQLFamily()}


def sent_dialect(dialect: str) -> str | Dialect:
    """The dialect to write SQL in for the database of `dialect` (what it was parsed as).

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT a FROM t WHERE a RLIKE '^x'", read="mysql")
    >>> tree.sql(dialect=sent_dialect("mysql"))
    "SELECT a FROM t WHERE (a REGEXP '^x')"
    """
    return _SENT.get(dialect, dialect)
