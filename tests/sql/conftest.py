"""SQL test fixtures: demo databases and least-privilege accounts on the real servers."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.demo import load_demo, write_demo_sqlite
from tests.sql.sql_support import READER_CONNECTIONS, DbEnv, mysql_admin


def _canary(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    # World-writable, so a file write by the database server would land here and be seen.
    path = tmp_path_factory.mktemp(name)
    os.chmod(path, 0o777)
    return path


@pytest.fixture(scope="session")
def sqlite_env(tmp_path_factory: pytest.TempPathFactory) -> DbEnv:
    """A demo SQLite file in its own directory (the directory is checked for new files)."""
    folder = tmp_path_factory.mktemp("sqlite_demo")
    path = write_demo_sqlite(folder / "demo.db")
    url = f"sqlite:///{path}"
    return DbEnv("sqlite", url, url, url, "main", "", "", folder)


@pytest.fixture(scope="session")
def pg_env(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DbEnv]:
    """A schema with the demo tables, a SELECT-only role and a role that may write them."""
    tag = secrets.token_hex(4)
    schema, ro, rw = f"mcpkit_t_{tag}", f"mcpkit_ro_{tag}", f"mcpkit_rw_{tag}"
    admin = make_url(pg_url)
    with psycopg.connect(
        admin.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True
    ) as c:
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"CREATE ROLE {ro} LOGIN")
        c.execute(f"CREATE ROLE {rw} LOGIN")
    load_demo(pg_url, schema=schema)
    with psycopg.connect(
        admin.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True
    ) as c:
        c.execute(f"CREATE SEQUENCE {schema}.canary_seq")
        c.execute(f"CREATE TABLE {schema}.audit_log (id serial PRIMARY KEY, note text)")
        c.execute(
            f"CREATE FUNCTION {schema}.bump_audit() RETURNS int LANGUAGE sql VOLATILE AS "
            f"$$ INSERT INTO {schema}.audit_log (note) VALUES ('bumped') RETURNING id $$"
        )
        # As `mcpkit sql grant` tells an operator: a reader must not be able to run it.
        c.execute(f"REVOKE EXECUTE ON FUNCTION {schema}.bump_audit() FROM PUBLIC")
        for role in (ro, rw):
            c.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
            c.execute(f"GRANT USAGE, SELECT ON SEQUENCE {schema}.canary_seq TO {role}")
            c.execute(f"ALTER ROLE {role} SET search_path = {schema}")
        c.execute(f"GRANT INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA {schema} TO {rw}")
        c.execute(f"GRANT CREATE ON SCHEMA {schema} TO {rw}")
        c.execute(f"GRANT UPDATE ON SEQUENCE {schema}.canary_seq TO {rw}")
        c.execute(f"GRANT USAGE ON SEQUENCE {schema}.audit_log_id_seq TO {rw}")
    env = DbEnv(
        "postgres",
        pg_url,
        admin.set(username=ro, password=None).render_as_string(hide_password=False),
        admin.set(username=rw, password=None).render_as_string(hide_password=False),
        schema,
        ro,
        rw,
        _canary(tmp_path_factory, "pg_canary"),
    )
    yield env
    with psycopg.connect(
        admin.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True
    ) as c:
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename IN (%s, %s)", [ro, rw]
        )
        c.execute(f"DROP SCHEMA {schema} CASCADE")
        for role in (ro, rw):
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")


@pytest.fixture(scope="session")
def mysql_env(mysql_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DbEnv]:
    """A database with the demo tables, a SELECT-only user and a user that may write it."""
    tag = secrets.token_hex(4)
    db, ro, rw = f"mcpkit_t_{tag}", f"mcpkit_ro_{tag}", f"mcpkit_rw_{tag}"
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        # the connection limit serve checks for one source at the default --pool-size
        c.execute(f"CREATE USER '{ro}'@'%' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}")
        c.execute(f"CREATE USER '{rw}'@'%' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}")
        c.execute(f"GRANT SELECT ON {db}.* TO '{ro}'@'%'")
        c.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX ON {db}.* TO '{rw}'@'%'")
    base = make_url(mysql_url)
    load_demo(base.set(database=db).render_as_string(hide_password=False))
    env = DbEnv(
        "mysql",
        base.set(database=db).render_as_string(hide_password=False),
        base.set(username=ro, password=None, database=db).render_as_string(hide_password=False),
        base.set(username=rw, password=None, database=db).render_as_string(hide_password=False),
        db,
        ro,
        rw,
        _canary(tmp_path_factory, "mysql_canary"),
    )
    yield env
    with admin.cursor() as c:
        c.execute(f"DROP DATABASE {db}")
        c.execute(f"DROP USER '{ro}'@'%'")
        c.execute(f"DROP USER '{rw}'@'%'")
    admin.close()


@pytest.fixture
def sqlite_copy(sqlite_env: DbEnv, tmp_path: Path) -> DbEnv:
    """A private copy of the demo SQLite file, for tests that must see the file untouched."""
    folder = tmp_path / "db"
    folder.mkdir()
    shutil.copy(Path(sqlite_env.canary) / "demo.db", folder / "demo.db")
    url = f"sqlite:///{folder / 'demo.db'}"
    return DbEnv("sqlite", url, url, url, "main", "", "", folder)
