"""Red team rtg, F2: a custom setting's placeholder outlives the pool's reset.

Running a function whose own `SET app.x = ...` clause names a custom setting defines `app.x` on the
backend for its life; `RESET ALL` (the pool's reset) only sets it back to `''`, and PostgreSQL
neither lists nor drops placeholders, so the next call on the pooled connection tells `''` from a
fresh connection's NULL. Admission refuses `set_config`; this route needs none: a STABLE
SQL-standard function reached through a view. Start-up now refuses every function the role can make
run that sets a custom setting for itself (`function-config`, fix `ALTER FUNCTION ... RESET`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import PgScratch, pg_scratch, run_cli


@pytest.fixture
def marked(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rtgf2") as db:
        db.admin.execute(f"CREATE SCHEMA s; GRANT USAGE ON SCHEMA s TO {db.reader}")
        db.admin.execute(
            "CREATE FUNCTION s.mark() RETURNS int LANGUAGE sql STABLE SET mk.flag = 'on'"
            " BEGIN ATOMIC SELECT 1; END"
        )
        db.admin.execute("CREATE VIEW s.w WITH (security_invoker) AS SELECT s.mark() AS m")
        db.admin.execute(
            "CREATE VIEW s.peek WITH (security_invoker) AS"
            " SELECT current_setting('mk.flag', true) IS NULL AS fresh"
        )
        db.admin.execute(f"GRANT SELECT ON s.w, s.peek TO {db.reader}")
        yield db


def _fresh_after_marking(db: PgScratch) -> bool:
    """Through the service (admission on), one pooled connection: mark, then peek."""
    engine = SqlEngine(db.reader_url, pool_size=1)
    try:
        service = SqlService(engine)
        assert service.query("SELECT fresh FROM s.peek", call_id="a")[0].rows == [[True]]
        assert service.query("SELECT m FROM s.w", call_id="b")[0].rows == [[1]]
        return bool(service.query("SELECT fresh FROM s.peek", call_id="c")[0].rows[0][0])
    finally:
        engine.close()


def test_a_function_defining_a_placeholder_is_refused_until_reset(
    marked: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not _fresh_after_marking(marked)  # PostgreSQL: the reset cannot drop the placeholder
    code, out = run_cli(capsys, "sql", "doctor", "--dsn", marked.reader_url)
    line = next((x for x in out.splitlines() if "s.mark()" in x), "")
    assert code == 1 and line.startswith("fail least privilege:"), out
    assert "mk.flag" in line and "ALTER FUNCTION s.mark() RESET mk.flag" in line, line
    assert "--allow function-config:s.mark" in line, line

    marked.admin.execute("ALTER FUNCTION s.mark() RESET mk.flag")
    code, out = run_cli(capsys, "sql", "doctor", "--dsn", marked.reader_url)
    assert "s.mark()" not in out, out
    assert _fresh_after_marking(marked)
