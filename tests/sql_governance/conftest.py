"""Fixtures: the demo database plus CRM tables (customers, orders) on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import secrets as tokens
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql import SqlEngine, SqlService
from mcpkit.sql.demo import load_demo, write_demo_sqlite
from tests.sql.sql_support import READER_CONNECTIONS, mysql_admin, pg_admin
from tests.sql_governance.support import CRM_DDL, crm_rows


@dataclass(frozen=True)
class CrmDb:
    """A database with the demo and CRM tables: a URL to read it with, and its schema name."""

    dialect: str
    url: str
    schema: str
    admin_url: str = ""
    role: str = ""


def _fill_sqlite(path: Path) -> None:
    customers, orders = crm_rows()
    with sqlite3.connect(path) as db:
        for ddl in CRM_DDL:
            db.execute(ddl.format(s=""))
        db.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?)", customers)
        db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", orders)
    db.close()


@pytest.fixture(scope="session")
def sqlite_crm(tmp_path_factory: pytest.TempPathFactory) -> CrmDb:
    """The demo SQLite file with the CRM tables added."""
    path = write_demo_sqlite(tmp_path_factory.mktemp("crm") / "demo.db")
    _fill_sqlite(path)
    return CrmDb("sqlite", f"sqlite:///{path}", "main")


@pytest.fixture(scope="session")
def pg_crm(pg_url: str) -> Iterator[CrmDb]:
    """A fresh schema with the demo and CRM tables, read by a SELECT-only role."""
    tag = tokens.token_hex(4)
    schema, role = f"mcpkit_m_{tag}", f"mcpkit_mro_{tag}"
    customers, orders = crm_rows()
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"CREATE ROLE {role} LOGIN")
    load_demo(pg_url, schema=schema)
    with pg_admin(pg_url) as c:
        for ddl in CRM_DDL:
            c.execute(ddl.format(s=f"{schema}."))
        with c.cursor() as cur:
            cur.executemany(f"INSERT INTO {schema}.customers VALUES (%s, %s, %s, %s, %s, %s)", customers)
            cur.executemany(f"INSERT INTO {schema}.orders VALUES (%s, %s, %s, %s, %s)", orders)
        c.execute(f"ANALYZE {schema}.customers")
        c.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
        c.execute(f"ALTER ROLE {role} SET search_path = {schema}")
    url = make_url(pg_url).set(username=role, password=None).render_as_string(hide_password=False)
    yield CrmDb("postgres", url, schema, pg_url, role)
    with pg_admin(pg_url) as c:
        c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role])
        c.execute(f"DROP SCHEMA {schema} CASCADE")
        c.execute(f"DROP OWNED BY {role}")
        c.execute(f"DROP ROLE {role}")


@pytest.fixture(scope="session")
def mysql_crm(mysql_url: str) -> Iterator[CrmDb]:
    """A fresh database with the demo and CRM tables, read by a SELECT-only user."""
    tag = tokens.token_hex(4)
    db, user = f"mcpkit_m_{tag}", f"mcpkit_mro_{tag}"
    customers, orders = crm_rows()
    base = make_url(mysql_url)
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE USER '{user}'@'%' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}")
        c.execute(f"GRANT SELECT ON {db}.* TO '{user}'@'%'")
    load_demo(base.set(database=db).render_as_string(hide_password=False))
    with admin.cursor() as c:
        for ddl in CRM_DDL:
            c.execute(ddl.format(s=f"{db}."))
        c.executemany(f"INSERT INTO {db}.customers VALUES (%s, %s, %s, %s, %s, %s)", customers)
        c.executemany(f"INSERT INTO {db}.orders VALUES (%s, %s, %s, %s, %s)", orders)
        c.execute(f"ANALYZE TABLE {db}.customers, {db}.orders")
        c.fetchall()
    url = base.set(username=user, password=None, database=db).render_as_string(hide_password=False)
    yield CrmDb("mysql", url, db, base.render_as_string(hide_password=False), user)
    with admin.cursor() as c:
        c.execute(f"DROP DATABASE {db}")
        c.execute(f"DROP USER '{user}'@'%'")
    admin.close()


CRM_FIXTURES = {"sqlite": "sqlite_crm", "postgres": "pg_crm", "mysql": "mysql_crm"}
"""The fixture of each dialect's CRM database."""

CRM_PARAMS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres"),
    pytest.param("mysql", id="mysql", marks=pytest.mark.mysql),
]
"""One parameter per CRM database; MariaDB's carries the `mysql` marker."""


@pytest.fixture(params=CRM_PARAMS)
def crm(request: pytest.FixtureRequest) -> CrmDb:
    """Each CRM database in turn."""
    db: CrmDb = request.getfixturevalue(CRM_FIXTURES[request.param])
    return db


@pytest.fixture(params=CRM_PARAMS)
def crm_service(request: pytest.FixtureRequest) -> Iterator[SqlService]:
    """A service over each CRM database in turn (100 rows, 10 s); parametrise it indirectly by dialect."""
    db: CrmDb = request.getfixturevalue(CRM_FIXTURES[request.param])
    engine = SqlEngine(db.url)
    yield SqlService(engine, max_rows=100, timeout_s=10.0)
    engine.close()


@pytest.fixture
def pg_audit_dsn(pg_url: str) -> Iterator[str]:
    """A schema of its own for an audit table, reached through search_path."""
    schema = f"mcpkit_audit_{tokens.token_hex(4)}"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE SCHEMA {schema}")
    yield f"{pg_url}?options=-csearch_path%3D{schema}"
    with pg_admin(pg_url) as c:
        c.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def mysql_audit_dsn(mysql_url: str) -> Iterator[str]:
    """A database of its own on MariaDB for an audit table."""
    db = f"mk_audit_{tokens.token_hex(4)}"
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
    yield make_url(mysql_url).set(database=db).render_as_string(hide_password=False)
    with admin.cursor() as c:
        c.execute(f"DROP DATABASE {db}")
    admin.close()
