"""Reading the planner's estimate from EXPLAIN JSON: PostgreSQL, MySQL and MariaDB shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpkit.sql.demo import write_demo_sqlite
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles import PostgresProfile
from mcpkit.sql.profiles.mysql import mysql_cost
from mcpkit.sql.service import SqlService

postgres_cost = PostgresProfile().cost


def _table(rows: int, filtered: float = 100, **more: object) -> dict[str, object]:
    return {"table": {"table_name": "t", "access_type": "ALL", "rows": rows, "filtered": filtered, **more}}


def _block(*tables: dict[str, object], **more: object) -> dict[str, object]:
    return {"select_id": 1, "nested_loop": list(tables), **more}


def test_postgres_total_cost() -> None:
    assert postgres_cost('[{"Plan": {"Node Type": "Limit", "Total Cost": 42.5}}]') == 42.5
    assert postgres_cost([{"Plan": {"Total Cost": 7}}]) == 7.0


def test_mysql_query_cost_wins_when_present() -> None:
    plan = {"query_block": {"cost_info": {"query_cost": "1234.25"}, **_block(_table(10))}}
    assert mysql_cost(json.dumps(plan)) == 1234.25


def test_mariadb_nested_loop_examines_prefix_products() -> None:
    plan = {"query_block": _block(_table(864), {"block-nl-join": {**_table(864), "join_type": "BNL"}})}
    assert mysql_cost(plan) == 864 + 864 * 864


def test_mariadb_filtered_rows_feed_the_next_level() -> None:
    plan = {"query_block": _block(_table(1000, filtered=10), _table(5))}
    assert mysql_cost(plan) == 1000 + 100 * 5


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        ({"query_block": {"select_id": 1, "table": {"message": "No tables used"}}}, 0),
        ({"query_block": _block(_table(1, access_type="const"))}, 1),
        (
            {
                "query_block": {
                    "union_result": {
                        "query_specifications": [
                            {"query_block": _block(_table(100), _table(100))},
                            {"query_block": {"select_id": 2, "table": {"message": "No tables used"}}},
                        ]
                    }
                }
            },
            100 + 100 * 100,
        ),
        (
            {
                "query_block": _block(
                    _table(50),
                    subqueries=[
                        {"expression_cache": {"state": "uninitialized", "query_block": _block(_table(80))}}
                    ],
                )
            },
            50 + 50 * 80,
        ),
        ({"query_block": _block(_table(50), subqueries=[{"query_block": _block(_table(80))}])}, 50 + 80),
        (
            {"query_block": _block(_table(1, materialized={"query_block": _block(_table(30), _table(30))}))},
            1 + 30 + 900,
        ),
        (
            {"query_block": {"filesort": {"temporary_table": {"nested_loop": [_table(20), _table(3)]}}}},
            20 + 60,
        ),
    ],
    ids=["no-tables", "const", "union", "correlated-subquery", "plain-subquery", "materialized", "filesort"],
)
def test_mariadb_plan_shapes(plan: dict[str, object], expected: float) -> None:
    assert mysql_cost(plan) == expected


def test_odd_values_do_not_crash() -> None:
    assert mysql_cost({"query_block": _block({"table": {"rows": "n/a", "filtered": None}})}) == 1
    assert mysql_cost({}) == 0


def test_a_ceiling_where_no_estimate_exists_stops_start_up(tmp_path: Path) -> None:
    engine = SqlEngine(f"sqlite:///{write_demo_sqlite(tmp_path / 'demo.db')}")
    try:
        with pytest.raises(SqlConfigError, match="--max-cost needs"):
            SqlService(engine, max_cost=1000.0)
        with pytest.raises(SqlConfigError, match="positive"):
            SqlService(engine, max_cost=0.0)
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_max_cost_is_refused_where_row_level_security_hides_rows(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Red team pg13 F5: the planner's estimate for `secret = 'alpha'` counts another tenant's rows
    # (statistics cover every row; text `=` is leakproof, so RLS does not hide them from it), so
    # whether a query over the ceiling is refused told whether a hidden value exists.
    from mcpkit.cli import main
    from tests.sql.sql_support import pg_scratch

    with pg_scratch(pg_url, "costrls") as db:
        db.admin.execute(
            f"""
            CREATE TABLE notes (tenant text, secret text);
            INSERT INTO notes SELECT 'other', 'alpha' FROM generate_series(1, 20000);
            INSERT INTO notes SELECT '{db.reader}', 'mine' || g FROM generate_series(1, 200) g;
            ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
            CREATE POLICY own ON notes USING (tenant = current_user);
            GRANT SELECT ON notes TO {db.reader};
            ANALYZE notes;
            """
        )
        sql = "SELECT count(*) FROM notes a CROSS JOIN generate_series(1, 1000) g WHERE a.secret = '{}'"
        ceiling = ["--max-cost", "1500"]

        def ask(*extra: str, guess: str = "alpha") -> tuple[int, str]:
            code = main(["sql", "query", "--dsn", db.reader_url, *extra, sql.format(guess)])
            out = capsys.readouterr()
            return code, out.out + out.err

        code, out = ask(*ceiling)
        assert code == 2, out
        assert "row-level security filters public.notes for the database account" in out, out
        assert "--allow cost-under-rls" in out
        # Opted in, the oracle is there, which is why it is refused by default: the same count
        # (0, no row of the reader's matches) refused for a hidden value, answered for another.
        opted = [*ceiling, "--allow", "cost-under-rls"]
        assert ask(*opted, guess="alpha")[0] == 3
        assert ask(*opted, guess="zzz")[0] == 0
        assert ask(guess="alpha")[0] == 0  # no ceiling: nothing to tell


# Each layout hides the other tenant's 20,000 'alpha' rows from the reader while the planner
# estimates from statistics over every row. `{r}` is the reader, `{o}` a role that owns the views.
_HIDDEN_LAYOUTS = {
    # Column grants only: has_table_privilege is false, row-level security applies all the same.
    "column-grants": (
        """
        ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
        CREATE POLICY own ON notes USING (tenant = current_user);
        GRANT SELECT (tenant, secret) ON notes TO {r};
        """,
        "notes",
        "row-level security filters public.notes for the database account",
    ),
    # A view reading as its owner, whose policy (current_user is still the reader) hides the rows;
    # `everything`, owned by the table's owner, is under no policy and shows every row: not refused.
    "owner-view-rls": (
        """
        ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
        CREATE POLICY own ON notes USING (tenant = current_user);
        GRANT SELECT ON notes TO {o};
        CREATE VIEW v AS SELECT * FROM notes;
        ALTER VIEW v OWNER TO {o};
        CREATE VIEW everything AS SELECT * FROM notes;
        CREATE ROLE {o}_t; ALTER TABLE notes OWNER TO {o}_t; ALTER VIEW everything OWNER TO {o}_t;
        GRANT SELECT ON v, everything TO {r};
        """,
        "v",
        "public.v (reads public.notes under its owner's row-level security)",
    ),
    # No row-level security: the view's own filter on the current user.
    "owner-view-current-user": (
        """
        ALTER TABLE notes OWNER TO {o};
        CREATE VIEW v AS SELECT * FROM notes WHERE tenant = current_user;
        ALTER VIEW v OWNER TO {o};
        CREATE VIEW w AS SELECT secret FROM v;
        ALTER VIEW w OWNER TO {o};
        GRANT SELECT ON v, w TO {r};
        """,
        "w",
        "public.w (filters by the current user or a session setting (in public.v))",
    ),
}


@pytest.mark.postgres
@pytest.mark.parametrize("layout", sorted(_HIDDEN_LAYOUTS))
def test_postgres_max_cost_is_refused_where_column_grants_or_owner_views_hide_rows(
    pg_url: str, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    # The check looked at tables the login may SELECT whole with row-level security active for it:
    # through column grants, or through a view reading with its owner's rights, the same estimate
    # told whether another tenant's hidden rows hold a guessed value (measured, PG 15: 3,444 for
    # 'alpha' against 486 for 'zzz' in each layout).
    from mcpkit.cli import main
    from tests.sql.sql_support import pg_admin, pg_scratch

    setup, relation, named = _HIDDEN_LAYOUTS[layout]
    owner = ""
    try:
        with pg_scratch(pg_url, "costview") as db:
            owner = f"{db.reader}_o"
            db.admin.execute(f"CREATE ROLE {owner}")
            db.admin.execute(
                f"""
                CREATE TABLE notes (tenant text, secret text);
                INSERT INTO notes SELECT 'other', 'alpha' FROM generate_series(1, 20000);
                INSERT INTO notes SELECT '{db.reader}', 'mine' || g FROM generate_series(1, 200) g;
                ANALYZE notes;
                GRANT USAGE ON SCHEMA public TO {db.reader};
                """
                + setup.format(r=db.reader, o=owner)
            )
            sql = f"SELECT count(*) FROM {relation} a CROSS JOIN generate_series(1, 1000) g"
            sql += " WHERE a.secret = '{}'"
            # The owner-rights views are start-up findings of their own (`owner-view`): accepted here.
            views = [f"--allow=view:public.{v}" for v in ("v", "w", "everything")]
            ceiling = ["--max-cost", "1500", *views]

            def ask(*extra: str, guess: str = "alpha") -> tuple[int, str]:
                code = main(["sql", "query", "--dsn", db.reader_url, *extra, sql.format(guess)])
                out = capsys.readouterr()
                return code, out.out + out.err

            code, out = ask(*ceiling)
            assert code == 2, out
            assert named in out, out
            assert "everything" not in out, out
            assert "--allow cost-under-rls" in out
            # Opted in, the oracle is there: refused for the hidden value, answered for another.
            opted = [*ceiling, "--allow", "cost-under-rls"]
            assert ask(*opted, guess="alpha")[0] == 3
            assert ask(*opted, guess="zzz")[0] == 0
    finally:
        if owner:  # the database is gone, and what the roles owned in it
            with pg_admin(pg_url) as c:
                c.execute(f"DROP ROLE IF EXISTS {owner}, {owner}_t")
