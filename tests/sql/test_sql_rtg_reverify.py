"""Red team rtg, N2: a re-verification that failed with anything but a finding (a database error,
the call's deadline) left the guard as if the catalog had been read and verified: the failing call
had already stamped the read time, so calls on other connections within `--catalog-check-interval`
skipped their read and ran on the changed catalog. Now only a read that matched the verified
fingerprint, or a verification that completed, lets later calls skip theirs.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, SqlConfigError
from mcpkit.sql.reverify import Guard, Unverified, catalog_checked
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv


def test_a_verification_that_fails_to_run_makes_the_next_call_read_the_catalog(sqlite_copy: DbEnv) -> None:
    path = make_url(sqlite_copy.ro_url).database or ""
    crash = [True]

    def verify(engine: SqlEngine, conn: Any) -> None:
        names = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master").fetchall()}
        if "mk_forbidden" in names:  # stands for a finding of the real checks
            if crash[0]:  # the first time the verification itself fails (a real database error)
                crash[0] = False
                conn.exec_driver_sql("SELECT * FROM mk_no_such_table")
            raise SqlConfigError("mk_forbidden exists")

    engine = SqlEngine(sqlite_copy.ro_url, pool_size=2)
    engine.guard = Guard(verify, "sqlite test", every_s=3600.0)  # reads shared for an hour
    service = SqlService(engine)
    try:
        with engine.session(5.0, "first"), engine.session(5.0, "second"):
            pass  # both pooled connections have read the (verified) catalog
        with sqlite3.connect(path) as w:
            w.execute("CREATE TABLE mk_forbidden (a)")
        with catalog_checked(), pytest.raises(QueryFailed):  # this call reads it; the check fails to run
            service.query("SELECT 1 AS one", call_id="crashes")
        with pytest.raises(Unverified):  # before: skipped its read and answered
            service.query("SELECT 1 AS one", call_id="next")
    finally:
        engine.close()
