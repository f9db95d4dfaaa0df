"""Red team rt19mask F2: a table partitioned by a masked column keeps each value's rows (LIST) or a
range or hash bucket of them in a partition of their own. On PostgreSQL `grant --mask` granted the
unmasked columns of each partition, doctor said only `warn scan order`, and `SELECT id FROM
patients_p1` listed the 'hiv' rows. Such a partition (any level below the key) must not be readable
by name now: start-up and doctor refuse it (`masked-column-partition`, with the REVOKE) and `grant
--mask` grants nothing on it; the rows stay readable through the partitioned table. On MariaDB,
partitions have no privileges of their own: `t PARTITION (p)` selection is refused under masks (a
partition named like a column, `PARTITION (id)`, passed the analysis and answered the rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, SqlConfigError
from mcpkit.sql.maskcheck import mask_findings, prepare_masks
from mcpkit.sql.masking.taint import MaskRefused
from tests.helpers import run_mcpkit
from tests.sql.sql_support import apply_grant, mysql_scratch, pg_admin, pg_scratch
from tests.sql_governance.support import serve_masked

PATIENTS = (
    "CREATE TABLE patients (id int, name text, diagnosis text) PARTITION BY LIST (diagnosis)",
    "CREATE TABLE patients_p1 PARTITION OF patients FOR VALUES IN ('hiv')",
    "CREATE TABLE patients_p2 PARTITION OF patients FOR VALUES IN ('flu')",
    "CREATE TABLE patients_p3 PARTITION OF patients DEFAULT",
    "INSERT INTO patients VALUES (1, 'ann', 'hiv'), (2, 'bob', 'flu'), (3, 'cy', 'hiv'), (4, 'di', 'cold')",
    # second level: by id, then by a hash of the lower-cased diagnosis
    "CREATE TABLE visits (id int, diagnosis text) PARTITION BY RANGE (id)",
    "CREATE TABLE visits_1 PARTITION OF visits FOR VALUES FROM (0) TO (100)"
    " PARTITION BY HASH (lower(diagnosis))",
    "CREATE TABLE visits_1a PARTITION OF visits_1 FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
    "CREATE TABLE visits_1b PARTITION OF visits_1 FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
    "CREATE TABLE plain (id int, diagnosis text) PARTITION BY RANGE (id)",  # not by the masked column
    "CREATE TABLE plain_1 PARTITION OF plain FOR VALUES FROM (0) TO (100)",
    # the partitioning of old: inheritance children, each with a CHECK of its own on the masked column
    "CREATE TABLE cases (id int, diagnosis text CHECK (diagnosis <> ''))",  # a parent's CHECK: a fact
    "CREATE TABLE cases_hiv (CHECK (diagnosis = 'hiv')) INHERITS (cases)",
    "CREATE TABLE cases_hiv_old () INHERITS (cases_hiv)",
    "CREATE TABLE cases_any () INHERITS (cases)",  # no CHECK of its own: not picked by the value
    "INSERT INTO cases_hiv VALUES (1, 'hiv')",
    "INSERT INTO cases_any VALUES (2, 'flu')",
)
PARTITIONS = ("patients_p1", "patients_p2", "patients_p3", "visits_1a", "visits_1b")
CHILDREN = ("cases_hiv", "cases_hiv_old")


def _masks(tmp_path: Path) -> Path:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - '*.diagnosis'\n")
    return masks


@pytest.mark.postgres
def test_postgres_refuses_a_partition_readable_by_its_own_name(pg_url: str, tmp_path: Path) -> None:
    masks = _masks(tmp_path)
    with pg_scratch(pg_url, "maskfix2_part") as pg:
        for sql in PATIENTS:
            pg.admin.execute(sql)
        # what `grant --mask` printed before: the unmasked columns of every partition
        tables = ", ".join(
            (
                "patients",
                "visits",
                "visits_1",
                "plain",
                "plain_1",
                "cases",
                "cases_any",
                *PARTITIONS,
                *CHILDREN,
            )
        )
        pg.admin.execute(f"GRANT SELECT (id) ON {tables} TO {pg.reader}")
        pg.admin.execute(f"GRANT SELECT (name) ON patients, patients_p1 TO {pg.reader}")
        # a view over a partition reads it with its owner's rights, naming no masked column
        owner = f"{pg.reader}_own"
        pg.admin.execute(f"CREATE ROLE {owner}")
        try:
            pg.admin.execute(f"GRANT USAGE ON SCHEMA public TO {owner}")
            pg.admin.execute(f"GRANT SELECT ON patients_p1 TO {owner}")
            pg.admin.execute("CREATE VIEW hiv AS SELECT id, name FROM patients_p1")
            pg.admin.execute(f"ALTER VIEW hiv OWNER TO {owner}")
            pg.admin.execute(f"GRANT SELECT ON hiv TO {pg.reader}")
            engine = SqlEngine(pg.reader_url)
            try:
                _, _, masked = prepare_masks(engine, str(masks))
                found = mask_findings(engine, masked)
            finally:
                engine.close()
        finally:
            pg.admin.execute(f"DROP OWNED BY {owner}")  # the view too
            pg.admin.execute(f"DROP ROLE {owner}")
        refused = sorted(f.message.split()[1] for f in found if f.message.startswith("partition "))
        assert refused == [f"public.{p}" for p in PARTITIONS], [f.line() for f in found]
        children = sorted(f.message.split()[2] for f in found if f.message.startswith("inheritance child "))
        assert children == [f"public.{c}" for c in CHILDREN], [f.line() for f in found]
        line = next(f.line() for f in found if "child public.cases_hiv_old" in f.message)
        assert "public.cases_hiv has CHECK ((diagnosis = 'hiv'::text)) over masked column diagnosis" in line
        assert "the rows stay readable through public.cases)" in line, line
        assert any(
            f.message.startswith(
                "view public.hiv reads a table whose rows are picked by a masked column (public.patients is"
            )
            for f in found
        ), [f.line() for f in found]
        line = next(f.line() for f in found if "patients_p1" in f.message)
        assert "public.patients is partitioned by masked column diagnosis (LIST (diagnosis))" in line
        assert f"REVOKE SELECT ON public.patients_p1 FROM {pg.reader}" in line, line
        assert not [f for f in found if f.code != "masked-column-partition"], [f.line() for f in found]
        with pytest.raises(SqlConfigError, match="patients_p1 can be read by its own name"):
            serve_masked(pg.reader_url, masks)
        done = run_mcpkit("sql", "doctor", "--dsn", pg.reader_url, "--mask", str(masks))
        assert "fail masks: partition public.patients_p1 can be read by its own name" in done.stdout
        assert "visits_1 can" not in done.stdout and "plain_1" not in done.stdout, done.stdout


@pytest.mark.postgres
def test_postgres_grant_withholds_such_partitions(pg_url: str, tmp_path: Path) -> None:
    masks = _masks(tmp_path)
    with pg_scratch(pg_url, "maskfix2_partg") as pg:
        for sql in PATIENTS:
            pg.admin.execute(sql)
        reader = f"{pg.reader}_g"
        granted = ("patients", "visits", "visits_1", "plain_1", "cases", "cases_any", *PARTITIONS, *CHILDREN)
        tables = ",".join(f"public.{t}" for t in granted)
        done = run_mcpkit(
            "sql", "grant", "--dsn", pg.admin_url, "--role", reader, "--tables", tables, "--mask", str(masks)
        )
        assert done.returncode == 0, done.stderr
        for partition in (*PARTITIONS, *CHILDREN):
            assert f"ON public.{partition} " not in done.stdout, done.stdout
        assert f'GRANT SELECT ("id") ON public.cases_any TO "{reader}"' in done.stdout
        assert f'GRANT SELECT ("id", "name") ON public.patients TO "{reader}"' in done.stdout
        assert f'GRANT SELECT ("id") ON public.visits_1 TO "{reader}"' in done.stdout  # keyed by id above
        assert f'GRANT SELECT ("id") ON public.plain_1 TO "{reader}"' in done.stdout
        try:
            url = apply_grant(pg.admin_url, reader, done.stdout)
            service = serve_masked(url, masks)  # start-up accepts what grant wrote
            try:
                result, _ = service.query("SELECT id, name FROM patients ORDER BY id", call_id="t")
                assert [r[0] for r in result.rows] == [1, 2, 3, 4]
                with pytest.raises(QueryFailed):
                    service.query("SELECT id FROM patients_p1", call_id="t")
            finally:
                service.engine.close()  # type: ignore[attr-defined]
        finally:
            pg.admin.execute(f"DROP OWNED BY {reader}")
            with pg_admin(pg_url) as c:
                c.execute(f"DROP ROLE IF EXISTS {reader}")


@pytest.mark.mysql
def test_mariadb_partition_selection_is_refused_under_masks(mysql_url: str, tmp_path: Path) -> None:
    masks = _masks(tmp_path)
    with mysql_scratch(mysql_url, "maskfix2_part") as my:
        with my.admin.cursor() as c:
            # partitions named like columns: `PARTITION (id)` resolved as a column in the analysis
            c.execute(
                f"CREATE TABLE {my.db}.patients (id INT, name VARCHAR(20), diagnosis VARCHAR(20))"
                " PARTITION BY LIST COLUMNS(diagnosis)"
                " (PARTITION id VALUES IN ('hiv'), PARTITION name DEFAULT)"
            )
            c.execute(
                f"INSERT INTO {my.db}.patients VALUES (1, 'ann', 'hiv'), (2, 'bob', 'flu'), (3, 'cy', 'hiv')"
            )
            c.execute(f"GRANT SELECT (id, name) ON {my.db}.patients TO '{my.reader}'@'%'")
        service = serve_masked(my.reader_url, masks)
        try:
            result, _ = service.query("SELECT id, name FROM patients ORDER BY id", call_id="t")
            assert [r[0] for r in result.rows] == [1, 2, 3]
            for sql in (
                "SELECT id, name FROM patients PARTITION (id)",
                "SELECT p.id FROM patients PARTITION (name) AS p ORDER BY p.id",
                "SELECT id FROM patients WHERE id IN (SELECT id FROM patients PARTITION (id))",
            ):
                with pytest.raises(MaskRefused, match="PARTITION"):
                    service.query(sql, call_id="t")
        finally:
            service.engine.close()  # type: ignore[attr-defined]
