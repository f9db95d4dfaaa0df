"""PostgreSQL inheritance parents of a masked table answer in its scan order (red team rt30 F1).

`contacts (email) INHERITS (people)`, CLUSTERed on a unique index over the masked `email`: a query
on `people` reads the child's rows (with the parent's grants) in the child's scan order, so
`SELECT array_agg(id) FROM people` answered the ids in e-mail order, and `LIMIT 2` the
ids of the smallest e-mails: the analysis walked pg_inherits down from a masked table, not up. Every
ancestor (a second parent, a grandparent, one in another schema) now counts as a masked read: the
same order rewrite, the same refusals; views over one are checked at start-up as views over the
masked table are; a table that becomes a parent while serving fails the catalog re-check. A primary
key of an inheritance parent no longer makes an order total (its children's rows may repeat it).
Controls: an unrelated table keeps its unrewritten answer; a new child of the masked table is fine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import text_of
from tests.sql.sql_support import PgScratch, masks_file, pg_scratch, serving_masked
from tests.sql.sql_support import run_cli as _run

# Ids out of e-mail order: a scan in e-mail order lists the ids 4, 1, 5, 2, 3.
ROWS = [(4, "Dan", "a"), (1, "Ann", "b"), (5, "Eve", "c"), (2, "Bob", "d"), (3, "Cy", "e")]
SCANNED, ORDERED = "4,1,5,2,3", "1,2,3,4,5"


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt30a") as db:
        contacts = ", ".join(f"({i}, '{n}', 't{i}', '{e}@x.example')" for i, n, e in ROWS)
        leaf = ", ".join(f"({i}, '{n}', '{e}@x.example')" for i, n, e in ROWS)
        plain = ", ".join(f"({i}, '{e}{n}')" for i, n, e in ROWS)
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE SCHEMA rt30a_other;
            CREATE TABLE people (id int PRIMARY KEY, name text NOT NULL);
            INSERT INTO people VALUES (100, 'Own');
            CREATE TABLE tagged (tag text);
            CREATE TABLE contacts (email text NOT NULL) INHERITS (people, tagged);
            CREATE UNIQUE INDEX contacts_email ON contacts (email);
            INSERT INTO contacts (id, name, tag, email) VALUES {contacts};
            CLUSTER contacts USING contacts_email;
            CREATE TABLE rt30a_other.folk (id int, name text NOT NULL);
            CREATE TABLE mid () INHERITS (rt30a_other.folk);
            CREATE TABLE leaf (email text NOT NULL) INHERITS (mid);
            CREATE UNIQUE INDEX leaf_email ON leaf (email);
            INSERT INTO leaf (id, name, email) VALUES {leaf};
            CLUSTER leaf USING leaf_email;
            CREATE TABLE ev (id int, email text NOT NULL) PARTITION BY RANGE (id);
            CREATE TABLE ev_a PARTITION OF ev FOR VALUES FROM (0) TO (100);
            CREATE UNIQUE INDEX ev_a_email ON ev_a (email);
            INSERT INTO ev SELECT id, email FROM leaf;
            CLUSTER ev_a USING ev_a_email;
            CREATE TABLE plain (id int, name text NOT NULL);
            CREATE UNIQUE INDEX plain_name ON plain (name);
            INSERT INTO plain VALUES {plain};
            CLUSTER plain USING plain_name;
            CREATE TABLE later (id int, name text NOT NULL);
            INSERT INTO later VALUES (100, 'Own');
            ANALYZE;
            GRANT USAGE ON SCHEMA public, rt30a_other TO {db.reader};
            GRANT SELECT ON people, tagged, mid, rt30a_other.folk, plain, later TO {db.reader};
            GRANT SELECT (id, name, tag) ON contacts TO {db.reader};
            GRANT SELECT (id, name) ON leaf TO {db.reader};
            GRANT SELECT (id) ON ev, ev_a TO {db.reader};
            """
        )
        yield db


# the tables CLUSTERed on a masked e-mail index: accepted here (the refusal: test_sql_mask_scan_pins)
CLUSTERED_TABLES = ("contacts", "leaf", "ev_a", "people")
CLUSTERED = [a for t in CLUSTERED_TABLES for a in ("--allow", f"clustered-order:{t}")]


def _masks(folder: Path) -> str:
    return masks_file(folder, "contacts.email", "leaf.email", "ev_a.email")


def _query(pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str) -> tuple[int, str]:
    return _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", _masks(tmp_path), *CLUSTERED, sql)


