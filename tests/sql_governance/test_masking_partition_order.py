"""Red team mask17 F3: a table partitioned by a masked column is scanned in partition (bound)
order, so an early stop (EXISTS) with a row-dependent error tells which row's masked value falls in
an earlier partition. It was a start-up `scan order` warning only, as the other order leaks of that
class (CLUSTER, a clustered key on a masked column) were refusals: now a partition key over a
masked column (a plain column or an expression, at any level, above or below the masked table) is
a start-up finding (`partitioned-masked`, exit 2, `--allow partition-order:T`), a `fail masks:`
line of `doctor --mask`, and a partition attached while serving fails the next call
(`SOURCE_UNVERIFIED`, the scan-pin re-check walks the partition tree again)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.errors import ToolError
from mcpkit.sql import cli as sqlcli
from tests.sql.sql_support import MysqlScratch, PgScratch, masks_file, mysql_scratch, pg_scratch
from tests.sql.sql_support import run_cli as _run

# Ids out of salary order: the salary-ordered scan reads id 4 first, the id-ordered one id 1.
ROWS = [(1, "Ann", 20), (2, "Bob", 40), (3, "Cy", 50), (4, "Dan", 10), (5, "Eve", 30)]
VALUES = ", ".join(f"({i}, '{n}', {s})" for i, n, s in ROWS)
# answers when the first row scanned is not `id`, else fails: MariaDB drops the ORDER BY mcpkit
# puts inside EXISTS, so the scan stops at the first row (here the first partition's)
FIRST_IS = "SELECT EXISTS (SELECT 1 FROM pay WHERE 1 / (id - {}) > -100) AS e"


def _service(dsn: str, masks: str, *allow: str) -> Any:
    """`sql query`'s service (what `serve` builds), the catalog read on every call."""
    parser = argparse.ArgumentParser()
    sqlcli.register(parser.add_subparsers(dest="command"))
    opts = [a for o in allow for a in ("--allow", o)]
    argv = ["sql", "query", "--dsn", dsn, "--mask", masks, *opts, "--catalog-check-interval", "0", "SELECT 1"]
    return sqlcli._service(parser.parse_args(argv), 100)


def _ask(service: Any, sql: str) -> str:
    try:
        return str(service.query(sql, call_id="t", max_rows=10)[1])
    except ToolError as exc:
        return exc.code


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "partref") as db:
        db.admin.execute(
            f"""
            CREATE TABLE contacts (id int, name text, email text) PARTITION BY RANGE (email);
            CREATE TABLE contacts_a PARTITION OF contacts FOR VALUES FROM ('a') TO ('m');
            CREATE TABLE contacts_m PARTITION OF contacts FOR VALUES FROM ('m') TO ('zzzz');
            CREATE TABLE leads (id int, name text, email text) PARTITION BY HASH (lower(email));
            CREATE TABLE leads_0 PARTITION OF leads FOR VALUES WITH (MODULUS 2, REMAINDER 0);
            CREATE TABLE leads_1 PARTITION OF leads FOR VALUES WITH (MODULUS 2, REMAINDER 1);
            CREATE TABLE events (id int, email text) PARTITION BY RANGE (id);
            CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (0) TO (100) PARTITION BY LIST (email);
            CREATE TABLE events_1x PARTITION OF events_1 DEFAULT;
            CREATE TABLE plain (id int, email text) PARTITION BY RANGE (id);
            CREATE TABLE plain_1 PARTITION OF plain FOR VALUES FROM (0) TO (100);
            GRANT SELECT (id, name) ON contacts, leads TO {db.reader};
            GRANT SELECT (id) ON events, plain TO {db.reader};
            """
        )
        yield db


PG_REFUSED = ("public.contacts", "public.leads", "public.events_1")
PG_ALLOW = [a for t in PG_REFUSED for a in ("--allow", f"partition-order:{t}")]


@pytest.mark.postgres
def test_postgres_start_up_and_doctor_refuse_a_partition_key_over_a_masked_column(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    masks = masks_file(tmp_path, "'*.email'")
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, "SELECT 1")
    assert code == 2, out  # before: served, a warning only
    assert "table public.contacts is partitioned by RANGE (email) over masked column email" in out, out
    assert "table public.leads is partitioned by HASH (lower(email))" in out, out
    assert "table public.events_1 is partitioned by LIST (email)" in out, out
    assert "re-partition public.contacts by visible columns only" in out, out
    assert "(or --allow partition-order:public.contacts)" in out, out
    assert "plain" not in out and "public.events is" not in out, out
    # the opt-ins serve it, each with a warning
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *PG_ALLOW, "SELECT 1")
    assert code == 0, out
    code, out = _run(capsys, "sql", "doctor", "--dsn", pg.reader_url, "--mask", masks)
    assert "fail masks: table public.contacts is partitioned by RANGE (email)" in out, out
    code, out = _run(capsys, "sql", "doctor", "--dsn", pg.reader_url, "--mask", masks, *PG_ALLOW)
    assert "warn masks: table public.contacts is partitioned by RANGE (email)" in out, out
    assert "fail masks: table public.contacts" not in out, out


