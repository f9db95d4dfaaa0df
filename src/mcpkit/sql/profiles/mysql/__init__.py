"""MySQL and MariaDB: the read-only session, the login's verification, the catalog, the estimate."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import URL, Connection

from mcpkit.sql.profiles.base import AccountReport, Readable, quote_role
from mcpkit.sql.profiles.mysql.account import inspect_mysql
from mcpkit.sql.profiles.mysql.cost import mysql_cost
from mcpkit.sql.profiles.mysql.session import MysqlSession

__all__ = ["MysqlProfile", "mysql_cost"]

_ROWS: Final = "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES"


class MysqlProfile(MysqlSession):
    """MySQL 8 and MariaDB 10.6+ through pymysql."""

    forever_sql = "SELECT SLEEP(100000)"  # MariaDB caps recursive CTEs at max_recursive_iterations
    costed = True

    def inspect(self, conn: Connection, url: URL) -> AccountReport:
        """SUPER/FILE/admin privileges and writable tables of the login."""
        return inspect_mysql(conn)

    def readable(self, conn: Connection) -> Readable:
        """`information_schema.TABLES` lists exactly what the login can see."""
        rows = conn.execute(text(_ROWS)).all()
        return {(s, n): (int(e) if e is not None else None) for s, n, e in rows}

    def explain(self, sql: str) -> str:
        """`EXPLAIN FORMAT=JSON`."""
        return "EXPLAIN FORMAT=JSON " + sql

    def cost(self, document: Any) -> float:
        """MySQL's cost, MariaDB's estimated rows examined (`mysql_cost`)."""
        return mysql_cost(document)

    def role_setup(self, role: str) -> str | None:
        """None: each role has its own login, from the secrets store."""
        quote_role(role)
        return None