@pytest.mark.postgres
def test_postgres_every_parent_of_a_masked_table_answers_in_no_scan_order(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agg = "SELECT array_agg(id) AS a FROM "
    # what the red team read: the parent answers the child's rows in e-mail order
    assert pg.admin.execute(agg + "ONLY contacts").fetchone()[0] == [4, 1, 5, 2, 3]
    assert pg.admin.execute(agg + "people").fetchone()[0] == [100, 4, 1, 5, 2, 3]
    for sql, want in [
        (agg + "people", f"| [{ORDERED},100] |"),  # before: | [100,4,1,5,2,3] |
        (agg + "rt30a_other.folk", f"| [{ORDERED}] |"),  # a grandparent in another schema
        (agg + "mid", f"| [{ORDERED}] |"),  # the parent between
        (agg + "ev", f"| [{ORDERED}] |"),  # a partitioned parent (its e-mail is masked as well)
        ("SELECT string_agg(tag, ',') AS a FROM tagged", "| t1,t2,t3,t4,t5 |"),  # a second parent
        ("SELECT id FROM people WHERE id < 100 LIMIT 2", "| 1 |\n| 2 |"),  # before: 4, 1
        ("SELECT array_agg(id) AS a FROM (SELECT id FROM people) s", "| [1,2,3,4,5,100] |"),
    ]:
        code, out = _query(pg, tmp_path, capsys, sql)
        assert code == 0, (sql, out)
        assert want in out, (sql, out)
        assert SCANNED not in out and "t4,t1" not in out, (sql, out)
    code, out = _query(pg, tmp_path, capsys, "SELECT ctid::text AS pos, id FROM people")
    assert code != 0 and "REFUSED" in out, out  # a row's position is the child's ranking
    code, out = _query(pg, tmp_path, capsys, agg + "ONLY people")  # conservative: pinned as well
    assert code == 0 and "| [100] |" in out, out
    # control: an unrelated table clustered on its own column is sent as written (scan order)
    code, out = _query(pg, tmp_path, capsys, agg + "plain")
    assert code == 0 and f"| [{SCANNED}] |" in out, out


@pytest.mark.postgres
def test_postgres_views_over_a_parent_are_checked_as_views_over_the_masked_table(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f"""
        CREATE VIEW pv_agg WITH (security_invoker = true) AS
            SELECT string_agg(id::text, ',') AS a FROM people;
        CREATE VIEW pv_key WITH (security_invoker = true) AS SELECT id FROM people ORDER BY id LIMIT 2;
        CREATE VIEW pv_plain WITH (security_invoker = true) AS SELECT id, name FROM people;
        GRANT SELECT ON pv_agg, pv_key, pv_plain TO {pg.reader};
        """
    )
    code, out = _query(pg, tmp_path, capsys, "SELECT a FROM pv_agg")
    assert code == 2, out  # before: | 100,4,1,5,2,3 |
    assert SCANNED not in out
    assert "view public.pv_agg may answer in the scan order of a masked table: aggregate" in out, out
    # people's primary key holds for its own rows only: contacts' rows may repeat an id
    assert "view public.pv_key may answer in the scan order of a masked table: LIMIT" in out, out
    assert "pv_plain" not in out, out
    done = _run(
        capsys,
        "sql",
        "grant",
        "--dsn",
        pg.admin_url,
        "--role",
        f"{pg.reader}_g",
        "--tables",
        "public.people,public.contacts,public.pv_agg,public.pv_plain",
        "--mask",
        _masks(tmp_path),
    )
    assert done[0] == 0, done[1]
    assert "left out: view public.pv_agg may answer in the scan order" in done[1], done[1]
    assert "ON public.pv_agg" not in done[1] and "ON public.pv_plain TO" in done[1], done[1]


@pytest.mark.postgres
@pytest.mark.anyio
async def test_postgres_a_table_made_a_parent_while_serving_fails_the_catalog_check(
    pg: PgScratch, tmp_path: Path
) -> None:
    agg = "SELECT array_agg(id) AS a FROM "
    async with serving_masked(pg.reader_url, Path(_masks(tmp_path)), CLUSTERED_TABLES) as ask:
        first = await ask(agg + "later")
        assert "mcpkit/error" not in (first.meta or {}) and "100" in text_of(first), text_of(first)
        pg.admin.execute("CREATE TABLE contacts_new () INHERITS (contacts)")  # a new child: fine
        fine = await ask(agg + "people")
        assert "mcpkit/error" not in (fine.meta or {}), text_of(fine)
        assert f"[{ORDERED},100]" in text_of(fine), text_of(fine)
        pg.admin.execute("ALTER TABLE contacts INHERIT later")  # an existing table becomes a parent
        assert pg.admin.execute(agg + "later").fetchone()[0] == [100, 4, 1, 5, 2, 3]
        leaked = await ask(agg + "later")
        code = (leaked.meta or {}).get("mcpkit/error", {}).get("code")
        assert code == "SOURCE_UNVERIFIED", text_of(leaked)  # before: [100,4,1,5,2,3]
        assert SCANNED not in text_of(leaked)
        pg.admin.execute("ALTER TABLE contacts NO INHERIT later")
        again = await ask(agg + "later")
        assert "mcpkit/error" not in (again.meta or {}) and "100" in text_of(again), text_of(again)