@pytest.mark.postgres
def test_postgres_a_partition_attached_while_serving_fails_the_next_call(
    pg: PgScratch, tmp_path: Path
) -> None:
    service = _service(pg.reader_url, masks_file(tmp_path, "'*.email'"), *PG_ALLOW[1::2])
    try:
        assert "| 1 |" in _ask(service, "SELECT count(*) AS n FROM (SELECT 1) s")
        assert _ask(service, "SELECT id FROM plain") != "SOURCE_UNVERIFIED"
        # a partition of `plain` (by id) partitioned in turn by the masked e-mail
        pg.admin.execute(
            "CREATE TABLE plain_2 PARTITION OF plain FOR VALUES FROM (100) TO (200) PARTITION BY LIST (email)"
        )
        assert _ask(service, "SELECT id FROM plain") == "SOURCE_UNVERIFIED"  # before: answered
        pg.admin.execute("DROP TABLE plain_2")
        assert _ask(service, "SELECT id FROM plain") != "SOURCE_UNVERIFIED"
    finally:
        service.engine.close()


def _mysql_pay(my: MysqlScratch, partitioned: bool) -> None:
    parts = " PARTITION BY RANGE (salary) (" + ", ".join(
        f"PARTITION p{b} VALUES LESS THAN ({b})" for b in (15, 25, 35, 45)
    )
    with my.admin.cursor() as c:
        c.execute(
            f"CREATE TABLE {my.db}.pay (id INT, name VARCHAR(20), salary INT, PRIMARY KEY (id, salary))"
            + (parts + ", PARTITION pmax VALUES LESS THAN MAXVALUE)" if partitioned else "")
        )
        c.execute(f"INSERT INTO {my.db}.pay VALUES {VALUES}")
        c.execute(f"GRANT SELECT (id, name) ON {my.db}.pay TO '{my.reader}'@'%'")


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "partref") as db:
        yield db


@pytest.mark.mysql
def test_mariadb_partitions_are_scanned_in_masked_order_and_refused(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _mysql_pay(my, partitioned=True)
    masks = masks_file(tmp_path, "pay.salary")
    # PRIMARY KEY (id, salary), as MariaDB requires of the partitioning: a clustered-order finding
    # of its own, accepted; the partitioning is not
    code, out = _run(
        capsys,
        "sql",
        "query",
        "--dsn",
        my.reader_url,
        "--mask",
        masks,
        "--allow",
        "clustered-order:pay",
        "SELECT 1",
    )
    assert code == 2, out  # before: served
    assert "table pay is partitioned by RANGE (`salary`) over masked column salary" in out, out
    assert "(or --allow partition-order:pay)" in out, out
    code, out = _run(capsys, "sql", "doctor", "--dsn", my.reader_url, "--mask", masks)
    assert "fail masks: table pay is partitioned by RANGE (`salary`)" in out, out
    # the leak the opt-in accepts: the first row scanned is the lowest salary's (id 4), not id 1
    service = _service(my.reader_url, masks, "clustered-order:pay", "partition-order:pay")
    try:
        assert _ask(service, FIRST_IS.format(4)) == "TOOL_ERROR"
        assert "| 1 |" in _ask(service, FIRST_IS.format(1))
    finally:
        service.engine.close()


@pytest.mark.mysql
def test_mariadb_control_unpartitioned_scans_in_key_order_and_repartitioning_fails_calls(
    my: MysqlScratch, tmp_path: Path
) -> None:
    _mysql_pay(my, partitioned=False)
    service = _service(my.reader_url, masks_file(tmp_path, "pay.salary"), "clustered-order:pay")
    try:
        assert "| 1 |" in _ask(service, FIRST_IS.format(4))  # id 1 first: the visible key's order
        assert _ask(service, FIRST_IS.format(1)) == "TOOL_ERROR"
        with my.admin.cursor() as c:  # partitioned by the masked salary while serving
            c.execute(
                f"ALTER TABLE {my.db}.pay PARTITION BY RANGE (salary)"
                " (PARTITION p15 VALUES LESS THAN (15), PARTITION pmax VALUES LESS THAN MAXVALUE)"
            )
        assert _ask(service, FIRST_IS.format(4)) == "SOURCE_UNVERIFIED"  # before: answered
    finally:
        service.engine.close()
