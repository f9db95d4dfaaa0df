"""Red team rt19mask F9: a SECURITY DEFINER function PostgreSQL runs with no EXECUTE check (an
aggregate's transition function) was invisible to the mask check, whose definer search counted only
functions the role may EXECUTE: with the aggregate opted in (`--allow function:public.collect_info`)
doctor said `ok masks` and `SELECT collect_info(id) FROM staff` answered every e-mail. The search
starts from every function the least-privilege walk reaches unchecked now."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.sql.errors import QueryFailed, SqlConfigError
from tests.helpers import run_mcpkit
from tests.sql.sql_support import pg_scratch
from tests.sql_governance.support import serve_masked

SECRET = "aa@secret.example"


@pytest.mark.postgres
def test_postgres_a_definer_aggregate_component_is_refused_under_masks(pg_url: str, tmp_path: Path) -> None:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - staff.email\n")
    with pg_scratch(pg_url, "maskfix2_agg") as pg:
        a = pg.admin
        a.execute("CREATE TABLE staff (id int PRIMARY KEY, name text, email text)")
        a.execute(f"INSERT INTO staff VALUES (1, 'aa', '{SECRET}')")
        a.execute(
            "CREATE FUNCTION agg_step(state text, x int) RETURNS text LANGUAGE sql STABLE SECURITY DEFINER"
            " AS $$ SELECT coalesce(state || ',', '') || (SELECT email FROM staff WHERE id = x) $$"
        )
        a.execute("REVOKE ALL ON FUNCTION agg_step(text, int) FROM PUBLIC")
        a.execute("CREATE AGGREGATE collect_info(int) (SFUNC = agg_step, STYPE = text)")
        a.execute(f"GRANT USAGE ON SCHEMA public TO {pg.reader}")
        a.execute(f"GRANT SELECT (id, name) ON staff TO {pg.reader}")
        with pytest.raises(
            SqlConfigError, match=r"function public\.agg_step\(state text, x integer\) runs as"
        ):
            serve_masked(pg.reader_url, masks).engine.close()  # type: ignore[attr-defined]
        done = run_mcpkit(
            "sql",
            "doctor",
            "--dsn",
            pg.reader_url,
            "--mask",
            str(masks),
            "--allow",
            "function:public.collect_info",
        )
        assert "fail masks: function public.agg_step(state text, x integer) runs as its owner" in done.stdout
        assert "ALTER FUNCTION public.agg_step(state text, x integer) SECURITY INVOKER" in done.stdout
        # the fix printed: the component runs as the reader, who may not read the e-mail
        a.execute("ALTER FUNCTION agg_step(text, int) SECURITY INVOKER")
        service = serve_masked(pg.reader_url, masks)
        try:
            with pytest.raises(QueryFailed):
                # the database itself refuses (mcpkit's function list would refuse it earlier)
                service.engine.execute("SELECT public.collect_info(id) FROM staff", None, 10, 10.0, "t")  # type: ignore[attr-defined]
        finally:
            service.engine.close()  # type: ignore[attr-defined]
