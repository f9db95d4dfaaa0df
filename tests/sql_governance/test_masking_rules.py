"""Red team rt19mask F3: a PostgreSQL rewrite rule on a masked table (`CREATE RULE ... ON INSERT DO
ALSO INSERT INTO audit_log VALUES (NEW.id, NEW.email)`) copies the masked value as an audit trigger
does, but start-up and `doctor --mask` named only row triggers. Rules are named now on the same
`warn triggers:` line, with the tables their actions write."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import prepare_masks, trigger_hints
from tests.helpers import run_mcpkit
from tests.sql.sql_support import pg_scratch


@pytest.mark.postgres
def test_postgres_rules_on_a_masked_table_are_named(pg_url: str, tmp_path: Path) -> None:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - audit_src.email\n")
    with pg_scratch(pg_url, "maskfix2_rule") as pg:
        a = pg.admin
        a.execute("CREATE TABLE audit_src (id int PRIMARY KEY, email text)")
        a.execute("CREATE TABLE audit_log (id int, email text)")
        a.execute("CREATE TABLE other (id int, email text)")  # no masked column: its rule is not named
        a.execute(
            "CREATE RULE copy_email AS ON INSERT TO audit_src DO ALSO"
            " INSERT INTO audit_log VALUES (NEW.id, NEW.email)"
        )
        a.execute(
            "CREATE RULE move_email AS ON UPDATE TO audit_src WHERE old.email <> new.email DO INSTEAD"
            " UPDATE audit_log SET email = new.email WHERE id = old.id"
        )
        a.execute(
            "CREATE RULE other_rule AS ON INSERT TO other DO ALSO INSERT INTO audit_log VALUES (NEW.id)"
        )
        a.execute(f"GRANT SELECT (id) ON audit_src TO {pg.reader}")
        a.execute(f"GRANT SELECT ON audit_log, other TO {pg.reader}")
        engine = SqlEngine(pg.reader_url)
        try:
            _, _, masked = prepare_masks(engine, str(masks))
            hints = trigger_hints(engine, masked)
        finally:
            engine.close()
        assert any("rule copy_email (ON INSERT; it writes public.audit_log)" in h for h in hints), hints
        assert any("rule move_email (ON UPDATE; it writes public.audit_log)" in h for h in hints), hints
        assert not any("other_rule" in h for h in hints), hints
        done = run_mcpkit("sql", "doctor", "--dsn", pg.reader_url, "--mask", str(masks))
        assert (
            "warn triggers: table audit_src has masked columns and rule copy_email (ON INSERT; it writes"
            " public.audit_log)" in done.stdout
        ), done.stdout
